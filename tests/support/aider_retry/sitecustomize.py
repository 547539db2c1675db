"""Loaded by the aider under test (its ``PYTHONPATH``): aider retries a rate limit with delays
doubling from 0.125 s until they pass ``aider.models.RETRY_TIMEOUT`` (60 s, a constant with no
setting), about a minute of sleeping. Two seconds keeps five retries, each with the client's
own, so a test sees aider give up the way it does, in seconds."""

import aider.models

aider.models.RETRY_TIMEOUT = 2
