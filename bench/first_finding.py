"""CPU seconds from a default campaign's start to its first violation, at another git revision beside the working
tree: ``python bench/first_finding.py REV``.

What a user of a real service feels: ``dst fuzz --model M --bug B --stop-on-first``, the default campaign on one
worker, from several starting seeds (each range is a campaign of its own), for each bug of the model. Each campaign
runs in a child process of its own, the two versions alternating (the order flips every range, so drift hits both
alike); its figure is the child's CPU time (``getrusage``, imports included: the same on both sides) and the seeds
it ran. A campaign that finds nothing within ``--budget`` CPU seconds counts as a miss at the budget.

    python bench/first_finding.py c6005a0                       # the asyncio example's bugs, 3 ranges each
    python bench/first_finding.py c6005a0 --model examples.pydocket:model --ranges 2 --budget 120
    python bench/first_finding.py cd35eb3 --model examples.prefect_limits:model --as-is --ranges 2 --budget 300
    python bench/first_finding.py cd35eb3 --scenario examples/prefect_limits/scenarios/server-pauses.toml --ranges 3

With ``--scenario`` the campaign is that scenario's alone (``dst fuzz --scenario FILE``, as the campaigns that found
Prefect's counterexamples ran), each side with its own tree's copy of the file, and no bug switched on.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path
from statistics import median

REPO = Path(__file__).resolve().parents[1]


def campaign(tree: Path, target: list[str], bug: str | None, first: int, budget: float) -> tuple[float, int, bool]:
    """CPU seconds, seeds run, and whether it found a violation, of one campaign in ``tree`` (``target``: the
    default campaign's ``--model M``, or ``--scenario FILE``)."""
    argv = [sys.executable, "-m", "dst", "fuzz", *target, "--seeds", f"{first}:{first + 100_000}",
            "--stop-on-first", "--workers", "1", "--json", "--no-findings", "--time-budget", f"{budget * 2:g}s"]
    if bug is not None:
        argv += ["--bug", bug]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree / "src"), str(tree)])}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)

    def limit() -> None:  # the budget in CPU seconds, whatever the machine's load
        resource.setrlimit(resource.RLIMIT_CPU, (int(budget) + 1, int(budget) + 2))

    done = subprocess.run(argv, cwd=tree, env=env, capture_output=True, text=True, preexec_fn=limit)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    if done.returncode < 0:  # killed at the CPU budget: a miss
        return budget, -1, False
    try:
        report = json.loads(done.stdout)
    except json.JSONDecodeError:  # the command failed (a flag or a file that side does not have): no figure
        raise SystemExit(f"{tree}: {' '.join(argv[1:])} failed (exit {done.returncode}): {done.stderr.strip()[-500:]}")
    found = report["violations"] > 0 and cpu <= budget  # RLIMIT_CPU holds each process, not its forked seeds' sum
    return (cpu if found else max(cpu, budget)), report["seeds_run"], found


def bugs_of(model: str) -> list[str]:
    done = subprocess.run([sys.executable, "-m", "dst", "bugs", "--model", model, "--json"], cwd=REPO,
                          capture_output=True, text=True, check=True)
    return [bug["slug"] for bug in json.loads(done.stdout)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("rev", help="the git revision to compare the working tree with")
    parser.add_argument("--model", default="examples.aio_leases:model")
    parser.add_argument("--bug", action="append", help="only these bugs (default: every bug of the model)")
    parser.add_argument("--scenario", help="a campaign of this scenario file alone, not the model's default campaign")
    parser.add_argument("--as-is", action="store_true",
                        help="the model as it is, no bug switched on (Prefect's own code: its bugs are its own)")
    parser.add_argument("--ranges", type=int, default=3, help="campaigns per bug and side, from seeds 1, 1001, ...")
    parser.add_argument("--budget", type=float, default=60.0, help="CPU seconds a campaign may take (a miss after)")
    args = parser.parse_args()
    target = ["--scenario", args.scenario] if args.scenario else ["--model", args.model]
    bugs: list[str | None] = [None] if args.as_is or args.scenario else list(args.bug or bugs_of(args.model))
    with tempfile.TemporaryDirectory() as scratch:
        other = Path(scratch) / "rev"
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(other), args.rev],
                       check=True, capture_output=True)
        try:
            sides = {"rev": other, "tree": REPO}
            rows = []
            for bug in bugs:
                figures: dict[str, list[tuple[float, int, bool]]] = {"rev": [], "tree": []}
                for i in range(args.ranges):
                    order = ("rev", "tree") if i % 2 == 0 else ("tree", "rev")
                    for side in order:
                        figures[side].append(campaign(sides[side], target, bug, 1 + 1000 * i, args.budget))
                rows.append((bug, figures))
                print(f"{bug or 'as it is':28} " + "  ".join(
                    f"{side}: " + ", ".join(f"{cpu:.1f}s/{seeds}" + ("" if found else " miss")
                                            for cpu, seeds, found in figures[side]) for side in ("rev", "tree")),
                      flush=True)
        finally:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(other)], capture_output=True)
    print()
    print(f"{'bug':28} {'median CPU s ' + args.rev:>22} {'median CPU s tree':>18} {'ratio':>7} {'misses':>9}")
    for bug, figures in rows:
        rev, tree = (median(cpu for cpu, _, _ in figures[side]) for side in ("rev", "tree"))
        misses = "/".join(str(sum(not found for _, _, found in figures[side])) for side in ("rev", "tree"))
        print(f"{bug or 'as it is':28} {rev:22.1f} {tree:18.1f} {rev / tree:6.2f}x {misses:>9}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
