"""Finding files (read, write, dedupe) and their replay."""

from .folder import FolderError, ready, write
from .format import Finding, FindingError, fingerprints, read, signature, title
from .replay import DIVERGED, NO_LONGER, REPRODUCES, Replay, replay

__all__ = ["DIVERGED", "NO_LONGER", "REPRODUCES", "Finding", "FindingError", "FolderError", "Replay", "fingerprints",
           "read", "ready", "replay", "signature", "title", "write"]
