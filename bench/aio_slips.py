"""Slips written into the asyncio example, as a user of a real service meets them: ``python bench/aio_slips.py REV``.

The example service (``examples/aio_leases``) with one slip each, written for this benchmark as an edit of its code
in a copy of ``examples/`` (not its planted bugs: no flag, no scenario made for them): the mistakes a developer
makes in lease code. For each slip, the default campaign (``dst fuzz --model examples.aio_leases:model
--stop-on-first --workers 1``: what a new user runs first) from ``--ranges`` starting seeds far apart (1, 100001,
...), each a process of its own on one core for at most ``--budget`` seconds, until its first violation: the
working tree's dst beside the one at ``REV`` (a worktree of it), the two alternating range by range, each side on
its own checkout's copy of the example with the slip written in (the example grew with dst's API). A campaign's
figure is its CPU time (its process's and those of the seeds and branches it forked, imports included: the same on
both sides) and the seeds it ran; one that finds nothing within the budget counts as a miss at the budget. The first
find of each slip (of the first range that found it, on the working tree) is then minimized with ``dst shrink``'s
default budget (3,000 runs, 120 s), its length beside the slip's hand-minimal sketch.

    python bench/aio_slips.py cd35eb3                  # 10 ranges of 60 CPU s per slip and side (~1 hour on 2 cores)
    python bench/aio_slips.py cd35eb3 --ranges 3 --slip admit-at-capacity
    python bench/aio_slips.py --ranges 2               # the working tree alone

Campaigns run two at a time (``--parallel``), one core each. Every figure goes to ``bench/results/aio_slips.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from statistics import median
from typing import Any

import attrs

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "bench" / "results" / "aio_slips.json"
MODEL = "examples.aio_leases:model"


@attrs.frozen
class Slip:
    """A slip: ``old`` replaced by ``new`` in ``file`` (under examples/aio_leases/service); ``sketch`` is the length
    of its hand-minimal reproduction, in plan steps."""

    slug: str
    file: str
    old: str
    new: str
    sketch: int
    story: str


SLIPS: tuple[Slip, ...] = (
    Slip("admit-at-capacity", "store.py", "AND active + :n <= capacity", "AND active <= capacity", 2,
         "admission checks that the count is at most the capacity before the increment, not after it: on a limit of "
         "1, a second holder is admitted beside the first"),
    Slip("grant-deadline-from-receipt", "client.py",
         "return Lease(granted[\"id\"], limit, slots, granted[\"token\"], self.ttl, sent + self.ttl)",
         "return Lease(granted[\"id\"], limit, slots, granted[\"token\"], self.ttl, loop.time() + self.ttl)", 3,
         "the holder counts its lease from when the grant reached it, not from when it asked: a grant held up on the "
         "way (a slow reply, a pause of the holder) leaves it working after the server's expiry"),
    Slip("renew-deadline-from-receipt", "client.py", "lease.deadline = sent + self.ttl",
         "lease.deadline = asyncio.get_running_loop().time() + self.ttl", 3,
         "the same slip in renewal: a renewal answered late moves the holder's deadline past the server's expiry"),
    Slip("reap-ahead", "store.py", "(time.time(),)", "(time.time() + 5,)", 2,
         "the reaper allows a margin for clock skew the wrong way, in its read and its re-check: a lease within 5 s "
         "of its expiry is reaped while its holder may still work and renew"),
    Slip("release-in-two-transactions", "store.py",
         "            if found is None:\n                return False\n            await db.execute(",
         "            if found is None:\n                return False\n        async with self.transaction() as db:\n"
         "            await db.execute(", 3,
         "release deletes the lease in one transaction and gives its slots back in a second: a server that dies "
         "between the two keeps the slot counted for good"),
    Slip("reaper-keeps-the-slots", "store.py",
         "            else:\n                reaped += await self._revoke(lease, \" AND expires_at <= ?\", (time.time(),))",
         "            else:\n                async with self.transaction() as db:\n"
         "                    cursor = await db.execute(\"DELETE FROM leases WHERE id = ? AND expires_at <= ?\", "
         "(lease, time.time()))\n                    reaped += cursor.rowcount", 2,
         "the reaper deletes an expired lease but does not give its slots back: a holder that crashed strands its "
         "slot for good"),
    Slip("renew-stamped-before-the-lock", "store.py",
         "        async with self.transaction() as db:\n"
         "            # Stamped once the write lock is ours: of two renewals at once (a retry beside the original), the one\n"
         "            # that writes last stamps last, so the expiry never moves back.\n"
         "            expires_at = time.time() + ttl\n",
         "        expires_at = time.time() + ttl\n        async with self.transaction() as db:\n", 2,
         "renewal stamps the new expiry before it takes the write lock, not after: a renewal whose first round trip "
         "is slow times out, its retry stamps later and writes first, and the original's earlier expiry lands last "
         "(the expiry moves back)"),
)


def copy_with(slip: Slip, examples: Path, into: Path) -> Path:
    """A copy of ``examples`` with ``slip`` written in; the folder to run dst from."""
    root = into / slip.slug
    shutil.copytree(examples, root / "examples", ignore=shutil.ignore_patterns("__pycache__", "findings"))
    path = root / "examples" / "aio_leases" / "service" / slip.file
    text = path.read_text()
    if slip.old not in text:
        raise SystemExit(f"{slip.slug}: {slip.file} no longer holds the line the slip edits: {slip.old!r}")
    path.write_text(text.replace(slip.old, slip.new))
    return root


def campaign(src: Path, root: Path, first: int, budget: float) -> dict[str, Any]:
    """One default campaign of the slip's copy at ``root`` with the dst of ``src``: its CPU seconds (a miss: the
    budget), its seeds, and its first violation's signature and command."""
    # The budget bounds the campaign's wall time, one core each (RLIMIT_CPU would bound each of its processes, not
    # the seeds and branches it forks); a campaign that took more CPU than the budget to find is a miss all the same.
    argv = [sys.executable, "-m", "dst", "fuzz", "--model", MODEL, "--seeds", f"{first}:{first + 100_000}",
            "--stop-on-first", "--workers", "1", "--json", "--no-findings", "--time-budget", f"{budget:g}s"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(src), str(root)])}
    with tempfile.TemporaryFile() as usage:  # the campaign's CPU with its forks', measured by a shell of its own
        done = subprocess.run(["/usr/bin/time", "-f", "%U %S", "-o", f"/dev/fd/{usage.fileno()}", *argv], cwd=root,
                              env=env, capture_output=True, text=True, pass_fds=(usage.fileno(),))
        usage.seek(0)
        user, system = (float(x) for x in usage.read().decode().split()[-2:])
    cpu = user + system
    try:
        report = json.loads(done.stdout)
    except json.JSONDecodeError:
        return {"cpu": budget, "seeds": None, "found": False, "error": (done.stderr.strip().splitlines() or [""])[-1]}
    found = report["violations"] > 0 and cpu <= budget
    first_group = report["signatures"][0] if report["signatures"] else None
    return {"cpu": round(cpu if found else max(cpu, budget), 2), "seeds": report["seeds_run"],
            "branches": report.get("branches_run", 0), "found": found,
            "invariant": None if first_group is None else first_group["invariant"],
            "reproduce": None if first_group is None else first_group["reproduce"]}


