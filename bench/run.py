"""The benchmark suite for issue 2, in one command: ``python bench/run.py [--quick]``.

Four measurements, each a ratio of contenders timed side by side in this run (the machine
is noisy, so no figure is compared with one from another run):

1. kernel: ``dst``'s kernel on a no-op workload beside a bare ``heapq`` loop and SimPy;
2. model: the full default scenario over a range of seeds, beside the bare ``heapq`` loop;
3. scaling: microseconds per event at 5, 50 and 500 clients, and with a 10x longer run;
4. memory: peak RSS and live Python blocks of one process after 100 and after 1000 seeds.

Prints rich tables and writes every figure, with each round's value, to
``bench/results/latest.json``. Goals are from issue 2 and ``shared/DESIGN.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import time
from functools import partial
from pathlib import Path
from typing import Any

import attrs
import simpy
from rich.console import Console
from rich.table import Table

from dst.scenario import INVARIANT_IDS, Scenario, load_scenario

# bench/ is the script's directory, so its modules import by their plain names
from loops import heapq_loop, kernel_loop, simpy_loop
from memory import memory_readings
from timing import SeedRunner, interleave, paired_ratio, summary


@attrs.frozen
class Settings:
    rounds: int = 30  # kernel rounds
    loop_events: int = 40_000  # events per round of each no-op loop
    model_rounds: int = 20
    model_seeds: int = 200  # split evenly over the model rounds
    scale_rounds: int = 7
    scale_seconds: float = 0.5  # at least this long per scaling contender per round
    memory: tuple[int, int] = (100, 1000)  # seeds at the two memory readings


QUICK = Settings(rounds=10, loop_events=20_000, model_rounds=5, model_seeds=20, scale_rounds=1, scale_seconds=0.2,
                 memory=(10, 100))
LOOPS = {"kernel": kernel_loop, "heapq": heapq_loop, "simpy": simpy_loop}
PENDING = (4, 1000)
RATIOS = (("kernel", "heapq"), ("kernel", "simpy"))
BASE = "5 clients"
OUT = Path(__file__).parent / "results" / "latest.json"


# --- the measurements ---------------------------------------------------------------------------

def bench_kernel(s: Settings) -> dict[str, Any]:
    contenders = {f"{name} {p}": partial(loop, p, s.loop_events // p) for name, loop in LOOPS.items() for p in PENDING}
    rates = interleave(contenders, s.rounds)
    ratios = {f"{a}/{b} {p}": paired_ratio(rates[f"{a} {p}"], rates[f"{b} {p}"])
              for a, b in RATIOS for p in PENDING}
    return {"rounds": s.rounds, "events_per_round": s.loop_events,
            "events_per_s": {name: summary(r) for name, r in rates.items()}, "ratios": ratios}


def bench_model(s: Settings, scenario: Scenario) -> dict[str, Any]:
    model = SeedRunner(scenario, batch=s.model_seeds // s.model_rounds, seeds=range(s.model_seeds))
    rates = interleave({"model": model, "heapq 4": partial(heapq_loop, 4, s.loop_events // 4)}, s.model_rounds)
    return {"seeds": model.runs, "violations": model.violations, "invariants": list(scenario.invariants),
            "events": model.events, "events_per_s": summary(rates["model"]),
            "seeds_per_s": summary(model.seed_rates), "heapq_events_per_s": summary(rates["heapq 4"]),
            "ratio_to_heapq": paired_ratio(rates["model"], rates["heapq 4"])}


def scaled(scenario: Scenario, clients: int, length: int = 1) -> Scenario:
    """``clients`` clients sharing a limit of about half as many slots, over ``length`` times
    the run (and ``length`` times the jobs per client, so the load lasts the whole run)."""
    wl, run = scenario.workload, scenario.run
    return attrs.evolve(
        scenario,
        workload=attrs.evolve(wl, clients=clients, jobs=wl.jobs * length),
        model=attrs.evolve(scenario.model, limits=((wl.limit, max(2, clients // 2)),)),
        run=attrs.evolve(run, duration=run.duration * length),
    )


def bench_scaling(s: Settings, scenario: Scenario) -> dict[str, Any]:
    configs = {BASE: scaled(scenario, 5), "50 clients": scaled(scenario, 50),
               "500 clients": scaled(scenario, 500), "5 clients, 10x run": scaled(scenario, 5, 10)}
    runners = {name: SeedRunner(sc, min_seconds=s.scale_seconds) for name, sc in configs.items()}
    rates = interleave(runners, s.scale_rounds)
    return {name: {"us_per_event": summary([1e6 / r for r in rates[name]]),
                   "cost_vs_base": paired_ratio(rates[BASE], rates[name]),
                   "events_per_seed": runner.events / runner.runs, "seeds": runner.runs,
                   "violations": runner.violations}
            for name, runner in runners.items()}


def bench_memory(s: Settings) -> dict[str, Any]:
    readings = memory_readings(s.memory)
    garbage = readings.pop("cyclic_garbage_per_run")
    first, last = (readings[str(n)] for n in s.memory)
    return {"readings": readings, "growth": {key: last[key] - first[key] for key in first},
            "cyclic_garbage_per_run": garbage}


def goals(r: dict[str, Any]) -> list[dict[str, Any]]:
    """Each goal: what was measured, the bound, and whether it holds."""
    k, scale = r["kernel"]["ratios"], r["scaling"]
    rows = [(f"kernel / bare heapq, {p} pending", k[f"kernel/heapq {p}"], ">=", 0.6) for p in PENDING]
    rows += [(f"kernel / SimPy, {p} pending", k[f"kernel/simpy {p}"], ">=", 2.0) for p in PENDING]
    rows += [("full model / bare heapq (4 pending)", r["model"]["ratio_to_heapq"], ">=", 1 / 8),
             ("cost per event, 500 vs 5 clients", scale["500 clients"]["cost_vs_base"], "<=", 1.5),
             ("cost per event, 10x vs 1x run length", scale["5 clients, 10x run"]["cost_vs_base"], "<=", 1.5)]
    return [{"goal": goal, "measured": ratio, "target": f"{op} {bound:.3g}",
             "met": ratio["median"] >= bound if op == ">=" else ratio["median"] <= bound}
            for goal, ratio, op, bound in rows]


# --- where and how it ran -----------------------------------------------------------------------

def machine() -> dict[str, Any]:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    return {"cpus": len(os.sched_getaffinity(0)), "cpu": cpu, "python": platform.python_version(),
            "implementation": platform.python_implementation(), "simpy": simpy.__version__}


def source() -> dict[str, Any]:
    """The commit measured, and whether the working tree differed from it (read-only git)."""
    def git(*args: str) -> str:
        try:
            out = subprocess.run(["git", *args], cwd=Path(__file__).parent, capture_output=True, text=True)
        except OSError:
            return ""
        return out.stdout.strip()

    return {"commit": git("rev-parse", "HEAD") or None, "src_changed": bool(git("status", "--porcelain", "--", "../src"))}


def warm_up(scenario: Scenario) -> None:
    """One untimed pass over every code path, so no contender pays for first-time costs."""
    for loop in LOOPS.values():
        loop(4, 1_000)
    SeedRunner(scenario)()


# --- presentation -------------------------------------------------------------------------------

def rate(x: float) -> str:
    return f"{x / 1e6:.2f}M" if x >= 1e6 else f"{x / 1e3:.0f}k"


def times(ratio: dict[str, float]) -> str:
    """A ratio's median and, in brackets, its interquartile range over rounds."""
    return f"{ratio['median']:#.3g}x ({ratio['q1']:#.3g}-{ratio['q3']:#.3g})"


