"""Two shrinkers side by side, for every catalogue bug: ``python bench/shrinkers.py [--quick]``.

For each bug the reference model declares (``Model.bugs``), on its scenario (``bug_scenario(slug)``):

* dst: ``dst selftest``'s hunt (from seed 1, swarm on, one core) finds the first violating seed, then
  ``minimize(scenario, seed, use_swarm=True)`` minimizes it, as ``dst shrink --seed N --swarm`` does: the
  seeds run to find it, the minimizer's runs, and the steps of the finding it writes (of which pinned
  faults: a lost, duplicated or delayed message written as a step);
* Hypothesis: ``@given(plan=plans(scenario))`` around ``assert dst.run(scenario, seed=0, plan=plan).ok``,
  under ``dst.strategies.SETTINGS`` (no deadline, no explain phase) with ``derandomize=True`` and a fixed
  ``max_examples``: whether it found a violation, the runs until the first one, every ``dst.run`` call in
  the test function in all, and the steps of the plan it reports. That plan is saved with
  ``dst.save_finding`` and replayed, which must reproduce exactly.

Then, for the first two bugs, the same Hypothesis test with its explain phase on (Hypothesis's default): its
runs and CPU seconds, beside the figures without it.

Writes every figure to ``bench/results/shrinkers.json``; needs the bench extra (``pip install -e ".[bench]"``).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from hypothesis import Phase, given, settings
from rich.console import Console
from rich.table import Table
from run import machine, source

import dst
from dst.explore.record import minimize
from dst.explore.selftest import bug_scenario, find_bug
from dst.faults import fault_of
from dst.findings import REPRODUCES, read, replay
from dst.models import DEFAULT_IMPL, resolve
from dst.plan import Step
from dst.strategies import SETTINGS, plans
from dst.sut import Bug

OUT = Path(__file__).parent / "results" / "shrinkers.json"


def dst_shrink(bug: Bug, max_seeds: int) -> dict[str, Any]:
    began = time.process_time()
    row = find_bug(bug.slug, max_seeds=max_seeds, seconds=600, use_swarm=True, workers=1)
    if row.first_seed is None:
        return {"found": False, "seeds": row.seeds, "cpu_seconds": time.process_time() - began}
    shrunk = minimize(bug_scenario(bug.slug), row.first_seed, use_swarm=True)
    assert shrunk is not None  # the hunt saw this seed violate
    steps = shrunk.scenario.steps or ()
    pinned = [s for s in steps if (kind := fault_of(s)) is not None and kind.pinned]
    return {"found": True, "seed": row.first_seed, "seeds": row.seeds, "invariant": row.hit,
            "steps_before": shrunk.steps_before, "steps": len(steps), "pinned_steps": len(pinned),
            "shrink_runs": shrunk.runs, "runs": row.seeds + shrunk.runs, "stop": shrunk.stop.name,
            "cpu_seconds": time.process_time() - began, "plan": [s.describe() for s in steps]}


def hypothesis_shrink(bug: Bug, max_examples: int, explain: bool = False) -> dict[str, Any]:
    scenario = bug_scenario(bug.slug)
    calls, first, failing = 0, None, None

    def test_the_bug_scenario(plan: tuple[Step, ...]) -> None:
        nonlocal calls, first, failing
        calls += 1
        result = dst.run(scenario, seed=0, plan=plan)
        if result.violation is not None:
            first = first or calls
            failing = (plan, result.violation.invariant)  # Hypothesis runs the minimal example last
        assert result.ok

    phases = tuple(Phase) if explain else SETTINGS.phases
    test = settings(SETTINGS, derandomize=True, database=None, max_examples=max_examples, phases=phases)(
        given(plan=plans(scenario))(test_the_bug_scenario))
    began = time.process_time()
    try:
        test()
    except AssertionError:
        pass
    cpu = time.process_time() - began
    if failing is None:
        return {"found": False, "runs": calls, "cpu_seconds": cpu}
    plan, invariant = failing
    with tempfile.TemporaryDirectory() as folder:
        path = dst.save_finding(dst.run(scenario, 0, plan), folder)
        replayed = replay(read(path)).status
    return {"found": True, "invariant": invariant, "first_failing_run": first, "runs": calls, "steps": len(plan),
            "cpu_seconds": cpu, "replay": replayed, "plan": [repr(s) for s in plan]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="three bugs, 100 examples: a smoke test")
    parser.add_argument("--max-examples", type=int, default=500, help="Hypothesis's max_examples (default 500)")
    parser.add_argument("--max-seeds", type=int, default=2000, help="dst's hunt, seeds at most (default 2000)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    bugs = resolve(DEFAULT_IMPL).bugs
    if args.quick:
        bugs, args.max_examples = bugs[:3], 100
    began, measured = time.perf_counter(), source()  # the commit as the run starts: the code it imported
    rows: dict[str, dict[str, Any]] = {}
    for bug in bugs:
        rows[bug.slug] = {"sketch_steps": bug.sketch_steps, "breaks": bug.breaks,
                          "dst": dst_shrink(bug, args.max_seeds),
                          "hypothesis": hypothesis_shrink(bug, args.max_examples)}
        h = rows[bug.slug]["hypothesis"]
        print(f"{bug.slug}: dst {rows[bug.slug]['dst'].get('steps')} steps; hypothesis "
              f"{h.get('steps', 'not found')} steps, {h['runs']} runs", flush=True)
    explain = {bug.slug: hypothesis_shrink(bug, args.max_examples, explain=True) for bug in bugs[:2]}
    report = {"machine": machine(), "source": measured, "max_examples": args.max_examples,
              "max_seeds": args.max_seeds, "bugs": rows, "explain_phase_on": explain,
              "wall_seconds": time.perf_counter() - began}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))

    table = Table(title=f"minimized steps and runs per catalogue bug (Hypothesis: max_examples={args.max_examples})")
    for col in ("bug", "sketch", "dst steps", "dst runs (find + shrink)", "Hypothesis found", "steps",
                "runs (first failure)", "replay"):
        table.add_column(col)
    for slug, r in rows.items():
        d, h = r["dst"], r["hypothesis"]
        table.add_row(slug, str(r["sketch_steps"]),
                      f"{d['steps']} ({d['pinned_steps']} pinned)" if d["found"] else "not found",
                      f"{d['seeds']} + {d['shrink_runs']}" if d["found"] else str(d["seeds"]),
                      "yes" if h["found"] else "no", str(h.get("steps", "-")),
                      f"{h['runs']} ({h['first_failing_run']})" if h["found"] else str(h["runs"]),
                      h.get("replay", "-"))
    Console(width=160).print(table)
    for slug, on in explain.items():
        off = rows[slug]["hypothesis"]
        print(f"{slug} with the explain phase on: {on['runs']} runs, {on['cpu_seconds']:.1f} CPU s "
              f"(off: {off['runs']} runs, {off['cpu_seconds']:.1f} CPU s)")
    print(f"wrote {args.out} in {report['wall_seconds']:.0f}s")


if __name__ == "__main__":
    main()
