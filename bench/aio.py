"""dst's deterministic asyncio loop beside the other Python DST loops, on one plain-asyncio workload:
``python bench/aio.py [--quick]``.

The contenders are ``dst.aio.run`` and the libraries on PyPI that run unmodified asyncio code on a
seeded loop in virtual time: simloop, simloom, seedloop and detangle. Each runs the same coroutine,
``aio_workload.main(seed)`` (a lease service and 20 clients in plain asyncio, beside this file),
for seeds 1..K, once per round, in an order that rotates every round so drift on a noisy machine hits
them all alike. A round's figure is seeds per CPU second (``time.process_time``); the report is each
contender's median over the rounds and the median, min and max of its per-round ratio to dst's.

Every contender runs every seed once per round, and each seed's checksum must come back the same
every time on the same loop (the checksum is the order in which the service granted, renewed,
expired and released leases): the report says for each whether it did. A contender that does not
import, or whose first run raises, is left out with its error line; dst is left out, with a note,
while ``dst.aio.run`` does not exist yet, and the ratios are then to the first contender that ran.

A second table is the raw cost of a callback: N ``loop.call_soon`` callbacks as a chain (each one
schedules the next) and as a fan (one callback schedules a wave of 1,000 at once, the last of the
wave the next wave), in a coroutine run by each contender and by asyncio's own loop
(``asyncio.new_event_loop()``), in callbacks per CPU second; the ratio is to asyncio's, per round.

The peers need Python 3.12 (dst needs 3.11), so this runs in a 3.12 venv. From the repository root
(``python3.12`` being any Python 3.12):

    python3.12 -m venv /tmp/aio-bench && /tmp/aio-bench/bin/pip install -q -e . simloop simloom seedloop detangle && \
        /tmp/aio-bench/bin/python bench/aio.py

    /tmp/aio-bench/bin/python bench/aio.py --quick              # 3 rounds of 3 seeds, 5,000 callbacks
    /tmp/aio-bench/bin/python bench/aio.py --seeds 20 --rounds 11
    /tmp/aio-bench/bin/python bench/aio.py --callgrind           # instructions a seed, not seconds (needs valgrind)
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable, Coroutine
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from statistics import median
from typing import Any

# bench/ is the script's directory, so its modules import by their plain names
from aio_workload import main as workload

REPO = Path(__file__).resolve().parents[1]
Main = Callable[[], Coroutine[Any, Any, Any]]  # makes a fresh coroutine
Runner = Callable[[Main, int], Any]  # runs it to its end with a seed, returns its result


def dst_runner() -> Runner:
    from dst.aio import run  # the deterministic loop of this repository

    return lambda make, seed: run(make(), seed=seed)


def simloop_runner() -> Runner:
    import simloop

    def run(make: Main, seed: int) -> Any:
        loop = simloop.SimLoop(seed)
        try:
            return loop.run_until_complete(make())
        finally:
            loop.close()
    return run


def simloom_runner() -> Runner:
    import simloom

    # takes a callable that makes the coroutine (a run can be re-executed); a RunResult's .value
    return lambda make, seed: simloom.run(make, seed=seed).value


def seedloop_runner() -> Runner:
    import seedloop

    def run(make: Main, seed: int) -> Any:
        box = []

        async def scenario(world: Any) -> None:  # a scenario takes the World and returns nothing
            box.append(await make())
        seedloop.replay(scenario, seed=seed)
        return box[0]
    return run


def detangle_runner() -> Runner:
    import detangle

    return lambda make, seed: detangle.run(make(), seed=seed)


# name -> (distribution, how it runs a seeded coroutine, its runner)
CONTENDERS: dict[str, tuple[str, str, Callable[[], Runner]]] = {
    "dst": ("dst", "dst.aio.run(main(seed), seed=seed)", dst_runner),
    "simloop": ("simloop", "simloop.SimLoop(seed).run_until_complete(main(seed))", simloop_runner),
    "simloom": ("simloom", "simloom.run(lambda: main(seed), seed=seed).value", simloom_runner),
    "seedloop": ("seedloop", "seedloop.replay(scenario, seed=seed)  # async def scenario(world): ...",
                 seedloop_runner),
    "detangle": ("detangle", "detangle.run(main(seed), seed=seed)", detangle_runner),
}


def error_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def load(seeds: range) -> tuple[dict[str, Runner], dict[str, str]]:
    """The contenders that import and run seed 1 twice to the same checksum; why each other one does not."""
    runners: dict[str, Runner] = {}
    missing: dict[str, str] = {}
    for name, (_, _, make_runner) in CONTENDERS.items():
        try:
            runner = make_runner()
        except (ImportError, AttributeError) as exc:
            missing[name] = f"not available: {error_line(exc)}"
            continue
        try:
            first, second = (runner(lambda: workload(seeds[0]), seeds[0]) for _ in range(2))
        except Exception as exc:
            missing[name] = f"seed {seeds[0]} raised {error_line(exc)}"
            continue
        if first != second:
            missing[name] = f"seed {seeds[0]} twice gave two checksums ({first}, {second}): not deterministic"
            continue
        runners[name] = runner
    return runners, missing


def rotate(names: list[str], r: int) -> list[str]:
    shift = r % len(names)
    return names[shift:] + names[:shift]


def seed_rounds(runners: dict[str, Runner], seeds: range, rounds: int) -> tuple[dict[str, list[float]], dict[str, str]]:
    """Seeds per CPU second per round for each contender, and what each one's checksums showed."""
    rates: dict[str, list[float]] = {name: [] for name in runners}
    checksums: dict[str, dict[int, set[Any]]] = {name: {seed: set() for seed in seeds} for name in runners}
    failed: dict[str, str] = {}
    for r in range(rounds):
        for name in rotate(list(runners), r):
            if name in failed:
                continue
            run, sums = runners[name], checksums[name]
            start = time.process_time()
            try:
                for seed in seeds:
                    sums[seed].add(run(lambda: workload(seed), seed))
            except Exception as exc:
                failed[name] = f"round {r}, seed {seed}: {error_line(exc)}"
                continue
            rates[name].append(len(seeds) / (time.process_time() - start))
    verdicts = {}
    for name, sums in checksums.items():
        if name in failed:
            verdicts[name] = f"FAILED {failed[name]}"
            continue
        unstable = [seed for seed, seen in sums.items() if len(seen) != 1]
        distinct = len({next(iter(seen)) for seen in sums.values() if len(seen) == 1})
        verdicts[name] = (f"NOT deterministic: seeds {unstable} gave several checksums" if unstable else
                          f"same checksum every round for all {len(seeds)} seeds ({distinct} distinct)")
    return {name: values for name, values in rates.items() if name not in failed}, verdicts


