"""The benchmark suite, in one command: ``python bench/run.py [--quick]``.

Seven measurements; every comparison is a ratio of contenders timed side by side in this run
(the machine is noisy, so no figure is compared with one from another run):

1. kernel: ``dst``'s kernel on a no-op workload beside a bare ``heapq`` loop and SimPy;
2. model: the full default scenario over a range of seeds, beside the bare ``heapq`` loop; then the same
   for a small, busy scenario (``bench/small.toml``: a limit of 1, a 100 ms TTL, four writing clients);
3. scaling: microseconds per event at 5, 50 and 500 clients, and with a 10x longer run;
4. memory: peak RSS and live Python blocks of one process after 100 and after 1000 seeds;
5. finding: seeds and CPU seconds one core takes to find each catalogue bug, from 10 starts;
6. parallel: fuzz campaign seeds/s with 2 workers beside 1 (wall clock);
7. clean: every bug scenario with its bug off, on 2 workers; with the other sections' seeds
   of the correct model, the suite's count of seeds run without a violation.

Prints rich tables and writes every figure, with each round's value, to
``bench/results/latest.json``. The goals are the project's design goals, listed in BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from functools import partial
from math import inf
from pathlib import Path
from statistics import median
from typing import Any

import attrs
import simpy
from rich.console import Console
from rich.table import Table

from dst.explore.record import minimize
from dst.explore.fuzz import Outcome
from dst.explore.selftest import bug_scenario, smallest_finding
from dst.reference.bugs import CATALOGUE as BUGS, KNOWN_BUGS
from dst.scenario import INVARIANT_IDS, Scenario, load_scenario

CATALOGUE = {bug.slug: bug.breaks for bug in BUGS}
SKETCH_STEPS = {bug.slug: bug.sketch_steps for bug in BUGS}

# bench/ is the script's directory, so its modules import by their plain names
from fuzzing import CampaignRunner, hunts
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
    hunt_starts: tuple[int, ...] = tuple(range(1, 10_000, 1000))  # one hunt per bug from each
    hunt_max_seeds: int = 2000  # a hunt's cap: this many seeds ...
    hunt_seconds: float = 30.0  # ... or this much CPU time
    parallel_rounds: int = 7
    parallel_batch: int = 160  # seeds per contender per round
    clean_seeds: int = 120  # per bug scenario, bug off


QUICK = Settings(rounds=10, loop_events=20_000, model_rounds=5, model_seeds=20, scale_rounds=1, scale_seconds=0.2,
                 memory=(10, 100), hunt_starts=(1, 1001), hunt_seconds=1.0, parallel_rounds=2, parallel_batch=24,
                 clean_seeds=5)
LOOPS = {"kernel": kernel_loop, "heapq": heapq_loop, "simpy": simpy_loop}
PENDING = (4, 1000)
RATIOS = (("kernel", "heapq"), ("kernel", "simpy"))
BASE = "5 clients"
WORKERS = {"1 worker": 1, "2 workers": 2}
CLEAN_FIRST = 100_000  # the clean section's first seed: not the seeds `dst selftest` runs
GOAL_SECONDS = 1.0  # a design goal: a catalogue bug is found in about a second
OUT = Path(__file__).parent / "results" / "latest.json"
SMALL = Path(__file__).parent / "small.toml"  # a limit of 1, a 100 ms TTL, four clients writing under leases


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
    garbage, violations = readings.pop("cyclic_garbage_per_run"), readings.pop("violations")
    first, last = (readings[str(n)] for n in s.memory)
    return {"readings": readings, "growth": {key: last[key] - first[key] for key in first},
            "cyclic_garbage_per_run": garbage, "violations": violations}


def censored_median(hunts: list[dict[str, Any]], key: str) -> float | None:
    """The median of ``key`` over hunts, a miss counting as longer than any hit (None if that is a miss)."""
    m = median(h[key] if h["invariant"] else inf for h in hunts)
    return None if m == inf else m


def bench_finding(s: Settings) -> dict[str, Any]:
    result = {}
    for slug in KNOWN_BUGS:
        records = hunts(slug, s.hunt_starts, s.hunt_max_seeds, s.hunt_seconds)
        hits = [h["invariant"] for h in records if h["invariant"]]
        result[slug] = {"expected": CATALOGUE[slug], "found": len(hits), "hit": sorted(set(hits)),
                        "expected_only": set(hits) <= set(CATALOGUE[slug]),
                        **{f"median_{key}": censored_median(records, key)
                           for key in ("seeds", "cpu_seconds", "wall_seconds")},
                        "hunts": records}
    return result


def bench_minimizer(find: dict[str, Any], candidates: int = 3) -> dict[str, Any]:
    """Per slug: minimize the violation its first hunt found, as ``dst fuzz`` does (swarm on); and the
    smallest of the first ``candidates`` violations, as ``dst selftest --findings`` does."""
    result = {}
    for slug, f in find.items():
        first = next((h for h in f["hunts"] if h["invariant"]), None)
        if first is None:
            continue
        began = time.process_time()
        shrunk = minimize(bug_scenario(slug), first["seed"], use_swarm=True)
        cpu = time.process_time() - began
        best = smallest_finding(slug, Outcome(first["seed"], 0, first["invariant"]), candidates=candidates,
                                use_swarm=True, workers=1)
        result[slug] = {"seed": first["seed"], "steps_before": shrunk.steps_before, "steps_after": shrunk.steps_after,
                        "runs": shrunk.runs, "cpu_seconds": cpu, "stop": shrunk.stop.name,
                        "best_of": candidates, "best_steps": best.steps_after, "sketch": SKETCH_STEPS[slug],
                        "within_sketch": best.steps_after <= SKETCH_STEPS[slug] + 1}
    return result


def bench_parallel(s: Settings, scenario: Scenario) -> dict[str, Any]:
    """Seeds/s on the wall clock; and, to tell overhead from a busy machine, the CPU each seed
    took (workers included) and the cores kept busy (CPU seconds per wall second). In each round,
    the ratio of seeds/s is the ratio of cores busy over the ratio of CPU per seed."""
    runners = {name: CampaignRunner(scenario, w, s.parallel_batch) for name, w in WORKERS.items()}
    load = os.getloadavg()[0]
    rates = interleave(runners, s.parallel_rounds, clock=time.perf_counter)
    metrics = {"seeds_per_s": rates,
               "cpu_ms_per_seed": {name: [1e3 * c for c in r.cpu_per_seed] for name, r in runners.items()},
               "cores_busy": {name: [x * c for x, c in zip(rates[name], r.cpu_per_seed)] for name, r in runners.items()}}
    return {**{key: {name: summary(v) for name, v in m.items()} for key, m in metrics.items()},
            "ratios": {key: paired_ratio(m["2 workers"], m["1 worker"]) for key, m in metrics.items()},
            "seeds": sum(r.runs for r in runners.values()),
            "violations": [attrs.asdict(v) for r in runners.values() for v in r.violations],
            "load_average": {"before": load, "after": os.getloadavg()[0]}}


def bench_clean(s: Settings) -> dict[str, Any]:
    start = time.perf_counter()
    runners = {slug: CampaignRunner(attrs.evolve(bug_scenario(slug), bugs=()), 2, s.clean_seeds, CLEAN_FIRST)
               for slug in KNOWN_BUGS}
    for runner in runners.values():
        runner()
    return {"first_seed": CLEAN_FIRST, "seeds": sum(r.runs for r in runners.values()),
            "violations": [{"slug": slug, **attrs.asdict(v)} for slug, r in runners.items() for v in r.violations],
            "per_slug": {slug: r.runs for slug, r in runners.items()}, "wall_seconds": time.perf_counter() - start}


def bugs_off(r: dict[str, Any], s: Settings) -> dict[str, dict[str, int]]:
    """Every section's seeds of the correct model (no bug on), and how many violated an invariant."""
    scale = r["scaling"].values()
    counts = {"model": (r["model"]["seeds"], r["model"]["violations"]),
              "small": (r["small"]["seeds"], r["small"]["violations"]),
              "scaling": (sum(c["seeds"] for c in scale), sum(c["violations"] for c in scale)),
              "memory": (max(s.memory), r["memory"]["violations"]),
              "parallel": (r["parallel"]["seeds"], len(r["parallel"]["violations"])),
              "clean": (r["clean"]["seeds"], len(r["clean"]["violations"]))}
    counts["total"] = tuple(map(sum, zip(*counts.values())))
    return {name: {"seeds": n, "violations": v} for name, (n, v) in counts.items()}


