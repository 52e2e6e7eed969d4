"""What a seed of Prefect's limits example costs on each of its databases: ``python bench/prefect_databases.py``.

The example's ``quiet`` scenario (two clients, a limit of 1, no fault) and its ``default`` (four clients, every fault),
each run on SQLite and on PostgreSQL (the ``database`` option), seeds 1 to 5 in this process after one seed of
warm-up (Prefect's import, its migrations, the server's start: paid once per process, reported apart). CPU seconds
of this process (PostgreSQL's own backends are other processes: their time is in the wall figure only) and wall
seconds, per seed. Needs the prefect extra and a PostgreSQL server with pg_trgm.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import attrs

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from examples.prefect_limits import settings  # noqa: E402,F401  # first: Prefect's settings before Prefect

from dst.runner import run  # noqa: E402
from dst.scenario import load_scenario  # noqa: E402

SEEDS = range(1, 6)


def measure(name: str, database: str) -> tuple[float, float, float]:
    plan = load_scenario(str(ROOT / "examples" / "prefect_limits" / "scenarios" / f"{name}.toml"))
    plan = attrs.evolve(plan, model=plan.model.with_options(database=database))
    started = time.perf_counter()
    run(plan, 1000)  # warm-up: imports, migrations, the server
    warm_up = time.perf_counter() - started
    cpu, wall = time.process_time(), time.perf_counter()
    for seed in SEEDS:
        run(plan, seed)
    n = len(SEEDS)
    return warm_up, (time.process_time() - cpu) / n, (time.perf_counter() - wall) / n


def main() -> None:
    print(f"{'scenario':<10} {'database':<9} {'warm-up s':>9} {'CPU s/seed':>10} {'wall s/seed':>11}")
    for name in ("quiet", "default"):
        for database in ("sqlite", "postgres"):
            warm_up, cpu, wall = measure(name, database)
            print(f"{name:<10} {database:<9} {warm_up:>9.2f} {cpu:>10.2f} {wall:>11.2f}", flush=True)


if __name__ == "__main__":
    main()
