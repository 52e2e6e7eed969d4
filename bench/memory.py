"""Peak memory of a batch of seeds, read in a fresh child process.

The peak is ``VmHWM`` from ``/proc/self/status`` (Linux), not ``getrusage().ru_maxrss``: Linux
carries ``ru_maxrss`` across fork and exec, so a child would report its parent's peak.
"""

from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from dst.runner import run
from dst.scenario import load_scenario


def _max_rss_kib() -> int:
    status = Path("/proc/self/status").read_text()
    return int(status.split("VmHWM:", 1)[1].split()[0])  # "VmHWM:   21304 kB"


def _peaks(checkpoints: tuple[int, ...]) -> dict[str, int]:
    """In the child: run seeds 0, 1, ... of the default scenario, reading the peak RSS after one
    seed (the baseline: imports and a first run) and after each checkpoint's number of seeds."""
    scenario = load_scenario()
    peaks = {}
    for seed in range(max(checkpoints)):
        run(scenario, seed)
        if seed == 0:
            peaks["baseline"] = _max_rss_kib()
        if seed + 1 in checkpoints:
            peaks[str(seed + 1)] = _max_rss_kib()
    return peaks


def peak_rss(checkpoints: tuple[int, ...]) -> dict[str, int]:
    """Peak RSS in KiB of one fresh process: ``baseline`` and one entry per checkpoint."""
    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(_peaks, checkpoints).result()
