"""An operator's work outside a run: hold, release, cancel, re-arm; delete and prune tasks; gc."""
