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


MODEL_ERROR = "model-error"
"""The outcome of a run that the model's own code ended: it raised (a handler, a job, its build), or did what a
simulated run refuses (a thread, a socket), or broke the seam's contract. Reported, grouped, minimized and
replayed as a violation of an invariant of this name, and told apart from violations wherever outcomes are
counted (a campaign's exit code is 3)."""

BUILD_RAISED = "the model's build raised "  # how a model error of the build begins (a finding's title reads it)


class ModelFault(Exception):
    """What the harness found wrong in a model while it ran: a call it refuses (a thread, a socket, the real
    world), or a broken contract of the seam (a request no handler takes, a work slice that is not positive).
    ``str()`` is one line; the run ends with it as the model's error, its outcome, like an exception the
    model's own code raised."""


class Stalled(BaseException):
    """Raised by the watchdog (:mod:`dst.runner.watchdog`) where a model's code has held a run too long without
    returning to dst. A ``BaseException``, as ``KeyboardInterrupt`` is, so that ``except Exception`` in the
    model's code lets it through; the run ends as the model's error."""


class ContractError(ModelFault, ValueError):
    """The model broke the contract of the seam it plugs into (see :class:`ModelFault`)."""
