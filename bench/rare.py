"""Rare bugs on the default campaign, as a new user meets them: ``python bench/rare.py [--quick]``.

For every catalogue bug (switched on with ``--bug``, as ``dst fuzz --bug SLUG`` does) and for a set of
bugs written for this benchmark (slips a user could make, written as edits of the reference model in a
temporary copy of the package: no flag, no scenario made for them), run the campaign ``dst fuzz`` runs
when given no scenario, from 10 starting seeds far apart (1, 100001, ...), each on one core for at most
``--seconds`` of CPU, until its first violation. Reports, per bug: in how many of the ranges it was found,
the median seeds and CPU seconds to the first find (a range that found nothing counts as infinite), the
invariant it was found by, and the scenario of the campaign whose seed found it. The first find of the
first range is then minimized as ``dst fuzz`` does: its length in steps beside the bug's hand-minimal
sketch, and the minimizer's passes that did the work.

``--src DIR`` runs another checkout's package (``DIR/dst``), to measure the campaign as it was before a
change: ``git worktree add /tmp/before REV`` then ``--src /tmp/before/src``. Every hunt runs in a fresh
process with that package first on its import path. Writes every figure to ``bench/results/rare.json``
(or ``--out``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from statistics import median
from typing import Any

import attrs

HERE = Path(__file__).resolve().parent
OUT = HERE / "results" / "rare.json"
STARTS = tuple(1 + 100_000 * i for i in range(10))


@attrs.frozen
class Slip:
    """A bug written for the benchmark: ``old`` replaced by ``new`` (each occurrence) in the reference model's
    ``file``; ``sketch`` is the length of its hand-minimal reproduction, in plan steps."""

    slug: str
    file: str  # under dst/reference
    old: str
    new: str
    sketch: int
    story: str


SLIPS: tuple[Slip, ...] = (
    Slip("admit-off-by-one", "service.py", "if in_use + req.slots <= self.limits[req.limit]:",
         "if in_use <= self.limits[req.limit]:", 2,
         "admission compares the slots in use with the limit, not the slots in use plus those asked for: A holds the "
         "only slot, B is admitted too"),
    Slip("deadline-from-receipt", "client.py", "self._timing(sent, response.expiry)",
         "self._timing(clock.now, response.expiry)", 2,
         "the holder counts its lease from when the grant arrived, not from when it asked: a grant held up on the "
         "wire leaves it working after the server's expiry, while a successor holds the slot"),
    Slip("release-leaves-row", "service.py", "if store.drop_lease(lease.id) is None:",
         "if store.get_lease(lease.id) is None:", 1,
         "release gives the slot back but leaves the lease's row for the reaper, which gives it back again"),
    Slip("heartbeat-any-claim", "runs.py", "claim = self._current(req.run, req.token)\n",
         "claim = self.store.pending.get(req.run)\n", 3,
         "a heartbeat is matched to the run, not to its claim: a former owner's heartbeat is accepted after the run "
         "was redelivered, and it works on beside the new owner"),
    Slip("heartbeat-forgets-refresh", "runs.py", "claim.idle_since = self.clock.now\n", "pass\n", 3,
         "a heartbeat is answered but does not refresh the claim's idle time: a run that outlives the redelivery "
         "timeout is redelivered while its worker still works"),
    Slip("renew-from-old-expiry", "service.py", "self.store.set_expiry(lease, now + self.ttl)",
         "self.store.set_expiry(lease, lease.expiry + self.ttl)", 2,
         "renew adds the TTL to the old expiry, not to now: each renewal pushes the expiry further out, and a holder "
         "that dies after several is reclaimed long after TTL + reaper interval"),
    Slip("fence-per-limit", "resource.py", "(req.limit, req.seat)", "(req.limit, 0)", 2,
         "the resource keeps one highest token per limit, not per seat: on a limit of 2, the holder of the other "
         "seat with an older token is refused while its lease is current"),
    Slip("renew-in-two-steps", "service.py",
         "        self.store.set_expiry(lease, now + self.ttl)\n        return Renewed(lease.expiry)",
         "        await store_step()  # the write, in a transaction of its own\n"
         "        if self.store.get_lease(lease.id) is not None:  # an UPDATE that matched no row\n"
         "            self.store.set_expiry(lease, now + self.ttl)\n"
         "        return Renewed(now + self.ttl)", 3,
         "renew checks the lease in one transaction and writes its expiry in the next, and does not look at the "
         "rows its UPDATE matched: a renewal landing just before expiry, with the reaper in between, is answered "
         "'renewed' for a lease that is gone, and its holder works on beside a successor"),
)


def _catalogue() -> dict[str, Any]:
    from dst.reference.bugs import CATALOGUE

    return {bug.slug: bug for bug in CATALOGUE}


# --- one hunt, in a fresh process ----------------------------------------------------------------------------

def hunt(slug: str | None, start: int, seconds: float, minimize_it: bool) -> dict[str, Any]:
    """The default campaign of ``dst fuzz`` (with ``--bug slug`` if given) from ``start`` until its first violation
    or ``seconds`` of CPU; with ``minimize_it``, that violation minimized as ``dst fuzz`` does."""
    from dst.cli import campaigns
    from dst.explore.fuzz import campaign, seeds
    from dst.explore.record import minimize

    args = argparse.Namespace(scenario=None, model=None, bug=[slug] if slug else [], aim=False, no_bugs=False)
    if hasattr(campaigns, "_campaign_roster"):
        made = campaigns._campaign_roster(args)
        roster, broad = made.scenarios, {"broad": made.broad}
    else:  # a checkout from before the broad scenarios had their share (``--src``)
        roster, broad = campaigns._campaign_scenarios(args), {}
    began = time.process_time()
    n, found = 0, None
    for outcome in campaign(roster, seeds(start, None, None), use_swarm=True, workers=1, deadline=began + seconds,
                            clock=time.process_time, **broad):
        n += 1
        if outcome.invariant is not None:
            found = outcome
            break
    row: dict[str, Any] = {"start": start, "seeds": n, "cpu_seconds": round(time.process_time() - began, 2),
                           "seed": None, "invariant": None, "scenario": None}
    if found is None:
        return row
    ran = roster[getattr(found, "arm", found.seed % len(roster))]  # before steering, seeds took turns by number
    row.update(seed=found.seed, invariant=found.invariant, scenario=ran.name, message=found.message)
    if minimize_it:
        shrunk = minimize(ran, found.seed, use_swarm=True)
        if shrunk is not None:
            row["minimized"] = {"steps": shrunk.steps_after, "invariant": shrunk.result.violation.invariant,
                                "plan": [step.describe() for step in shrunk.scenario.steps or ()],
                                "passes": [{"pass": p.name, "tried": p.tried, "kept": p.kept}
                                           for p in getattr(shrunk, "passes", ()) if p.kept]}
    return row


def _in_fresh_process(src: Path, slug: str | None, start: int, seconds: float, minimize_it: bool) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=str(src), PYTHONHASHSEED="0")
    command = [sys.executable, str(Path(__file__).resolve()), "--hunt", json.dumps([slug, start, seconds, minimize_it])]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"hunt {slug} from {start} failed:\n{done.stderr}")
    return json.loads(done.stdout.splitlines()[-1])


def _copy_with(src: Path, slip: Slip, into: Path) -> Path:
    """A copy of the package at ``src`` with ``slip`` written into it; the folder to put on the import path."""
    shutil.copytree(src / "dst", into / "dst", ignore=shutil.ignore_patterns("__pycache__"))
    file = into / "dst" / "reference" / slip.file
    text = file.read_text(encoding="utf-8")
    if slip.old not in text:
        raise SystemExit(f"bench/rare.py: {slip.slug}: {slip.old!r} is not in {file}: the model changed, write it again")
    file.write_text(text.replace(slip.old, slip.new), encoding="utf-8")
    return into


# --- the table -------------------------------------------------------------------------------------------------

def measure(src: Path, bugs: list[tuple[str, str | None, Slip | None]], starts: tuple[int, ...], seconds: float,
            workers: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="dst-rare-") as scratch:
        paths = {}
        for name, _, slip in bugs:
            paths[name] = src if slip is None else _copy_with(src, slip, Path(scratch) / name)
        jobs = [(name, slug, start) for name, slug, _ in bugs for start in starts]
        with ThreadPoolExecutor(workers) as pool:  # each hunt is its own process, on one core
            rows = list(pool.map(lambda job: _in_fresh_process(paths[job[0]], job[1], job[2], seconds,
                                                               job[2] == starts[0]), jobs))
    results: dict[str, Any] = {}
    for (name, _, _), row in zip(jobs, rows):
        results.setdefault(name, {"hunts": []})["hunts"].append(row)
    for name, result in results.items():
        hits = [r for r in result["hunts"] if r["invariant"]]
        result["found"] = len(hits)
        result["median_seeds"] = median(r["seeds"] if r["invariant"] else float("inf") for r in result["hunts"])
        result["median_cpu_seconds"] = median(r["cpu_seconds"] if r["invariant"] else float("inf")
                                              for r in result["hunts"])
        result["invariants"] = sorted({r["invariant"] for r in hits})
        result["minimized"] = result["hunts"][0].get("minimized")
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hunt", help=argparse.SUPPRESS)
    parser.add_argument("--quick", action="store_true", help="two ranges of 10 s each: a smoke test")
    parser.add_argument("--seconds", type=float, default=60.0, help="CPU seconds per range (default 60)")
    parser.add_argument("--ranges", type=int, default=len(STARTS), help="how many seed ranges (default 10)")
    parser.add_argument("--bug", action="append", default=[], help="only these bugs (repeatable)")
    parser.add_argument("--src", type=Path, default=HERE.parent / "src", help="where the package to measure is")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="hunts at once, one core each")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    if args.hunt:
        print(json.dumps(hunt(*json.loads(args.hunt))))
        return
    starts = STARTS[:2] if args.quick else STARTS[:args.ranges]
    seconds = 10.0 if args.quick else args.seconds
    sys.path.insert(0, str(args.src))
    catalogue = _catalogue()
    bugs: list[tuple[str, str | None, Slip | None]] = [(slug, slug, None) for slug in catalogue]
    bugs += [(slip.slug, None, slip) for slip in SLIPS]
    if args.bug:
        bugs = [b for b in bugs if b[0] in args.bug]
    began = time.perf_counter()
    results = measure(args.src.resolve(), bugs, starts, seconds, args.workers)
    for name, result in results.items():
        result["sketch_steps"] = catalogue[name].sketch_steps if name in catalogue else next(
            s.sketch for s in SLIPS if s.slug == name)
        result["written_for_the_benchmark"] = name not in catalogue
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"seconds_per_range": seconds, "starts": list(starts), "commit": _commit(args.src),
                                    "bugs": results}, indent=1) + "\n")
    _print(results, starts, seconds, time.perf_counter() - began, args.out)


def _commit(src: Path) -> str | None:
    """The commit the measured package was checked out at (None outside a git checkout)."""
    done = subprocess.run(["git", "-C", str(src), "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                          check=False)
    return done.stdout.strip() or None


def _print(results: dict[str, Any], starts: tuple[int, ...], seconds: float, wall: float, out: Path) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"the default campaign, {len(starts)} ranges of at most {seconds:g} CPU s each")
    for column in ("bug", "found", "median seeds", "median CPU s", "by", "steps (sketch)", "passes that did the work"):
        table.add_column(column)
    for name, r in results.items():
        shrunk = r["minimized"]
        steps = "-" if shrunk is None else f"{shrunk['steps']} ({r['sketch_steps']})"
        passes = "-" if shrunk is None else ", ".join(f"{p['pass']} {p['kept']}" for p in shrunk["passes"])
        table.add_row(name + (" *" if r["written_for_the_benchmark"] else ""), f"{r['found']}/{len(starts)}",
                      f"{r['median_seeds']:g}", f"{r['median_cpu_seconds']:g}", ", ".join(r["invariants"]), steps,
                      passes)
    console = Console()
    console.print(table)
    console.print(f"* written for the benchmark (an edit of the model, no flag). {wall:.0f} s; figures in {out}")


if __name__ == "__main__":
    main()
