"""The SQLite service of examples/ beside the reference model, in one run: ``python bench/sqlite.py [--quick]``.

Run from the repository's root (the example's model name resolves from there). Three measurements:

1. speed: the same seeds of each model's default scenario (the embedded default for the reference
   model, ``examples/sqlite_leases/scenarios/default.toml`` for the SQLite service, which sets the
   same workload and faults), in alternating rounds; seeds and events per CPU second, and their
   per-round ratio;
2. clean: the SQLite service's default scenario, swarm on, on 2 workers, and each of its bug
   scenarios with the bug switched off: every violation is a false alarm, and the goal is none;
3. finding: each of its bugs hunted from 5 starting seeds (one core, swarm on): seeds to the first
   violation and the invariant hit.

Prints tables and writes every figure to ``bench/results/sqlite.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from statistics import median
from typing import Any

import attrs
from rich.console import Console
from rich.table import Table

from dst.explore.fuzz import campaign, seeds
from dst.explore.selftest import bug_scenario, hunt
from dst.models import resolve
from dst.scenario import load_scenario

from timing import SeedRunner, interleave, paired_ratio, summary

IMPL = "examples.sqlite_leases:model"
ROOT = Path(__file__).resolve().parents[1]
OUT = Path(__file__).parent / "results" / "sqlite.json"


@attrs.frozen
class Settings:
    rounds: int = 20
    seeds_per_round: int = 10
    clean_seeds: int = 1_200  # of the default scenario
    clean_per_bug: int = 200  # of each bug scenario, its bug off
    hunt_starts: tuple[int, ...] = (1, 1001, 2001, 3001, 4001)
    hunt_max_seeds: int = 2_000


QUICK = Settings(rounds=3, seeds_per_round=3, clean_seeds=40, clean_per_bug=10, hunt_starts=(1,), hunt_max_seeds=200)


def speed(s: Settings) -> dict[str, Any]:
    first = 1_000_000  # not seeds the other sections run
    span = range(first, first + s.rounds * s.seeds_per_round)
    runners = {"reference": SeedRunner(load_scenario(), batch=s.seeds_per_round, seeds=span),
               "sqlite": SeedRunner(load_scenario(ROOT / "examples/sqlite_leases/scenarios/default.toml"),
                                    batch=s.seeds_per_round, seeds=span)}
    rates = interleave(runners, s.rounds)
    return {name: {"seeds": r.runs, "events": r.events, "violations": r.violations,
                   "events_per_s": summary(rates[name]), "seeds_per_s": summary(r.seed_rates)}
            for name, r in runners.items()} | {
        "sqlite/reference seeds_per_s": paired_ratio(runners["sqlite"].seed_rates, runners["reference"].seed_rates)}


def clean(s: Settings) -> dict[str, Any]:
    jobs = {"default": (load_scenario(ROOT / "examples/sqlite_leases/scenarios/default.toml"), s.clean_seeds)}
    jobs |= {f"{bug.slug}, bug off": (attrs.evolve(bug_scenario(bug.slug, IMPL), bugs=()), s.clean_per_bug)
             for bug in resolve(IMPL).bugs}
    out = {}
    for name, (scenario, count) in jobs.items():
        began = time.perf_counter()
        outcomes = list(campaign(scenario, seeds(1, 1 + count, None), use_swarm=True, workers=2))
        wall = time.perf_counter() - began
        bad = [attrs.asdict(o) for o in outcomes if o.invariant is not None]
        out[name] = {"seeds": len(outcomes), "violations": bad, "wall_seconds": wall,
                     "seeds_per_wall_s": len(outcomes) / wall}
    return out


def finding(s: Settings) -> dict[str, Any]:
    out = {}
    for bug in resolve(IMPL).bugs:
        hunts = []
        for start in s.hunt_starts:
            found, n, cpu = hunt(bug_scenario(bug.slug, IMPL), start=start, max_seeds=s.hunt_max_seeds, seconds=60,
                                 use_swarm=True, workers=1, clock=time.process_time)
            hunts.append({"start": start, "seeds": n, "cpu_seconds": cpu, "invariant": found and found.invariant})
        out[bug.slug] = {"breaks": bug.breaks, "hunts": hunts,
                         "found": sum(h["invariant"] is not None for h in hunts),
                         "expected_only": all(h["invariant"] in bug.breaks for h in hunts if h["invariant"]),
                         "median_seeds": median(h["seeds"] for h in hunts)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke test; its figures are not for quoting")
    args = parser.parse_args()
    os.chdir(ROOT)
    s = QUICK if args.quick else Settings()
    began = time.perf_counter()
    r = {"python": sys.version.split()[0], "cpus": os.cpu_count(), "settings": attrs.asdict(s),
         "speed": speed(s), "clean": clean(s), "finding": finding(s)}
    r["wall_seconds"] = time.perf_counter() - began
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(r, indent=2))

    console = Console()
    t = Table(title="speed: each model's default scenario, the same seeds, alternating rounds (CPU time)")
    for col in ("model", "seeds", "events/seed", "seeds/s", "events/s", "violations"):
        t.add_column(col)
    for name in ("reference", "sqlite"):
        m = r["speed"][name]
        t.add_row(name, str(m["seeds"]), f"{m['events'] / m['seeds']:,.0f}", f"{m['seeds_per_s']['median']:.1f}",
                  f"{m['events_per_s']['median']:,.0f}", str(m["violations"]))
    ratio = r["speed"]["sqlite/reference seeds_per_s"]
    console.print(t)
    console.print(f"sqlite / reference seeds/s: {ratio['median']:.3f} (IQR {ratio['q1']:.3f}-{ratio['q3']:.3f})")
    t = Table(title="clean: the SQLite service's scenarios with every bug off (swarm, 2 workers)")
    for col in ("scenario", "seeds", "violations", "seeds/s (wall)"):
        t.add_column(col)
    for name, c in r["clean"].items():
        t.add_row(name, str(c["seeds"]), str(len(c["violations"])), f"{c['seeds_per_wall_s']:.1f}")
    console.print(t)
    t = Table(title="finding: each bug from each start, one core, swarm on")
    for col in ("bug", "found", "median seeds", "expected invariants only"):
        t.add_column(col)
    for slug, f in r["finding"].items():
        t.add_row(slug, f"{f['found']}/{len(f['hunts'])}", str(f["median_seeds"]), "yes" if f["expected_only"] else "NO")
    console.print(t)
    console.print(f"wrote {OUT} in {r['wall_seconds']:.0f}s")


if __name__ == "__main__":
    main()
