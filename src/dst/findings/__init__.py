"""Finding files: made from a run, read, written once per signature, and replayed."""

from .folder import FolderError, ready, write
from .format import Consequence, Finding, FindingError, fingerprints, read, signature, title
from .make import finding_of, save_finding
from .replay import DIVERGED, NO_LONGER, REPRODUCES, Replay, replay

__all__ = ["DIVERGED", "NO_LONGER", "REPRODUCES", "Consequence", "Finding", "FindingError", "FolderError", "Replay", "finding_of",
           "fingerprints", "read", "ready", "replay", "save_finding", "signature", "title", "write"]
