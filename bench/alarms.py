"""No false alarm on the correct model, at scale: ``python bench/alarms.py [--scenarios N] [--seeds K] [--model IMPL]``.

Draws N scenarios (from index ``--first``, 0 by default) from the reference model's whole key space (``dst.explore.space``: scenario
``i`` from ``random.Random(i)``, so any one can be drawn again) and runs K seeds of each with every
bug off (odd seeds with swarm testing on, as a campaign runs them), on every core. Counts each run's outcome: ``ok``, ``undrained`` and ``over-budget``
(unjudged, with why) and ``violation`` — which must stay at 0: every alarm is a false one here.
Scenarios that dst refuses on load are counted apart.
``--model IMPL`` runs another model on the drawn scenarios (``examples.sqlite_leases:model`` from the repository's
root): each keeps the keys that model has (its own options, the limits and store latency every model has), and
no runs part (a lease model; a model that serves runs is the reference's own kind). Prints the figures and the first violations
(scenario index and seed, to draw again), and writes them to ``bench/results/alarms.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import attrs

from dst.explore.space import scenario_doc
from dst.models import resolve
from dst.runner.swarm import swarm
from dst.runner import run
from dst.scenario import ScenarioError, parse_scenario
from dst.scenario.schema import ModelConfig

OUT = Path(__file__).parent / "results" / "alarms.json"
CHUNK = 50


def drawn_for(index: int, impl: str | None) -> dict[str, Any]:
    """Scenario ``index`` of the key space, for model ``impl`` (None: the reference model it is drawn for)."""
    doc = scenario_doc(random.Random(index))
    if impl is None:
        return doc
    model = resolve(impl)
    keeps = {f.name for f in attrs.fields(ModelConfig)} | (
        {f.name for f in attrs.fields(model.options)} if model.options is not None else set())
    doc["model"] = {k: v for k, v in doc["model"].items() if k in keeps} | {"impl": impl}
    doc.pop("runs", None)
    return doc


def chunk(first: int, count: int, seeds: int, impl: str | None = None) -> dict[str, Any]:
    """Scenarios ``first .. first+count-1``, ``seeds`` seeds each: outcome counts, violations, events."""
    outcomes: Counter[str] = Counter()
    violations, events, slowest = [], 0, (0.0, -1, 0)
    for index in range(first, first + count):
        try:
            drawn = parse_scenario(drawn_for(index, impl), f"<drawn {index}>")
        except ScenarioError as e:
            outcomes["refused on load"] += 1
            violations.append({"scenario": index, "refused": str(e)})
            continue
        for seed in range(1, seeds + 1):
            started = time.process_time()
            result = run(swarm(drawn, seed) if seed % 2 else drawn, seed)  # odd seeds with swarm, as a campaign
            spent = time.process_time() - started
            slowest = max(slowest, (spent, index, seed))
            outcomes[result.outcome] += 1
            events += result.events
            if result.violation is not None:
                v = result.violation
                violations.append({"scenario": index, "seed": seed, "invariant": v.invariant, "message": v.message})
    return {"outcomes": outcomes, "violations": violations, "events": events, "slowest": slowest}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", type=int, default=25_000)
    parser.add_argument("--first", type=int, default=0, help="index of the first scenario (to resume or split a run)")
    parser.add_argument("--seeds", type=int, default=4, help="seeds per scenario")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--out", type=Path, default=OUT, help="where the JSON report goes")
    parser.add_argument("--model", help="another model to run on the drawn scenarios (importable name)")
    args = parser.parse_args()

    started = time.monotonic()
    outcomes: Counter[str] = Counter()
    violations: list[dict[str, Any]] = []
    events, slowest = 0, (0.0, -1, 0)
    with ProcessPoolExecutor(args.workers) as pool:
        end = args.first + args.scenarios
        starts = range(args.first, end, CHUNK)
        for done, part in enumerate(pool.map(chunk, starts, [min(CHUNK, end - s) for s in starts],
                                             [args.seeds] * len(starts), [args.model] * len(starts)), 1):
            for v in part["violations"]:  # as they come: a long run cut short still tells what it saw
                print(json.dumps(v), flush=True)
            if done % 20 == 0:
                print(f"# {min(args.first + done * CHUNK, end) - args.first} scenarios done, "
                      f"{round(time.monotonic() - started)} s", flush=True)
            outcomes.update(part["outcomes"])
            violations += part["violations"]
            events += part["events"]
            slowest = max(slowest, tuple(part["slowest"]))  # type: ignore[arg-type]
    wall = time.monotonic() - started

    runs = sum(n for kind, n in outcomes.items() if kind != "refused on load")
    report = {
        "command": f"python bench/alarms.py --first {args.first} --scenarios {args.scenarios} --seeds {args.seeds}"
                   f" --workers {args.workers}" + (f" --model {args.model}" if args.model else ""),
        "model": args.model or "dst.reference:model",
        "first": args.first, "scenarios": args.scenarios, "seeds_per_scenario": args.seeds, "runs": runs,
        "outcomes": dict(sorted(outcomes.items())), "violations": len([v for v in violations if "seed" in v]),
        "refused": [v for v in violations if "refused" in v][:20],
        "first_violations": [v for v in violations if "seed" in v][:20],
        "events": events, "wall_seconds": round(wall, 1), "workers": args.workers,
        "slowest_run": {"cpu_seconds": round(slowest[0], 2), "scenario": slowest[1], "seed": slowest[2]},
    }
    args.out.parent.mkdir(exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
