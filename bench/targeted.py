"""Targeted faults against untargeted ones, for every catalogue bug: ``python bench/targeted.py [--quick]``.

For each bug, its scenario as shipped ("untargeted") and the same scenario with half of every enabled
fault kind aimed at the model's sensitive moments (``targeted = 0.5``), each hunted from the same
starting seeds (1, 1001, ..., 9001) on one core with swarm on, as ``dst selftest`` hunts: the seeds
and CPU seconds to the first violation, and whether its invariant is one the bug lists. The first
hunt's violation of each mode is then minimized as ``dst fuzz`` does, and its size reported (steps,
faults written as steps). Writes every figure to ``bench/results/targeted.json``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from statistics import median
from typing import Any

import attrs
from rich.console import Console
from rich.table import Table

from dst.explore.record import minimize
from dst.explore.selftest import bug_scenario, hunt
from dst.reference.bugs import CATALOGUE
from dst.scenario import Scenario

OUT = Path(__file__).parent / "results" / "targeted.json"
AIMED = 0.5


def aimed(scenario: Scenario) -> Scenario:
    kinds = {name: attrs.evolve(rate, targeted=AIMED) for name, rate in scenario.faults.kinds() if rate.rate > 0}
    return attrs.evolve(scenario, faults=attrs.evolve(scenario.faults, **kinds))


def hunts(scenario: Scenario, starts: tuple[int, ...], breaks: tuple[str, ...]) -> dict[str, Any]:
    records = []
    for start in starts:
        found, n, cpu = hunt(scenario, start=start, max_seeds=2_000, seconds=30, use_swarm=True, workers=1,
                             clock=time.process_time)
        records.append({"start": start, "seeds": n, "cpu_seconds": cpu, "seed": found and found.seed,
                        "invariant": found and found.invariant})
    hits = [r for r in records if r["invariant"]]
    shrunk = minimize(scenario, hits[0]["seed"], use_swarm=True) if hits else None
    return {"hunts": records, "found": len(hits), "expected_only": all(r["invariant"] in breaks for r in hits),
            "median_seeds": median(r["seeds"] if r["invariant"] else float("inf") for r in records),
            "median_cpu_seconds": median(r["cpu_seconds"] if r["invariant"] else float("inf") for r in records),
            "minimized_steps": shrunk and shrunk.steps_after,
            "minimized": shrunk and [s.describe() for s in shrunk.scenario.steps or ()]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="two starts per bug: a smoke test")
    args = parser.parse_args()
    starts = (1, 1001) if args.quick else tuple(range(1, 10_000, 1000))
    began = time.perf_counter()
    results = {bug.slug: {mode: hunts(s, starts, bug.breaks)
                          for mode, s in (("untargeted", bug_scenario(bug.slug)),
                                          ("targeted", aimed(bug_scenario(bug.slug))))}
               for bug in CATALOGUE}
    report = {"starts": starts, "aimed": AIMED, "bugs": results, "wall_seconds": time.perf_counter() - began}
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(report, indent=2))

    table = Table(title=f"seeds (and CPU s) to the first violation, median of {len(starts)} hunts; minimized steps")
    for col in ("bug", "untargeted seeds", "CPU s", "steps", "targeted seeds", "CPU s", "steps", "found"):
        table.add_column(col)
    for slug, r in results.items():
        u, t = r["untargeted"], r["targeted"]
        table.add_row(slug, str(u["median_seeds"]), f"{u['median_cpu_seconds']:.3f}", str(u["minimized_steps"]),
                      str(t["median_seeds"]), f"{t['median_cpu_seconds']:.3f}", str(t["minimized_steps"]),
                      f"{u['found']}/{len(starts)}, {t['found']}/{len(starts)}"
                      + ("" if u["expected_only"] and t["expected_only"] else " UNEXPECTED"))
    Console().print(table)
    print(f"wrote {OUT} in {report['wall_seconds']:.0f}s")


if __name__ == "__main__":
    main()
