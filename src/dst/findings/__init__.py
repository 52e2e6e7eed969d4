"""Finding files (read, write, dedupe) and their replay."""

from .files import Finding, FindingError, FolderError, fingerprints, read, ready, signature, title, write
from .replay import DIVERGED, NO_LONGER, REPRODUCES, Replay, replay

__all__ = ["DIVERGED", "NO_LONGER", "REPRODUCES", "Finding", "FindingError", "FolderError", "Replay", "fingerprints",
           "read", "ready", "replay", "signature", "title", "write"]
