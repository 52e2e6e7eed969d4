"""Side-by-side timing: contenders run in rotating order, round after round, so drift on a
noisy machine hits them all alike; figures are medians, ratios are medians of per-round ratios."""

from __future__ import annotations

from itertools import count
from statistics import median
from time import perf_counter
from typing import Callable, Iterable

from dst.runner import run
from dst.scenario import Scenario

Contender = Callable[[], int]  # does one round of work, returns how many units (events) it did


def interleave(contenders: dict[str, Contender], rounds: int) -> dict[str, list[float]]:
    """Time every contender once per round, rotating who goes first; units per second per round."""
    names = list(contenders)
    rates: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        shift = r % len(names)
        for name in names[shift:] + names[:shift]:
            start = perf_counter()
            units = contenders[name]()
            rates[name].append(units / (perf_counter() - start))
    return rates


def paired_ratio(a: list[float], b: list[float]) -> float:
    """Median over rounds of a/b: each round's pair ran back to back, so drift cancels."""
    return median(x / y for x, y in zip(a, b, strict=True))


def summary(rates: list[float]) -> dict[str, object]:
    return {"median": median(rates), "runs": rates}


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
        start, events, done = perf_counter(), 0, 0
        while done < self.batch or perf_counter() - start < self.min_seconds:
            result = run(self.scenario, next(self.seeds))
            events += result.events
            self.violations += not result.ok
            done += 1
        self.seed_rates.append(done / (perf_counter() - start))
        self.runs += done
        self.events += events
        return events
