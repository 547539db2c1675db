"""The web tests' fixtures (shared by both tiers)."""

from support.browser import browser, page  # noqa: F401  (the browser tests' fixtures)
from support.web_fixtures import *  # noqa: F403
