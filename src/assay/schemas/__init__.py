"""The JSON Schemas assay ships (read with importlib.resources)."""