def table(title: str, header: tuple[str, ...], rows: list[tuple[str, ...]]) -> Table:
    t = Table(title=title, title_justify="left")
    for i, name in enumerate(header):
        t.add_column(name, justify="left" if i == 0 else "right")
    for row in rows:
        t.add_row(*row)
    return t


def kernel_table(k: dict[str, Any]) -> Table:
    rows = [(name, *(rate(k["events_per_s"][f"{name} {p}"]["median"]) for p in PENDING)) for name in LOOPS]
    rows += [(f"{a}/{b}", *(times(k["ratios"][f"{a}/{b} {p}"]) for p in PENDING)) for a, b in RATIOS]
    return table(f"Kernel, no-op events/s (median of {k['rounds']} rounds)",
                 ("loop", *(f"{p} pending" for p in PENDING)), rows)


def model_table(m: dict[str, Any]) -> Table:
    ratio = m["ratio_to_heapq"]
    rows = [("seeds (violations)", f"{m['seeds']} ({m['violations']})"),
            ("events/s", rate(m["events_per_s"]["median"])),
            ("seeds/s", f"{m['seeds_per_s']['median']:.1f}"),
            ("bare heapq events/s, 4 pending", rate(m["heapq_events_per_s"]["median"])),
            ("model / heapq", f"{times(ratio)} = 1/{1 / ratio['median']:.1f}")]
    return table("Full model, default scenario, every invariant on (medians)", ("", "value"), rows)


