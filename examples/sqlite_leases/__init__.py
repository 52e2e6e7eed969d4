"""A lease/slot service on SQLite under dst: the worked example of a real service behind the seam.

Name it with ``[model] impl = "examples.sqlite_leases:model"`` (from the repository's root).
"""

from .model import model

__all__ = ["model"]
