"""dst's version: the one place it is written (pyproject.toml reads it from here; a finding records it)."""

__version__ = "0.1.0"
