"""Campaign seeds per second on the local pool and on a Dask cluster, 1, 2 and 4 workers: ``python bench/cluster.py``.

About four minutes (``--rounds 1 --seeds 40`` for a smoke test; its figures are not for quoting). Needs
``pip install -e ".[bench,cluster]"``. Writes every figure, with each round's value, to ``bench/results/cluster.json``.

Contenders, each running the same seeds of the default scenario (swarm on) in a round, in rotating order,
round after round, timed on the wall clock (the work is spread over processes):

- ``pool N``: ``campaign(..., workers=N)`` as ``dst fuzz --workers N`` runs it: a pool made and shut down
  per call (with 1 worker, the seeds run in this process, as ``--workers 1`` does);
- ``cluster N``: ``connect(address)`` then ``campaign(..., executor=...)``, as ``dst fuzz --cluster`` runs
  it (connecting, and checking the workers' dst, included), on a local Dask cluster of N worker processes
  of one thread each, started once before the rounds (its start-up time is reported apart).

Every contender must report the same violations for the same seeds; the script says so or stops.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import psutil
from distributed import Client, LocalCluster

from dst.explore.cluster import connect
from dst.explore.fuzz import Outcome, campaign, seeds
from dst.scenario import Scenario, load_scenario

# bench/ is the script's directory, so its modules import by their plain names
from fuzzing import CampaignRunner, cpu_seconds
from run import machine, source
from timing import interleave, paired_ratio, summary

OUT = Path(__file__).parent / "results" / "cluster.json"


class ClusterRunner:
    """A contender running the next ``batch`` seeds of a swarm campaign on the cluster at ``address``,
    connecting and disconnecting on each call as ``dst fuzz --cluster`` does. Keeps every violation, and
    the CPU time per seed of this process and of the cluster's worker processes."""

    def __init__(self, scenario: Scenario, address: str, workers: list[psutil.Process], batch: int) -> None:
        self.scenario, self.address, self.workers, self.batch = scenario, address, workers, batch
        self.next_first = 0
        self.violations: list[Outcome] = []
        self.cpu_per_seed: list[float] = []

    def cpu(self) -> float:
        return cpu_seconds() + sum(sum(w.cpu_times()[:2]) for w in self.workers)  # user + system

    def __call__(self) -> int:
        first, self.next_first = self.next_first, self.next_first + self.batch
        cpu = self.cpu()
        executor = connect(self.address)
        done = 0
        try:
            for outcome in campaign(self.scenario, seeds(first, first + self.batch, None), use_swarm=True,
                                    workers=executor.workers, executor=executor):
                done += 1
                if outcome.invariant is not None:
                    self.violations.append(outcome)
        finally:
            executor.close()
        self.cpu_per_seed.append((self.cpu() - cpu) / done)
        return done


def start_cluster(stack: ExitStack, workers: int) -> tuple[str, list[psutil.Process], float]:
    """A local cluster of ``workers`` one-thread worker processes, closed with ``stack``: its address, its
    worker processes, and the seconds from nothing to every worker ready."""
    began = time.perf_counter()
    local = stack.enter_context(LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                             host="127.0.0.1", dashboard_address="127.0.0.1:0"))
    with Client(local, set_as_default=False) as client:
        client.wait_for_workers(workers)
        seconds = time.perf_counter() - began
        pids = client.run(os.getpid).values()
    return local.scheduler_address, [psutil.Process(pid) for pid in pids], seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--seeds", type=int, default=240, help="seeds per contender per round")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    measured = source()  # the commit as the run starts: the code it imported

    scenario = load_scenario()
    load_before = os.getloadavg()  # the machine is shared: what else ran is part of the figures
    with ExitStack() as stack:
        started: dict[int, float] = {}
        runners: dict[str, Any] = {}
        for n in args.workers:
            runners[f"pool {n}"] = CampaignRunner(scenario, n, args.seeds)
        for n in args.workers:
            address, processes, started[n] = start_cluster(stack, n)
            runners[f"cluster {n}"] = ClusterRunner(scenario, address, processes, args.seeds)
        rates = interleave(runners, args.rounds, clock=time.perf_counter)

    found = {name: [(o.seed, o.signature) for o in runner.violations] for name, runner in runners.items()}
    if len(set(map(tuple, found.values()))) != 1:
        raise SystemExit(f"contenders disagree on the violations: {found}")

    first = f"pool {args.workers[0]}"
    report = {
        "machine": machine(), "source": measured, "settings": vars(args) | {"out": str(args.out)},
        "seeds_per_second": {name: summary(r) for name, r in rates.items()},
        "cluster_over_pool": {n: paired_ratio(rates[f"cluster {n}"], rates[f"pool {n}"]) for n in args.workers},
        "speedup_over_one_worker": {name: paired_ratio(r, rates[first]) for name, r in rates.items()},
        # CPU seconds per seed, this process and the workers: the cost of the work, which other jobs on the
        # machine do not change as they change the wall clock (the schedulers of all three clusters run in
        # this process, so the cluster figures carry their idle heartbeats too)
        "cpu_seconds_per_seed": {name: summary(runner.cpu_per_seed) for name, runner in runners.items()},
        "cluster_start_seconds": started,
        "load_average": {"before": load_before, "after": os.getloadavg()},  # 1, 5 and 15 minutes
        "violations_agree": True, "violations": len(found[first]),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")

    print(f"{report['machine']['cpu']}, {report['machine']['cpus']} CPUs; {args.rounds} rounds of {args.seeds} seeds; "
          f"medians (IQR)")
    print(f"{'':<11} {'seeds/s':>8} {'CPU ms/seed':>12} {'/ pool 1':>19} {'cluster / pool':>21}")
    for name, r in rates.items():
        kind, n = name.split()
        speedup = report["speedup_over_one_worker"][name]
        cpu_ms = 1000 * report["cpu_seconds_per_seed"][name]["median"]
        line = f"{name:<11} {summary(r)['median']:8.1f} {cpu_ms:12.1f} {_ratio(speedup):>19}"
        if kind == "cluster":
            line += f" {_ratio(report['cluster_over_pool'][int(n)]):>21}"
        print(line)
    print("cluster start (s): " + ", ".join(f"{n} workers {s:.2f}" for n, s in started.items()))
    print(f"load average before {load_before[0]:.2f}, after {report['load_average']['after'][0]:.2f} (1 minute)")
    print(f"all contenders found the same {len(found[first])} violations; wrote {args.out}")


def _ratio(r: dict[str, Any]) -> str:
    return f"{r['median']:.2f}x ({r['q1']:.2f}-{r['q3']:.2f})"


if __name__ == "__main__":
    main()