async def chain(n: int) -> int:
    """n callbacks, each scheduling the next with ``call_soon``."""
    loop = asyncio.get_running_loop()
    done = loop.create_future()

    def step(i: int) -> None:
        if i == n:
            done.set_result(i)
        else:
            loop.call_soon(step, i + 1)
    loop.call_soon(step, 1)
    return await done


async def fan(n: int, width: int = 1000) -> int:
    """n callbacks in waves of ``width`` ready at once: one callback schedules a wave, the last of the
    wave to run schedules the next."""
    loop = asyncio.get_running_loop()
    done = loop.create_future()
    ran = 0

    def leaf() -> None:
        nonlocal ran
        ran += 1
        if ran == n:
            done.set_result(ran)
        elif ran % width == 0:
            loop.call_soon(root)

    def root() -> None:
        for _ in range(min(width, n - ran)):
            loop.call_soon(leaf)
    loop.call_soon(root)
    return await done


def asyncio_runner(make: Main, seed: int) -> Any:
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(make())
    finally:
        loop.close()


def callback_rounds(runners: dict[str, Runner], n: int, width: int,
                    rounds: int) -> dict[str, dict[str, list[float] | str]]:
    """Callbacks per CPU second per round, for the chain and the fan, under each loop."""
    shapes = {"chain": lambda: chain(n), "fan": lambda: fan(n, width)}
    loops = {"asyncio": asyncio_runner, **runners}
    out: dict[str, dict[str, list[float] | str]] = {}
    for shape, make in shapes.items():
        rates: dict[str, list[float] | str] = {name: [] for name in loops}
        for r in range(rounds):
            for name in rotate(list(loops), r):
                if isinstance(rates[name], str):
                    continue
                start = time.process_time()
                try:
                    got = loops[name](make, 0)
                except Exception as exc:
                    rates[name] = error_line(exc)
                    continue
                seconds = time.process_time() - start
                if got != n:
                    rates[name] = f"ended after {got} callbacks, not {n}"
                    continue
                rates[name].append(n / seconds)  # type: ignore[union-attr]
        out[shape] = rates
    return out


def git_commit() -> str:
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--", "src"], capture_output=True, text=True)
    return (head.stdout.strip() or "unknown") + (" with uncommitted changes in src/" if dirty.stdout.strip() else "")


def installed(distribution: str) -> str:
    try:
        return version(distribution)
    except PackageNotFoundError:
        return "not installed"


# In the child under callgrind: a contender's runner, seed 1 once to warm it, then the seeds asked for.
_CHILD = """
import sys
sys.path.insert(0, sys.argv[1])
import aio
from aio_workload import main as workload
run = aio.CONTENDERS[sys.argv[2]][2]()
run(lambda: workload(1), 1)
for seed in range(int(sys.argv[3]), int(sys.argv[4])):
    run(lambda: workload(seed), seed)
"""


