"""One base for what a user got wrong, and the one line it becomes.

Every error a user can cause (a bad scenario or finding file, a model that cannot be loaded, a folder or a
page that cannot be written, shards that do not join, a cluster that cannot be reached) is a
:class:`UserError`: its ``str()`` is one line naming the file or flag and what was expected. The command
line prints ``prefix + str(error)`` and exits 2, in one place; a library caller catches ``UserError``.
"""

from __future__ import annotations


class UserError(ValueError):
    """Something the user gave cannot be used; ``str()`` is one line."""

    prefix = "dst: "  # what the command line puts before it

    def line(self) -> str:
        """The error as the command line prints it."""
        return f"{self.prefix}{self}"
