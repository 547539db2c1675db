"""The cli tests' fixtures (shared by both tiers)."""

from support.cli_fixtures import *  # noqa: F403
