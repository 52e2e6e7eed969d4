"""A seed forked from a warm process beside the same seed run in it, at another git revision beside the working
tree: ``python bench/forked.py REV --scenario FILE``.

A campaign's worker runs its first seed in its own process (the warm-up: imports, templates, caches) and each later
seed of a costly model in a fork of itself (:mod:`dst.explore.isolate`), so a seed should cost the same either way.
What a fork does not inherit (a cache named by the process id, say) it makes again in every seed, and no benchmark
of seeds run in one process shows it. Each side runs in an interpreter of its own, with its own ``src/`` and
examples: a warm-up seed, then each seed in the process and forked, timed as CPU (the fork's included) and compared
by digest.

    python bench/forked.py 19a0a85 --scenario examples/prefect_limits/scenarios/quiet.toml
    python bench/forked.py HEAD~1 --scenario examples/aio_leases/scenarios/default.toml --seeds 4
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# Runs in the child, from its tree's root: the scenario's seeds [1, n], each in this process and in a fork of it.
CHILD = """
import json, os, sys
sys.path.insert(0, os.getcwd())
from dst.explore.isolate import forked, warm
from dst.runner import run
from dst.scenario import load_scenario

def cpu():
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system

scenario = load_scenario(sys.argv[1])
run(scenario, 0)  # the warm-up, as a worker's first seed
warm()
figures = {"inproc": 0.0, "forked": 0.0, "same": True}
for seed in range(1, int(sys.argv[2]) + 1):
    began = cpu()
    here = run(scenario, seed).digest
    figures["inproc"] += cpu() - began
    began = cpu()
    there = forked(lambda: run(scenario, seed).digest)
    figures["forked"] += cpu() - began
    figures["same"] &= here == there
print(json.dumps(figures))
"""


def side(tree: Path, scenario: str, seeds: int) -> dict[str, float]:
    done = subprocess.run([sys.executable, "-c", CHILD, scenario, str(seeds)], cwd=tree,
                          env={"PYTHONPATH": str(tree / "src")},
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{tree}: the seeds failed: {done.stderr.strip()[-500:]}")
    return json.loads(done.stdout.splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rev", help="the git revision to compare the working tree with")
    parser.add_argument("--scenario", required=True, help="a scenario file (each side reads its own tree's copy)")
    parser.add_argument("--seeds", type=int, default=3, help="seeds per side, each run both ways")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        other = Path(scratch) / "rev"
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(other), args.rev],
                       check=True, capture_output=True)
        try:
            for name, tree in ((args.rev, other), ("working tree", REPO)):
                f = side(tree, args.scenario, args.seeds)
                print(f"{name:>14}: {f['inproc'] / args.seeds:6.2f} CPU s a seed in the warm process, "
                      f"{f['forked'] / args.seeds:6.2f} forked ({f['forked'] / f['inproc']:.2f}x); "
                      f"{'the same digests' if f['same'] else 'DIGESTS DIFFER'}", flush=True)
        finally:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(other)], capture_output=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
