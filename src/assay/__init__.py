"""assay: run AI coding agents on real repositories and tell the truth about what happened."""

__version__ = "0.1.0"
