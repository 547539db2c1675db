"""The ``assay`` command."""
