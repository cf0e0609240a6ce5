"""The checks, one small class each; validators/registry.py lists them in run order."""
