"""The web tests' fixtures (shared by both tiers)."""

from support.web_fixtures import *  # noqa: F403
