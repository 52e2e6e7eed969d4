"""The minimizer with and without snapshots of the best run, on the asyncio example: ``python bench/snapshots.py``.

For each violating seed below (the example's planted bugs, as their scenario files run them), ``dst.shrink`` with
its default budget twice, each in a fresh process: as it runs, a candidate that shares the best run's plan up to a
moment going on from a snapshot of the best run there (:mod:`dst.explore.snapshot`), and with every candidate run
from the start. The two must give the same finding (the same steps, the same trace digest, the same number of
runs); the figures are their CPU seconds (the process's and its forks', which run the candidates from snapshots)
and wall seconds, and how many candidates ran from a snapshot.

    python bench/snapshots.py                    # the five planted bugs: a few minutes
    python bench/snapshots.py --case check-then-act:1
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CASES = ("check-then-act:1", "release-not-idempotent:1", "reaper-no-recheck:1", "leases-in-memory:1",
         "ignore-lost-renewal:1")

# In the child: one shrink, with or without snapshots; prints what it found and what it cost.
CHILD = """
import json, resource, sys, time
import dst
from dst.explore import shrink as shrinking
from dst.explore.snapshot import Snapshots
from dst.runner.swarm import swarm
bug, seed, use = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "on"
if not use:
    shrinking.Snapshots = lambda seed, enabled: Snapshots(seed, enabled=False)
scenario = swarm(dst.load_scenario(f"examples/aio_leases/scenarios/{bug}.toml"), seed)
began = time.monotonic()
shrunk = shrinking.shrink(scenario, seed)
wall = time.monotonic() - began
me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"steps": [repr(s) for s in shrunk.scenario.steps or ()], "digest": shrunk.result.digest,
                  "runs": shrunk.runs, "before": shrunk.steps_before, "stop": shrunk.stop.value, "wall": wall,
                  "cpu": me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime,
                  "from_snapshot": sum(p.snapshots for p in shrunk.passes)}))
"""


def shrink(case: str, snapshots: bool) -> dict[str, object]:
    bug, seed = case.split(":")
    done = subprocess.run([sys.executable, "-c", CHILD, bug, seed, "on" if snapshots else "off"], cwd=REPO,
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--case", action="append", help="BUG:SEED (default: each planted bug at seed 1)")
    args = parser.parse_args()
    print(f"{'case':28} {'steps':>9} {'runs':>5} {'from a snapshot':>16} {'CPU s on/off':>14} {'ratio':>6} "
          f"{'wall s on/off':>14} {'same':>5}")
    for case in args.case or CASES:
        on, off = shrink(case, True), shrink(case, False)
        same = (on["steps"], on["digest"], on["runs"]) == (off["steps"], off["digest"], off["runs"])
        print(f"{case:28} {on['before']:>4}->{len(on['steps']):<4} {on['runs']:>5} {on['from_snapshot']:>16} "
              f"{on['cpu']:6.1f}/{off['cpu']:<7.1f} {off['cpu'] / on['cpu']:5.2f}x {on['wall']:6.1f}/{off['wall']:<7.1f}"
              f" {'yes' if same else 'NO':>5}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