def callgrind(seeds: range) -> int:
    """Instructions per seed of each contender that runs (a run of seed 1 alone subtracted: imports, warm-up)."""
    import tempfile

    here = str(Path(__file__).resolve().parent)
    runners, _ = load(range(1, 2))
    print(f"workload: aio_workload.main(seed), seeds {seeds.start}-{seeds.stop - 1}, instructions per seed (callgrind)")
    counts: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in runners:
            totals = []
            for stop in (seeds.start, seeds.stop):
                out = Path(tmp) / f"{name}.{stop}"
                subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable, "-c",
                                _CHILD, here, name, str(seeds.start), str(stop)], capture_output=True, check=True)
                totals.append(int(next(line for line in out.read_text().splitlines()
                                       if line.startswith("totals:")).split()[1]))
            counts[name] = (totals[1] - totals[0]) / len(seeds)
    for name, n in counts.items():
        print(f"  {name:<9} {n / 1e6:10.1f} M instructions a seed, {n / counts['dst']:.3f} x dst's"
              if "dst" in counts else f"  {name:<9} {n / 1e6:10.1f} M instructions a seed")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10, help="seeds per contender per round (seeds 1..K)")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--callbacks", type=int, default=20_000, help="callbacks per chain and per fan")
    parser.add_argument("--fan", type=int, default=1000, help="callbacks ready at once in each wave of the fan")
    parser.add_argument("--quick", action="store_true", help="3 rounds of 3 seeds, 5,000 callbacks")
    parser.add_argument("--callgrind", action="store_true",
                        help="instructions per seed of the workload instead of time, each contender once under "
                             "valgrind's callgrind: the same figure on a busy machine as on an idle one")
    args = parser.parse_args()
    if args.callgrind:
        return callgrind(range(1, args.seeds + 1) if args.seeds != 10 else range(1, 4))
    if args.quick:
        args.seeds, args.rounds, args.callbacks = 3, 3, 5_000
    seeds = range(1, args.seeds + 1)

    print(f"machine: {os.cpu_count()} CPUs, {platform.python_implementation()} {platform.python_version()} "
          f"on {platform.system()} {platform.machine()}")
    print(f"commit: {git_commit()}")
    print(f"load average (1 min) at start: {os.getloadavg()[0]:.2f}")
    print()
    runners, missing = load(seeds)
    print("contenders:")
    for name, (distribution, line, _) in CONTENDERS.items():
        state = "runs" if name in runners else missing[name]
        print(f"  {name:<9} {installed(distribution):<14} {line}")
        print(f"  {'':<9} {'':<14} -> {state}")
    if not runners:
        print("no contender ran the workload")
        return 1

    rates, verdicts = seed_rounds(runners, seeds, args.rounds)
    base = "dst" if "dst" in rates else next(iter(rates), None)
    print()
    print(f"workload: aio_workload.main(seed), seeds {seeds[0]}-{seeds[-1]}, {args.rounds} rounds, "
          f"seeds per CPU second")
    if base != "dst":
        print(f"  (dst left out: {missing.get('dst', verdicts.get('dst'))}; ratios are to {base})")
    print(f"  {'':<9} {'seeds/s':>9}  {f'/ {base} median':>15} {'min':>7} {'max':>7}   checksums")
    for name in runners:
        if name not in rates:
            print(f"  {name:<9} {'-':>9}  {'-':>15} {'-':>7} {'-':>7}   {verdicts[name]}")
            continue
        ratios = [a / b for a, b in zip(rates[name], rates[base], strict=True)] if base else []
        print(f"  {name:<9} {median(rates[name]):>9.1f}  {median(ratios):>15.3f} {min(ratios):>7.3f} "
              f"{max(ratios):>7.3f}   {verdicts[name]}")

    print()
    print(f"loop callbacks: {args.callbacks:,} call_soon callbacks as a chain and as a fan in waves of "
          f"{args.fan:,}, {args.rounds} rounds, callbacks per CPU second")
    table = callback_rounds({name: runners[name] for name in rates}, args.callbacks, args.fan, args.rounds)
    names = list(next(iter(table.values())))
    print(f"  {'':<9} " + "".join(f"{shape + '/s':>12} {'/ asyncio':>10}" for shape in table))
    for name in names:
        cells = []
        for shape, shape_rates in table.items():
            got, ref = shape_rates[name], shape_rates["asyncio"]
            if isinstance(got, str):
                cells.append(f"{'-':>12} {'-':>10}")
                continue
            ratio = median(a / b for a, b in zip(got, ref, strict=True)) if not isinstance(ref, str) else float("nan")
            cells.append(f"{median(got):>12,.0f} {ratio:>10.3f}")
        print(f"  {name:<9} " + "".join(cells))
    for shape, shape_rates in table.items():
        for name, got in shape_rates.items():
            if isinstance(got, str):
                print(f"  {name} failed the {shape}: {got}")
    print()
    print(f"load average (1 min) at end: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
