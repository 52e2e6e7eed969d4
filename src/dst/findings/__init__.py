"""Finding files (read, write, dedupe) and their replay."""

from .files import Finding, FindingError, fingerprints, read, signature, title, write
from .replay import DIVERGED, NO_LONGER, REPRODUCES, Replay, replay

__all__ = ["DIVERGED", "NO_LONGER", "REPRODUCES", "Finding", "FindingError", "Replay", "fingerprints", "read",
           "replay", "signature", "title", "write"]