def finding_goals(find: dict[str, Any]) -> list[tuple[str, float, str, str, float]]:
    """Every bug found in about a second, by its median hunt; and every hunt finding its bug."""
    cpu = {slug: inf if f["median_cpu_seconds"] is None else f["median_cpu_seconds"] for slug, f in find.items()}
    slowest = max(cpu, key=cpu.__getitem__)
    took = "missed by the median hunt" if cpu[slowest] == inf else f"{cpu[slowest]:.2f} s"
    within = sum(c <= GOAL_SECONDS for c in cpu.values())
    hunts_run = sum(len(f["hunts"]) for f in find.values())
    right = sum(f["found"] for f in find.values() if f["expected_only"])
    return [("slowest bug: median CPU s to first violation, 1 core", cpu[slowest],
             f"{took} ({slowest}); {within}/{len(cpu)} bugs within", "<=", GOAL_SECONDS),
            ("hunts that found their bug, with an expected invariant", right / hunts_run, f"{right}/{hunts_run}",
             ">=", 1.0)]


def goals(r: dict[str, Any]) -> list[dict[str, Any]]:
    """Each goal: what was measured (a number, and how it reads), the bound, and whether it holds."""
    k, scale = r["kernel"]["ratios"], r["scaling"]
    ratios = [(f"kernel / bare heapq, {p} pending", k[f"kernel/heapq {p}"], ">=", 0.6) for p in PENDING]
    ratios += [(f"kernel / SimPy, {p} pending", k[f"kernel/simpy {p}"], ">=", 2.0) for p in PENDING]
    ratios += [("full model / bare heapq (4 pending)", r["model"]["ratio_to_heapq"], ">=", 1 / 6),
               ("full model / bare heapq (4 pending), small scenario", r["small"]["ratio_to_heapq"], ">=", 1 / 6),
               ("cost per event, 500 vs 5 clients", scale["500 clients"]["cost_vs_base"], "<=", 1.5),
               ("cost per event, 10x vs 1x run length", scale["5 clients, 10x run"]["cost_vs_base"], "<=", 1.5),
               ("fuzz seeds/s, 2 workers / 1 worker", r["parallel"]["ratios"]["seeds_per_s"], ">=", 1.8)]
    off = r["bugs_off"]["total"]
    rows = [(goal, ratio["median"], times(ratio), op, bound) for goal, ratio, op, bound in ratios]
    rows += finding_goals(r["finding"])
    within = sum(m["within_sketch"] for m in r["minimizer"].values())
    rows.append(("smallest of 3 minimized violations within the catalogue's sketch + 1", within / len(KNOWN_BUGS),
                 f"{within}/{len(KNOWN_BUGS)}", ">=", 1.0))
    rows.append(("violations with every bug off, whole suite", off["violations"],
                 f"{off['violations']} in {off['seeds']:,} seeds", "<=", 0))
    return [{"goal": goal, "measured": None if value == inf else value, "shown": shown, "target": f"{op} {bound:.3g}",
             "met": value >= bound if op == ">=" else value <= bound}
            for goal, value, shown, op, bound in rows]


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


