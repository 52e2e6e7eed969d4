"""Branches forked at a seed's risky moment beside the same branches run from the start: ``python bench/branches.py``.

For seeds 1..N of the asyncio example's default scenario (its full world, swarm on), every situation's first
moment given ``--branches`` branches: the seed's run with its branches forked at the moment (each pays for what
follows the moment), then the same seed with each branch run from the start, each side in a fresh process. The two
must give the same outcomes (the seed's and every branch's); the figures are each side's CPU seconds (its process's
and its forks') and wall seconds, and the share of the way to the moment that forking saved.

    python bench/branches.py                      # seeds 1-8, 2 branches a moment: about two minutes
    python bench/branches.py --seeds 20 --branches 4 --scenario examples/aio_leases/scenarios/default.toml
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# In the child: the seeds, each with its branches, forked or not; prints their outcomes and what they cost.
CHILD = """
import json, resource, sys, time
import dst
from dst.explore.seed import explore_seed
from dst.invariants.situations import catalogue
scenario = dst.load_scenario(sys.argv[1])
seeds, branches, fork = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "fork"
budget = tuple((s.id, branches) for s in catalogue(scenario.model.resolve().situations))
dst.run(scenario, 0)  # warm: the imports, the first build
began, wall = time.process_time(), time.monotonic()
kids = resource.getrusage(resource.RUSAGE_CHILDREN)
outcomes = [o for seed in range(1, seeds + 1) for o in explore_seed(scenario, seed, True, budget=budget, fork=fork)]
after = resource.getrusage(resource.RUSAGE_CHILDREN)
cpu = time.process_time() - began + (after.ru_utime + after.ru_stime) - (kids.ru_utime + kids.ru_stime)
print(json.dumps({"outcomes": [repr(o) for o in outcomes], "branches": sum(o.branch is not None for o in outcomes),
                  "cpu": cpu, "wall": time.monotonic() - wall}))
"""


def side(scenario: str, seeds: int, branches: int, fork: bool) -> dict[str, object]:
    done = subprocess.run([sys.executable, "-c", CHILD, scenario, str(seeds), str(branches),
                           "fork" if fork else "cold"], cwd=REPO, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scenario", default="examples/aio_leases/scenarios/default.toml")
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--branches", type=int, default=2)
    args = parser.parse_args()
    forked = side(args.scenario, args.seeds, args.branches, True)
    cold = side(args.scenario, args.seeds, args.branches, False)
    same = forked["outcomes"] == cold["outcomes"]
    print(f"{args.scenario}, seeds 1-{args.seeds}, {args.branches} branches a moment: {forked['branches']} branches "
          f"beside {args.seeds} seeds; the same outcomes forked and from the start: {'yes' if same else 'NO'}")
    for name, figures in (("forked at the moment", forked), ("from the start", cold)):
        print(f"  {name:22} {figures['cpu']:7.2f} CPU s {figures['wall']:7.2f} wall s")
    print(f"  from the start / forked: {cold['cpu'] / forked['cpu']:.2f}x CPU, {cold['wall'] / forked['wall']:.2f}x wall")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
