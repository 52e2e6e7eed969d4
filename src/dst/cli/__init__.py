"""The ``dst`` command: the only place that parses arguments and picks exit codes.

:func:`main` parses (:mod:`.parser`), calls the command's handler (one run: :mod:`.one_run`; a campaign:
:mod:`.campaigns`; a page: :mod:`.pages`; a model's bugs: :mod:`.bugs`) and turns what it returns or
raises into the exit code; where it writes is :mod:`.output`'s.

Exit codes: 0 no violation (``replay``: every finding reproduces exactly); 1 a violation
(``run --check-determinism``: a run that did not replay identically; ``selftest``: a bug
missed or a false alarm; ``replay``: a finding that no longer reproduces or diverged);
2 a usage or input error (a bad flag, scenario or finding file), or output that cannot be
written (a full disk, an I/O error, standard output closed: said in one line); 130 a campaign
interrupted before it found anything (Ctrl-C; 143 for SIGTERM); 141 a reader that went away
(``dst run --trace | head``: the output stops quietly, as a tool that SIGPIPE ends, and the
verdict is not given: 141 whatever it would have been).

Every error is one line on stderr, ``dst: <file>: <key>: expected ...``, never a traceback; text
from outside dst (names, paths, messages) is printed as text: never read as rich markup, and
with control characters shown as escapes (``\\x1b``) rather than sent to the terminal.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import signal
import sys
import threading
from typing import Callable, NoReturn, Sequence

from .._supervise import done
from ..errors import UserError
from ..explore.pool import Terminated
from . import bugs, campaigns, one_run, pages
from .command import (EXIT_BROKEN_PIPE, EXIT_INTERRUPTED, EXIT_MODEL_ERROR, EXIT_OK, EXIT_TERMINATED, EXIT_USAGE,
                      EXIT_VIOLATION)
from .output import OutputError, Stream, error, silence
from .parser import build_parser

__all__ = ["EXIT_BROKEN_PIPE", "EXIT_INTERRUPTED", "EXIT_MODEL_ERROR", "EXIT_OK", "EXIT_TERMINATED", "EXIT_USAGE",
           "EXIT_VIOLATION", "build_parser", "entry", "main"]

# Each command's handler, by its name in the parser: it returns the exit code.
_COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "run": one_run.dst_run, "shrink": one_run.dst_shrink, "replay": one_run.dst_replay,
    "fuzz": campaigns.dst_fuzz, "merge": campaigns.dst_merge,
    "show": pages.dst_show,
    "bugs": bugs.dst_bugs, "selftest": bugs.dst_selftest,
}


def _terminate(signum: int, frame: object) -> None:
    raise Terminated()  # SIGTERM stops dst as Ctrl-C does: cleanly, with what it has so far


def entry() -> NoReturn:
    """The ``dst`` program: :func:`main`, then exit with its code, without waiting for threads a model started
    and left running (a non-daemon thread would keep the process alive after it printed its result)."""
    if hasattr(signal, "pthread_sigmask"):
        # A process inherits its parent's blocked signals: one started by a process that held Ctrl-C and SIGTERM
        # (as a run's build and close hold them) would never see them, and a campaign would not stop. They are dst's.
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        # Ignored, as a shell without job control starts a background command: Ctrl-C sent to dst still stops it.
        signal.signal(signal.SIGINT, signal.default_int_handler)
    code = main()
    strays = [t.name for t in threading.enumerate()
              if t is not threading.main_thread() and not t.daemon and t.is_alive()]
    if strays:
        shown = ", ".join(strays[:3]) + (f" and {len(strays) - 3} more" if len(strays) > 3 else "")
        error(f"dst: note: the model left {len(strays)} thread(s) running ({shown}); dst exits without them")
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        done()  # dst ends its process itself: the supervisor passes the code on
        os._exit(code)  # what Python's exit would do, bar joining those threads
    sys.exit(code)


def main(argv: Sequence[str] | None = None) -> int:
    """The ``dst`` command; returns its exit code. Standard output is flushed here, not at the interpreter's
    exit, so a write that fails is said (or, for a closed pipe, silenced) while the exit code can still say so."""
    out, err = sys.stdout, sys.stderr
    sys.stderr = Stream.around(err, "errors") if err is not None else io.StringIO()  # 2>&-: nowhere to say anything
    try:
        if out is None:  # >&-: no result could be seen, so nothing is run
            error("dst: cannot write output: standard output is closed")
            return EXIT_USAGE
        sys.stdout = Stream.around(out, "output")
        try:
            code = _main(argv)
            sys.stdout.flush()
            return code
        except OutputError as e:
            # The interpreter flushes again at exit: that must go nowhere rather than fail with a traceback.
            silence(out if e.stream == "output" else err)
            if e.broken_pipe:
                return EXIT_BROKEN_PIPE
            error(f"dst: cannot write {e.stream}: {e.why}")
            return EXIT_USAGE
    finally:
        sys.stdout, sys.stderr = out, err


def _main(argv: Sequence[str] | None) -> int:
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        args = build_parser().parse_args(argv)
        return _COMMANDS[args.command](args)
    except SystemExit as e:  # argparse's --help and --version
        return e.code if isinstance(e.code, int) else EXIT_OK
    except UserError as e:  # a bad flag, file, model, folder, page, shard or cluster: one line, exit 2
        error(e.line())
        return EXIT_USAGE
    except Terminated:
        error("dst: terminated")
        return EXIT_TERMINATED
    except KeyboardInterrupt:
        error("dst: interrupted")
        return EXIT_INTERRUPTED
    finally:
        signal.signal(signal.SIGTERM, previous)


