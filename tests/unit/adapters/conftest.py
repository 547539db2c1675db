"""The adapters tests' fixtures (shared by both tiers)."""

from support.adapter_fixtures import *  # noqa: F403