def model_table(m: dict[str, Any], name: str) -> Table:
    ratio = m["ratio_to_heapq"]
    rows = [("seeds (violations)", f"{m['seeds']} ({m['violations']})"),
            ("events/s", rate(m["events_per_s"]["median"])),
            ("seeds/s", f"{m['seeds_per_s']['median']:.1f}"),
            ("bare heapq events/s, 4 pending", rate(m["heapq_events_per_s"]["median"])),
            ("model / heapq", f"{times(ratio)} = 1/{1 / ratio['median']:.1f}")]
    return table(f"Full model, {name} scenario, every invariant on (medians)", ("", "value"), rows)


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


def yes(flag: bool) -> str:
    return "yes" if flag else "[bold red]NO[/]"


def or_miss(x: float | None, fmt: str) -> str:
    return "miss" if x is None else format(x, fmt)


def finding_table(find: dict[str, Any], s: dict[str, Any]) -> Table:
    rows = []
    for slug, f in find.items():
        cpu = f["median_cpu_seconds"]
        rows.append((slug, f"{f['found']}/{len(f['hunts'])}", or_miss(f["median_seeds"], ".0f"), or_miss(cpu, ".3f"),
                     yes(f["expected_only"]), yes(cpu is not None and cpu <= GOAL_SECONDS)))
    t = table(f"Finding power, one core, swarm on: medians over hunts from {len(s['hunt_starts'])} starts",
              ("bug", "found", "seeds", "CPU s", "hits expected", f"<= {GOAL_SECONDS:g} s"), rows)
    t.caption = f"a hunt stops at its first violation, at {s['hunt_max_seeds']} seeds or at {s['hunt_seconds']:g} s CPU"
    return t


def minimizer_table(mini: dict[str, Any]) -> Table:
    best_of = next(iter(mini.values()))["best_of"] if mini else 0
    rows = [(slug, str(m["seed"]), f"{m['steps_before']} -> {m['steps_after']}", str(m["runs"]),
             f"{m['cpu_seconds']:.2f}", m["stop"].lower(), str(m["best_steps"]), f"{m['sketch']} + 1",
             yes(m["within_sketch"])) for slug, m in mini.items()]
    return table("Minimizer: each bug's first violation minimized (steps, runs, CPU s), and the smallest of "
                 f"its first {best_of} violations against the catalogue's sketch",
                 ("bug", "seed", "steps", "runs", "CPU s", "stop", f"best of {best_of}", "sketch", "within"), rows)


