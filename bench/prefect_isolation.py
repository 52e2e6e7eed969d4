"""What two isolation levels do to Prefect's limits on PostgreSQL: ``python bench/prefect_isolation.py [SEEDS]``.

Seeds 1 to SEEDS (default 30) of ``examples/prefect_limits/scenarios/postgres-contention.toml`` (READ COMMITTED,
Prefect's) and of ``postgres-contention-repeatable-read.toml`` (REPEATABLE READ, the engine as before Prefect
3.8), swarm, as ``dst fuzz`` runs them; per level, from each run's trace: the violations, the lock waits (and the
seeds with one), the waits the lock ended, the serialization failures (40001) and the 423s clients read. Needs the
prefect extra and a PostgreSQL server with pg_trgm.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from examples.prefect_limits import settings  # noqa: E402,F401  # first: Prefect's settings before Prefect

from dst.runner import run  # noqa: E402
from dst.runner.swarm import swarm  # noqa: E402
from dst.scenario import load_scenario  # noqa: E402


def tally(name: str, seeds: range) -> dict[str, int]:
    plan = load_scenario(str(ROOT / "examples" / "prefect_limits" / "scenarios" / f"{name}.toml"))
    counts = dict.fromkeys(("violations", "waits", "seeds waiting", "lock ended", "40001", "seeds 40001", "423s"), 0)
    for seed in seeds:
        outcome = run(swarm(plan, seed), seed)
        db = [str(e[3]) for e in outcome.trace if e[1] == "prefect-db"]
        waits = sum("waits for a lock" in t for t in db)
        failed = sum("40001" in t for t in db)
        counts["violations"] += outcome.violation is not None
        counts["waits"] += waits
        counts["seeds waiting"] += waits > 0
        counts["lock ended"] += sum("got its lock" in t for t in db)
        counts["40001"] += failed
        counts["seeds 40001"] += failed > 0
        counts["423s"] += sum(e[2] == "recv" and str(e[3]).startswith("423") for e in outcome.trace)
    return counts


def main() -> None:
    seeds = range(1, int(sys.argv[1]) + 1 if len(sys.argv) > 1 else 31)
    print(f"seeds {seeds.start} to {seeds.stop - 1}, swarm")
    for name in ("postgres-contention", "postgres-contention-repeatable-read"):
        print(name, tally(name, seeds), flush=True)


if __name__ == "__main__":
    main()
