"""The outside world (files, processes, git, models), each behind a small interface."""