def scaling_table(scale: dict[str, Any]) -> Table:
    rows = [(name, f"{c['events_per_seed']:,.0f}", str(c["seeds"]), f"{c['us_per_event']['median']:.2f}",
             times(c["cost_vs_base"])) for name, c in scale.items()]
    return table("Cost per event as the work grows", ("scenario", "events/seed", "seeds run", "µs/event",
                                                      f"cost vs {BASE}"), rows)


def memory_table(mem: dict[str, Any], checkpoints: tuple[int, int]) -> Table:
    rows = [(f"after {n} seeds" if n != "baseline" else "after 1 seed (baseline)",
             f"{x['peak_rss_kib'] / 1024:.1f}", f"{x['live_blocks']:,}") for n, x in mem["readings"].items()]
    growth = mem["growth"]
    rows.append((f"growth, {checkpoints[0]} -> {checkpoints[1]} seeds", f"{growth['peak_rss_kib'] / 1024:+.1f}",
                 f"{growth['live_blocks']:+,}"))
    t = table("Memory of one process running seeds of the default scenario",
              ("", "peak RSS, MiB", "live Python blocks"), rows)
    t.caption = f"one run leaves {mem['cyclic_garbage_per_run']:,} objects for the cyclic collector"
    return t


def goals_table(goals: list[dict[str, Any]]) -> Table:
    rows = [(g["goal"], times(g["measured"]), g["target"], "yes" if g["met"] else "[bold red]NO[/]") for g in goals]
    return table("Goals (median ratio, interquartile range over rounds)", ("goal", "measured", "target", "met"), rows)


def render(r: dict[str, Any]) -> list[Table]:
    return [kernel_table(r["kernel"]), model_table(r["model"]), scaling_table(r["scaling"]),
            memory_table(r["memory"], r["settings"]["memory"]), goals_table(r["goals"])]


# --- the command --------------------------------------------------------------------------------

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds and seeds: a smoke test, not figures to quote")
    parser.add_argument("--out", type=Path, default=OUT, help=f"where to write the JSON results (default: {OUT})")
    args = parser.parse_args()
    s = QUICK if args.quick else Settings()
    console = Console()
    scenario = load_scenario()
    assert scenario.invariants == INVARIANT_IDS, "the default scenario should check every invariant"
    start = time.perf_counter()
    warm_up(scenario)
    r: dict[str, Any] = {"machine": machine(), "source": source(), "quick": args.quick, "settings": attrs.asdict(s),
                         "clock": "CPU time of this process (time.process_time)"}
    sections = {"kernel": partial(bench_kernel, s), "model": partial(bench_model, s, scenario),
                "scaling": partial(bench_scaling, s, scenario), "memory": partial(bench_memory, s)}
    for name, bench in sections.items():
        with console.status(f"measuring {name}..."):
            r[name] = bench()
    r["goals"] = goals(r)
    r["wall_seconds"] = time.perf_counter() - start
    for t in render(r):
        console.print(t)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(r, indent=2) + "\n")
    console.print(f"{r['machine']['cpus']} cpus, {r['machine']['cpu']}, Python {r['machine']['python']}; "
                  f"{r['wall_seconds']:.0f}s; results in {args.out}")


if __name__ == "__main__":
    main()