def parallel_table(par: dict[str, Any], s: dict[str, Any]) -> Table:
    columns = ("seeds_per_s", "cpu_ms_per_seed", "cores_busy")
    rows = [(name, *(f"{par[key][name]['median']:.2f}" for key in columns)) for name in WORKERS]
    rows.append(("2 workers / 1 worker", *(times(par["ratios"][key]) for key in columns)))
    t = table(f"Fuzz campaign, default scenario, swarm on (median of {s['parallel_rounds']} rounds of "
              f"{s['parallel_batch']} seeds)", ("", "seeds/s (wall)", "CPU ms/seed", "cores busy"), rows)
    t.caption = "load average {before:.2f} before, {after:.2f} after".format(**par["load_average"])
    return t


def bugs_off_table(off: dict[str, Any], s: dict[str, Any]) -> Table:
    rows = [(name if name != "clean" else f"clean ({len(KNOWN_BUGS)} bug scenarios x {s['clean_seeds']}, 2 workers)",
             f"{c['seeds']:,}", str(c["violations"]) if not c["violations"] else f"[bold red]{c['violations']}[/]")
            for name, c in off.items()]
    return table("Seeds of the correct model (every bug off), by section", ("section", "seeds", "violations"), rows)


def goals_table(goals: list[dict[str, Any]]) -> Table:
    rows = [(g["goal"], g["shown"], g["target"], yes(g["met"])) for g in goals]
    return table("Goals (ratios: median, interquartile range over rounds)", ("goal", "measured", "target", "met"), rows)


def render(r: dict[str, Any]) -> list[Table]:
    s = r["settings"]
    return [kernel_table(r["kernel"]), model_table(r["model"], "default"), model_table(r["small"], "small"),
            scaling_table(r["scaling"]),
            memory_table(r["memory"], s["memory"]), finding_table(r["finding"], s), minimizer_table(r["minimizer"]),
            parallel_table(r["parallel"], s),
            bugs_off_table(r["bugs_off"], s), goals_table(r["goals"])]


def false_alarms(r: dict[str, Any]) -> list[dict[str, Any]]:
    """Every recorded violation of the correct model (the sections that only count them are in bugs_off)."""
    return r["parallel"]["violations"] + r["clean"]["violations"]


# --- the command --------------------------------------------------------------------------------

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds and seeds: a smoke test, not figures to quote")
    parser.add_argument("--out", type=Path, default=OUT, help=f"where to write the JSON results (default: {OUT})")
    args = parser.parse_args()
    s = QUICK if args.quick else Settings()
    console = Console(width=None if sys.stdout.isatty() else 140)
    scenario = load_scenario()
    assert scenario.invariants == INVARIANT_IDS, "the default scenario should check every invariant"
    start = time.perf_counter()
    warm_up(scenario)
    r: dict[str, Any] = {"machine": machine(), "source": source(), "quick": args.quick, "settings": attrs.asdict(s),
                         "clock": "CPU time of this process (time.process_time), but wall time (time.perf_counter) "
                                  "for parallel; finding records both"}
    sections = {"kernel": partial(bench_kernel, s), "model": partial(bench_model, s, scenario),
                "small": partial(bench_model, s, load_scenario(str(SMALL))),
                "scaling": partial(bench_scaling, s, scenario), "memory": partial(bench_memory, s),
                "finding": partial(bench_finding, s), "minimizer": lambda: bench_minimizer(r["finding"]),
                "parallel": partial(bench_parallel, s, scenario),
                "clean": partial(bench_clean, s)}
    for name, bench in sections.items():
        with console.status(f"measuring {name}..."):
            r[name] = bench()
    r["bugs_off"] = bugs_off(r, s)
    r["goals"] = goals(r)
    r["wall_seconds"] = time.perf_counter() - start
    for t in render(r):
        console.print(t)
    if r["bugs_off"]["total"]["violations"]:
        console.print("[bold red]FALSE ALARM: the correct model violated an invariant[/]")
        for v in false_alarms(r):
            console.print(f"[bold red]  {v}[/]")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(r, indent=2) + "\n")
    console.print(f"{r['machine']['cpus']} cpus, {r['machine']['cpu']}, Python {r['machine']['python']}; "
                  f"{r['wall_seconds']:.0f}s; results in {args.out}")


if __name__ == "__main__":
    main()
