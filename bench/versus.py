"""The model's speed at another git revision beside the working tree, side by side: ``python bench/versus.py REV``.

Both versions run the same seeds of one scenario (the embedded default, or ``--scenario FILE``), in
alternating rounds (the order flips every round, so drift hits both alike), each in its own interpreter
with its own ``src/`` on the path. A round's figures are the seeds and the events per CPU second of a
batch of seeds, timed inside the child after its imports; the report is each side's median and the
median of the per-round ratios, with their interquartile range. Seeds per CPU second is what a campaign
feels, so it is the figure compared. When both versions ran the same events every round (the same
simulations), the events per CPU second are compared too; when a change made fewer (or more) events per
operation, the report says how many per seed each side ran instead. ``--rev-scenario`` gives the
revision its own file of the scenario, for one that sets a key the revision does not know (a model
option added since): the same workload, as that revision can run it.

    python bench/versus.py 89ee10f            # the commit before the seam
    python bench/versus.py HEAD~3 --rounds 10 --seeds 20 --scenario bench/small.toml
    python bench/versus.py 9d4c6d6 --scenario bench/small.toml --rev-scenario /tmp/small-as-polled.toml
    python bench/versus.py 89ee10f --callgrind          # instructions instead of time (needs valgrind)
    python bench/versus.py cd35eb3 --scenario examples/aio_leases/scenarios/default.toml --rounds 5 --seeds 3
    python bench/versus.py cd35eb3 --scenario examples/prefect_limits/scenarios/default.toml --own-examples --rounds 3

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

# Runs in the child: seeds [a, b) of a scenario (a file; "": the embedded default); prints events and CPU seconds.
CHILD = """
import gc, json, sys, time
from dst.runner import run
from dst.scenario import load_scenario
scenario = load_scenario(sys.argv[3] or None)
run(scenario, 0)  # warm-up
a, b = int(sys.argv[1]), int(sys.argv[2])
gc.collect()
began, wall = time.process_time(), time.perf_counter()
events = sum(run(scenario, seed).events for seed in range(a, b))
print(json.dumps({"events": events, "cpu": time.process_time() - began, "wall": time.perf_counter() - wall}))
"""


def batch(src: Path, first: int, count: int, scenario: str = "", cwd: Path = REPO) -> dict[str, float]:
    done = subprocess.run([sys.executable, "-c", CHILD, str(first), str(first + count), scenario],
                          env={"PYTHONPATH": str(src)}, capture_output=True, text=True, check=True, cwd=cwd)
    return json.loads(done.stdout)


def instructions(src: Path, first: int, count: int, scenario: str = "") -> int:
    """Instructions callgrind counts for seeds [first, first + count), less those of an empty batch."""
    totals = []
    batch(src, first, 0, scenario)  # compile the tree once, so neither counted run pays for it
    with tempfile.TemporaryDirectory() as tmp:
        for n in (0, count):
            out = Path(tmp) / f"callgrind.{n}"
            subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable, "-c", CHILD,
                            str(first), str(first + n), scenario], env={"PYTHONPATH": str(src)}, capture_output=True, check=True)
            totals.append(int(next(line for line in out.read_text().splitlines()
                                   if line.startswith("totals:")).split()[1]))
    return totals[1] - totals[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rev", help="the git revision to compare the working tree with")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--seeds", type=int, default=10, help="seeds per round per side")
    parser.add_argument("--callgrind", action="store_true", help="count instructions of --seeds seeds under valgrind")
    parser.add_argument("--scenario", default="", help="a scenario file (default: the embedded default scenario)")
    parser.add_argument("--rev-scenario", default=None, help="the revision's own file of it (default: the same)")
    parser.add_argument("--own-examples", action="store_true",
                        help="each side runs its own checkout's examples (the scenario's path taken from each "
                             "checkout's root): a model in examples/ that grew with dst's API, as each version had it")
    args = parser.parse_args()
    ours = str(Path(args.scenario).resolve()) if args.scenario and not args.own_examples else args.scenario
    scenarios = {"working tree": ours, args.rev: str(Path(args.rev_scenario).resolve()) if args.rev_scenario else ours}
    with tempfile.TemporaryDirectory() as tmp:
        other = Path(tmp) / "tree"
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(other), args.rev],
                       check=True, capture_output=True)
        try:
            sides = {"working tree": REPO / "src", args.rev: other / "src"}
            if args.callgrind:
                counts = {name: instructions(src, 1, args.seeds, scenarios[name]) for name, src in sides.items()}
                for name, n in counts.items():
                    print(f"{name:>14}: {n:,} instructions for seeds 1-{args.seeds}")
                print(f"working tree / {args.rev}: {counts['working tree'] / counts[args.rev]:.3f} (instructions)")
                return 0
            seeds_per_s: dict[str, list[float]] = {name: [] for name in sides}
            seeds_per_wall_s: dict[str, list[float]] = {name: [] for name in sides}
            events_per_s: dict[str, list[float]] = {name: [] for name in sides}
            events: dict[str, int] = {name: 0 for name in sides}
            same_events = True
            for r in range(args.rounds):
                order = list(sides) if r % 2 == 0 else list(sides)[::-1]
                got = {name: batch(sides[name], r * args.seeds, args.seeds, scenarios[name],
                                   sides[name].parent if args.own_examples else REPO) for name in order}
                same_events &= len({g["events"] for g in got.values()}) == 1
                for name, g in got.items():
                    seeds_per_s[name].append(args.seeds / g["cpu"])
                    seeds_per_wall_s[name].append(args.seeds / g["wall"])
                    events_per_s[name].append(g["events"] / g["cpu"])
                    events[name] += int(g["events"])
        finally:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(other)], capture_output=True)
    seeds = args.rounds * args.seeds
    print(f"{args.scenario or 'the embedded default scenario'}: {args.rounds} rounds of {args.seeds} seeds per side")
    for name in sides:
        print(f"{name:>14}: {median(seeds_per_s[name]):,.2f} seeds and {median(events_per_s[name]):,.0f} events "
              f"per CPU second, {median(seeds_per_wall_s[name]):,.2f} seeds per wall second (medians), "
              f"{events[name] / seeds:,.0f} events per seed")
    report("seeds per CPU second", seeds_per_s, args.rev)
    report("seeds per wall second", seeds_per_wall_s, args.rev, "(a store that waits for its disk shows here)")
    if same_events:
        report("events per CPU second", events_per_s, args.rev, "(the same events every round)")
    else:
        print(f"the versions ran different events (working tree / {args.rev}: "
              f"{events['working tree'] / events[args.rev]:.3f} as many): events per second are not compared")
    return 0


def report(what: str, rates: dict[str, list[float]], rev: str, note: str = "") -> None:
    """The median of the per-round ratios, working tree / ``rev``, with its interquartile range."""
    ratios = [ours / theirs for ours, theirs in zip(rates["working tree"], rates[rev])]
    q = quantiles(ratios, n=4) if len(ratios) > 1 else [ratios[0]] * 3
    print(f"working tree / {rev}, {what}: {median(ratios):.3f} (interquartile {q[0]:.3f} - {q[2]:.3f}) {note}".rstrip())


if __name__ == "__main__":
    sys.exit(main())
