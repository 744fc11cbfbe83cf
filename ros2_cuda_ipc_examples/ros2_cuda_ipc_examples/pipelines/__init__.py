"""Pipelines of the example nodes: their definitions, the runner (``pipeline``) with its live table, and ``demo``."""
