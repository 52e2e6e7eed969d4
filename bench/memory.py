"""Memory of a batch of seeds, read in a fresh child process.

Two figures at each checkpoint: the peak RSS, ``VmHWM`` from ``/proc/self/status`` (Linux;
not ``getrusage().ru_maxrss``, which Linux carries across fork and exec, so a child would
report its parent's peak), and the live Python heap after a collection, as
``sys.getallocatedblocks()``. A leak shows as live blocks growing with the number of seeds.
The peak also counts garbage waiting for the cyclic collector: the objects one run leaves in
reference cycles (counted here) pile up until a full collection frees them.
"""

from __future__ import annotations

import gc
import multiprocessing
import sys
from concurrent.futures import ProcessPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any, Callable

from dst.runner import run
from dst.scenario import load_scenario


def _reading() -> dict[str, int]:
    gc.collect()
    status = Path("/proc/self/status").read_text()
    peak_kib = int(status.split("VmHWM:", 1)[1].split()[0])  # "VmHWM:   21304 kB"
    return {"peak_rss_kib": peak_kib, "live_blocks": sys.getallocatedblocks()}


def _cyclic_garbage(run_once: Callable[[], object]) -> int:
    """How many objects ``run_once`` leaves that only the cyclic collector can free."""
    gc.collect()
    gc.disable()
    try:
        run_once()
        return gc.collect()
    finally:
        gc.enable()


def _readings(checkpoints: tuple[int, ...]) -> dict[str, Any]:
    """In the child: count seed 0's cyclic garbage, then run seeds 0, 1, ... of the default
    scenario, reading after the first (the baseline: imports and a run) and at each checkpoint."""
    scenario = load_scenario()
    readings: dict[str, Any] = {"cyclic_garbage_per_run": _cyclic_garbage(partial(run, scenario, 0)), "violations": 0}
    for seed in range(max(checkpoints)):
        readings["violations"] += not run(scenario, seed).ok
        if seed == 0:
            readings["baseline"] = _reading()
        if seed + 1 in checkpoints:
            readings[str(seed + 1)] = _reading()
    return readings


def memory_readings(checkpoints: tuple[int, ...]) -> dict[str, Any]:
    """One fresh process's readings: ``baseline``, one per checkpoint (a number of seeds),
    ``cyclic_garbage_per_run`` (of seed 0) and ``violations`` (over all the seeds)."""
    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(_readings, checkpoints).result()
