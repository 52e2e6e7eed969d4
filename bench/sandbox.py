"""What the asyncio mode's sandbox costs, beside time-machine: ``python bench/sandbox.py [--rounds N]``.

Three measurements, CPU time (``time.process_time``, which neither patches), contenders in rotating order
round after round, medians over rounds with the interquartile range:

1. the first entry in a process (it builds the patches once and imports ``_sqlite3`` and
   ``concurrent.futures.process``, so that every run refuses the same calls);
2. entering and leaving: ``with Sandbox(...): pass``; ``time_machine.travel(0, tick=False)`` started and
   stopped; and an empty ``with`` of a no-op context manager as the floor;
3. one call of each patched function: outside any sandbox (the real one), inside the sandbox, and inside
   time-machine's travel for the ones it patches (it does not patch ``monotonic`` or ``perf_counter``).
   Figures include the loop's own cost (the ``no-op`` row: a call of an empty Python function).

Prints tables and writes every figure to ``bench/results/sandbox.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import platform
import sys
import time
import uuid
from pathlib import Path
from statistics import median, quantiles
from typing import Any, Callable

from rich.console import Console
from rich.table import Table

OUT = Path(__file__).parent / "results" / "sandbox.json"
clock = time.process_time  # not patched by the sandbox nor by time-machine

try:
    import time_machine
except ImportError:  # the comparison is skipped without it
    time_machine = None


def first_entry() -> float:
    """µs of the first ``with Sandbox(...)`` in this process (the patches are built then)."""
    from dst.sandbox import Sandbox

    start = clock()
    with Sandbox(wall_ms=lambda: 0, monotonic_ms=lambda: 0, seed=0):
        pass
    return (clock() - start) * 1e6


def stats(values: list[float]) -> dict[str, Any]:
    q1, _, q3 = quantiles(values, method="inclusive") if len(values) > 1 else values * 3
    return {"median": median(values), "q1": q1, "q3": q3, "runs": values}


def rotate(contenders: dict[str, Callable[[], float]], rounds: int) -> dict[str, dict[str, Any]]:
    names = list(contenders)
    runs: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        shift = r % len(names)
        for name in names[shift:] + names[:shift]:
            runs[name].append(contenders[name]())
    return {name: stats(values) for name, values in runs.items()}


def per_pair(enter: Callable[[], Any], leave: Callable[[Any], None], n: int) -> Callable[[], float]:
    def one_round() -> float:
        start = clock()
        for _ in range(n):
            leave(enter())
        return (clock() - start) / n * 1e6
    return one_round


def per_call(fn: Callable[[], Any], n: int, within: Callable[[], contextlib.AbstractContextManager[Any]]
             ) -> Callable[[], float]:
    def one_round() -> float:
        with within():
            start = clock()
            for _ in range(n):
                fn()
            return (clock() - start) / n * 1e9
    return one_round


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--pairs", type=int, default=400, help="enter/exit pairs per round")
    parser.add_argument("--calls", type=int, default=20_000, help="calls per round")
    args = parser.parse_args()
    first = first_entry()

    from dst.sandbox import Sandbox

    def sandbox() -> Sandbox:
        return Sandbox(wall_ms=lambda: 1_767_225_600_123, monotonic_ms=lambda: 5_000, seed=7)

    def enter_sandbox() -> Any:
        box = sandbox()
        box.__enter__()
        return box

    entering: dict[str, Callable[[], float]] = {
        "dst Sandbox": per_pair(enter_sandbox, lambda box: box.__exit__(None, None, None), args.pairs),
        "no-op context manager": per_pair(lambda: contextlib.nullcontext().__enter__(), lambda _: None, args.pairs),
    }
    if time_machine is not None:
        def enter_travel() -> Any:
            travel = time_machine.travel(0, tick=False)
            travel.start()
            return travel
        entering["time-machine travel(tick=False)"] = per_pair(enter_travel, lambda travel: travel.stop(), args.pairs)
    enter_results = rotate(entering, args.rounds)

    utc = datetime.timezone.utc
    functions: dict[str, Callable[[], Any]] = {
        "no-op": lambda: None,
        "time.time()": time.time,
        "time.monotonic()": time.monotonic,
        "time.perf_counter()": time.perf_counter,
        "time.time_ns()": time.time_ns,
        "datetime.now()": datetime.datetime.now,
        "datetime.now(utc)": lambda: datetime.datetime.now(utc),
        "date.today()": datetime.date.today,
        "os.urandom(16)": lambda: os.urandom(16),
        "uuid.uuid4()": uuid.uuid4,
        "open(file).close()": lambda: open(__file__, "rb").close(),
    }
    tm_patches = {"time.time()", "time.time_ns()", "datetime.now()", "datetime.now(utc)", "date.today()"}
    call_results: dict[str, dict[str, dict[str, Any]]] = {}
    for label, fn in functions.items():
        n = args.calls // 20 if label.startswith("open") else args.calls
        contenders = {"real": per_call(fn, n, contextlib.nullcontext), "dst Sandbox": per_call(fn, n, sandbox)}
        if time_machine is not None and label in tm_patches | {"no-op"}:
            contenders["time-machine"] = per_call(fn, n, lambda: time_machine.travel(0, tick=False))
        call_results[label] = rotate(contenders, args.rounds)

    console = Console()
    tm_version = getattr(time_machine, "__version__", None)
    if time_machine is not None and tm_version is None:
        from importlib.metadata import version
        tm_version = version("time-machine")
    console.print(f"Python {platform.python_version()}, time-machine {tm_version}, {args.rounds} rounds; "
                  f"first entry in the process: {first:.0f} µs")
    table = Table(title="Entering and leaving (µs per pair)")
    for column in ("contender", "median", "IQR"):
        table.add_column(column, justify="right" if column != "contender" else "left")
    for name, s in enter_results.items():
        table.add_row(name, f"{s['median']:.1f}", f"{s['q1']:.1f}-{s['q3']:.1f}")
    console.print(table)
    table = Table(title="One call (ns, loop included)")
    for column in ("call", "real", "dst Sandbox", "time-machine"):
        table.add_column(column, justify="right" if column != "call" else "left")
    for label, results in call_results.items():
        table.add_row(label, *(f"{results[c]['median']:.0f}" if c in results else "-"
                               for c in ("real", "dst Sandbox", "time-machine")))
    console.print(table)
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(json.dumps({"python": platform.python_version(), "time_machine": tm_version,
                               "machine": platform.platform(), "argv": sys.argv, "first_entry_us": first,
                               "enter_exit_us": enter_results, "call_ns": call_results}, indent=1))


if __name__ == "__main__":
    main()
