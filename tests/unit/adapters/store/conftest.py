"""The adapters/store tests' fixtures (shared by both tiers)."""

from support.store_fixtures import *  # noqa: F403