def minimized(src: Path, root: Path, reproduce: str) -> dict[str, Any]:
    """The find ``reproduce`` (a ``dst run`` command) minimized with dst shrink's default budget."""
    with tempfile.TemporaryDirectory() as findings:
        argv = [sys.executable, "-m", "dst", "shrink", *shlex.split(reproduce)[2:], "--findings", findings, "--json",
                "--verbose"]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(src), str(root)])}
        done = subprocess.run(argv, cwd=root, env=env, capture_output=True, text=True)
    try:
        out = json.loads(done.stdout)
    except json.JSONDecodeError:
        return {"error": (done.stderr.strip().splitlines() or ["no output"])[-1]}
    return {"steps_before": out["steps_before"], "steps_after": out["steps_after"], "runs": out["runs"],
            "seconds": out["seconds"], "stop": out["stop"], "invariant": out["invariant"],
            "from_snapshot": sum(p.get("from_snapshot", 0) for p in out.get("passes", []))}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("rev", nargs="?", help="a git revision to measure beside the working tree (none: the tree alone)")
    parser.add_argument("--slip", action="append", help="only these slips (default: all)")
    parser.add_argument("--ranges", type=int, default=10, help="campaigns per slip and side, from seeds 1, 100001, ...")
    parser.add_argument("--budget", type=float, default=60.0, help="CPU seconds a campaign may take (a miss after)")
    parser.add_argument("--parallel", type=int, default=2, help="campaigns at once, one core each")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    slips = [s for s in SLIPS if not args.slip or s.slug in args.slip]
    starts = [1 + 100_000 * i for i in range(args.ranges)]
    with tempfile.TemporaryDirectory() as scratch:
        sides = {"tree": REPO / "src"}
        if args.rev:
            other = Path(scratch) / "rev"
            subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(other), args.rev],
                           check=True, capture_output=True)
            sides["rev"] = other / "src"
        try:
            # Each side runs its own checkout's example (the example's code grew with dst's API), the slip written in.
            roots = {(slip.slug, side): copy_with(slip, src.parent / "examples", Path(scratch) / side)
                     for slip in slips for side, src in sides.items()}
            jobs = [(slip, side, i) for slip in slips for i in range(args.ranges)
                    for side in (sorted(sides) if i % 2 == 0 else sorted(sides, reverse=True))]
            with ThreadPoolExecutor(args.parallel) as pool:
                done = list(pool.map(lambda job: campaign(sides[job[1]], roots[job[0].slug, job[1]], starts[job[2]],
                                                          args.budget), jobs))
            figures: dict[str, dict[str, list[dict[str, Any]]]] = {s.slug: {side: [] for side in sides} for s in slips}
            for (slip, side, _), figure in zip(jobs, done):
                figures[slip.slug][side].append(figure)
            shrunk = {}
            for slip in slips:
                first = next((f for f in figures[slip.slug]["tree"] if f["found"] and f["reproduce"]), None)
                shrunk[slip.slug] = None if first is None else minimized(sides["tree"], roots[slip.slug, "tree"],
                                                                         first["reproduce"])
        finally:
            if args.rev:
                subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(Path(scratch) / "rev")],
                               capture_output=True)
    rows = []
    for slip in slips:
        row: dict[str, Any] = {"slip": slip.slug, "sketch": slip.sketch, "story": slip.story, "minimized": shrunk[slip.slug]}
        for side in sides:
            runs = figures[slip.slug][side]
            row[side] = {"found": sum(f["found"] for f in runs), "ranges": len(runs),
                         "median_cpu": median(f["cpu"] for f in runs), "runs": runs}
        rows.append(row)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"rev": args.rev, "ranges": args.ranges, "budget": args.budget, "slips": rows},
                                   indent=2) + "\n")
    head = f"{'slip':30} {'found':>7} {'median CPU s':>13}"
    if args.rev:
        head += f" {'at ' + args.rev:>14} {'ratio':>7}"
    print(head + f" {'minimized':>10} {'sketch':>7}")
    for row in rows:
        tree = row["tree"]
        line = f"{row['slip']:30} {tree['found']:>3}/{tree['ranges']:<3} {tree['median_cpu']:13.1f}"
        if args.rev:
            rev = row["rev"]
            line += f" {rev['median_cpu']:14.1f} {rev['median_cpu'] / tree['median_cpu']:6.2f}x"
        shrunk_row = row["minimized"] or {}
        line += f" {shrunk_row.get('steps_after', '-'):>10} {row['sketch']:>7}"
        print(line)
    print(f"figures: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
