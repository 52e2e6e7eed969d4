"""Side-by-side timing: contenders run in rotating order, round after round, so drift on a
noisy machine hits them all alike. Figures are medians over rounds; a ratio is the median of
the per-round ratios (each round's pair ran back to back), with its interquartile range.
Short rounds and many of them pair better than long ones on a shared, noisy machine.

Time is this process's CPU time (``time.process_time``) by default, not the wall clock: the code
timed is single-threaded and CPU-bound, and on a shared two-core machine the wall clock also
counts the moments another process had the core. Work spread over worker processes is the
exception (this process's CPU time does not see it): ``interleave`` takes the wall clock for it.
"""

from __future__ import annotations

from itertools import count
from statistics import median, quantiles
from time import process_time as clock
from typing import Any, Callable, Iterable, Mapping

from dst.runner import run
from dst.scenario import Scenario

Contender = Callable[[], int]  # does one round of work, returns how many units (events) it did


def interleave(contenders: Mapping[str, Contender], rounds: int,
               clock: Callable[[], float] = clock) -> dict[str, list[float]]:
    """Time every contender once per round, rotating who goes first; units per second per round."""
    names = list(contenders)
    rates: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        shift = r % len(names)
        for name in names[shift:] + names[:shift]:
            start = clock()
            units = contenders[name]()
            rates[name].append(units / (clock() - start))
    return rates


def summary(values: list[float]) -> dict[str, Any]:
    """Median, quartiles and every value (the quartiles are the median when there is one value)."""
    q1, _, q3 = quantiles(values, method="inclusive") if len(values) > 1 else values * 3
    return {"median": median(values), "q1": q1, "q3": q3, "runs": values}


def paired_ratio(a: list[float], b: list[float]) -> dict[str, Any]:
    """The per-round ratios a/b, summarised."""
    return summary([x / y for x, y in zip(a, b, strict=True)])


class SeedRunner:
    """A contender running a scenario's seeds in order: each call runs at least ``batch`` seeds
    and keeps going until ``min_seconds`` have passed. Keeps totals across calls."""

    def __init__(self, scenario: Scenario, batch: int = 1, min_seconds: float = 0.0,
                 seeds: Iterable[int] | None = None) -> None:
        self.scenario = scenario
        self.batch = batch
        self.min_seconds = min_seconds
        self.seeds = iter(seeds if seeds is not None else count())
        self.runs = self.events = self.violations = 0
        self.seed_rates: list[float] = []  # seeds per second, one per call

    def __call__(self) -> int:
        start, events, done = clock(), 0, 0
        while done < self.batch or clock() - start < self.min_seconds:
            result = run(self.scenario, next(self.seeds))
            events += result.events
            self.violations += not result.ok
            done += 1
        self.seed_rates.append(done / (clock() - start))
        self.runs += done
        self.events += events
        return events
