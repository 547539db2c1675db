"""Bounds of a contract's counters, in a module that imports nothing.

The command line's flags declare them too; keeping them here lets a command's options be built
without importing the contract's pydantic models.
"""

from __future__ import annotations

MAX_ATTEMPTS_LIMIT = 100
MAX_RECOVERY_LIMIT = 20
