"""The run's orchestration, deterministic and written only against the Effects interface:
no adapter, so a Temporal workflow can replay it."""
