"""Ctrl-C and SIGTERM held off while a model's build or close runs."""

from __future__ import annotations

import signal


class SignalsHeld:
    """Ctrl-C and SIGTERM wait until the block is done: a model's build and close are not cut halfway, so
    what a build opened is closed even in a run that a signal stops. (A plain class: entering the block
    costs as few bytecodes as can be, each one a moment a signal could still strike before the hold.)"""

    __slots__ = ("_mask",)
    _HELD = (signal.SIGINT, signal.SIGTERM)

    def __enter__(self) -> None:
        self._mask = None
        try:
            self._mask = signal.pthread_sigmask(signal.SIG_BLOCK, self._HELD) if _CAN_HOLD else None
        except BaseException:
            # Raised into this thread (the watchdog's Stalled) after the block and before it was noted: without
            # this, with no __exit__ to come, Ctrl-C and SIGTERM would stay blocked for good.
            if _CAN_HOLD:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, self._HELD)
            raise

    def __exit__(self, *exc: object) -> None:
        if self._mask is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, self._mask)


_CAN_HOLD = hasattr(signal, "pthread_sigmask")
