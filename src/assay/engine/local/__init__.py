"""The local executor: every effect of a run performed in-process, on this machine."""
