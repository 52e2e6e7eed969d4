"""The model's speed at another git revision beside the working tree, side by side: ``python bench/versus.py REV``.

Both versions run the same seeds of the embedded default scenario, in alternating rounds (the order
flips every round, so drift hits both alike), each in its own interpreter with its own ``src/`` on
the path. A round's figure is the events per CPU second of a batch of seeds, timed inside the
child after its imports; the report is each side's median and the median of the per-round ratios,
with their interquartile range. The events per round must agree: the two versions ran the same
simulations, or the comparison says so and stops.

    python bench/versus.py 89ee10f            # the commit before the seam
    python bench/versus.py HEAD~3 --rounds 10 --seeds 20
    python bench/versus.py 89ee10f --callgrind          # instructions instead of time (needs valgrind)

With ``--callgrind`` each side runs once under valgrind's callgrind, which counts instructions,
not seconds: the same figure on a busy machine as on an idle one. The count of a run that stops
after its imports and one warm-up seed is subtracted, leaving the instructions of the seeds alone.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from statistics import median, quantiles

REPO = Path(__file__).resolve().parents[1]

# Runs in the child: seeds [a, b) of the embedded default scenario; prints events and CPU seconds.
CHILD = """
import gc, json, sys, time
from dst.runner import run
from dst.scenario import load_scenario
scenario = load_scenario()
run(scenario, 0)  # warm-up
a, b = int(sys.argv[1]), int(sys.argv[2])
gc.collect()
began = time.process_time()
events = sum(run(scenario, seed).events for seed in range(a, b))
print(json.dumps({"events": events, "cpu": time.process_time() - began}))
"""


def batch(src: Path, first: int, count: int) -> dict[str, float]:
    done = subprocess.run([sys.executable, "-c", CHILD, str(first), str(first + count)], env={"PYTHONPATH": str(src)},
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def instructions(src: Path, first: int, count: int) -> int:
    """Instructions callgrind counts for seeds [first, first + count), less those of an empty batch."""
    totals = []
    batch(src, first, 0)  # compile the tree once, so neither counted run pays for it
    with tempfile.TemporaryDirectory() as tmp:
        for n in (0, count):
            out = Path(tmp) / f"callgrind.{n}"
            subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable, "-c", CHILD,
                            str(first), str(first + n)], env={"PYTHONPATH": str(src)}, capture_output=True, check=True)
            totals.append(int(next(line for line in out.read_text().splitlines()
                                   if line.startswith("totals:")).split()[1]))
    return totals[1] - totals[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rev", help="the git revision to compare the working tree with")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--seeds", type=int, default=10, help="seeds per round per side")
    parser.add_argument("--callgrind", action="store_true", help="count instructions of --seeds seeds under valgrind")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        other = Path(tmp) / "tree"
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(other), args.rev],
                       check=True, capture_output=True)
        try:
            sides = {"working tree": REPO / "src", args.rev: other / "src"}
            if args.callgrind:
                counts = {name: instructions(src, 1, args.seeds) for name, src in sides.items()}
                for name, n in counts.items():
                    print(f"{name:>14}: {n:,} instructions for seeds 1-{args.seeds}")
                print(f"working tree / {args.rev}: {counts['working tree'] / counts[args.rev]:.3f} (instructions)")
                return 0
            rates: dict[str, list[float]] = {name: [] for name in sides}
            ratios = []
            for r in range(args.rounds):
                order = list(sides) if r % 2 == 0 else list(sides)[::-1]
                got = {name: batch(sides[name], r * args.seeds, args.seeds) for name in order}
                events = {name: g["events"] for name, g in got.items()}
                if len(set(events.values())) != 1:
                    print(f"round {r}: the versions ran different simulations (events {events}); not comparable")
                    return 1
                for name, g in got.items():
                    rates[name].append(g["events"] / g["cpu"])
                ratios.append(rates["working tree"][-1] / rates[args.rev][-1])
        finally:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(other)], capture_output=True)
    for name, values in rates.items():
        print(f"{name:>14}: {median(values):,.0f} events per CPU second (median of {len(values)} rounds)")
    q = quantiles(ratios, n=4)
    print(f"working tree / {args.rev}: {median(ratios):.3f} (interquartile {q[0]:.3f} - {q[2]:.3f}), "
          f"{args.rounds} rounds of {args.seeds} seeds, same events every round")
    return 0


if __name__ == "__main__":
    sys.exit(main())
