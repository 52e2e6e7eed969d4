"""Rich renderings of runs, violations and traces (presentation only)."""

from __future__ import annotations

from typing import Iterable

from rich.console import Console
from rich.table import Table
from rich.text import Text

from .runner import RunResult
from .scenario import Scenario
from .sim.trace import Event, format_event, format_time

_ACTION_STYLE = {"crash": "bold red", "restart": "red", "pause": "yellow", "resume": "yellow", "partition": "magenta",
                 "boot": "cyan", "lost": "dim red", "duplicated": "magenta", "cut": "dim magenta", "drop": "dim red"}


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "none"


def render_run(console: Console, scenario: Scenario, result: RunResult, wall_seconds: float) -> None:
    jobs = sum(1 for s in result.plan if s.action == "acquire")
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold")
    table.add_column()
    table.add_row("scenario", f"{scenario.name} ({scenario.source})")
    table.add_row("seed", str(result.seed))
    if result.bugs:
        table.add_row("bugs on", ", ".join(result.bugs))
    table.add_row("virtual time", format_time(result.virtual_time))
    table.add_row("events", f"{result.events:,} kernel events, {len(result.trace):,} in the trace")
    table.add_row("plan", f"{len(result.plan)} steps: {jobs} jobs, {len(result.plan) - jobs} faults")
    table.add_row("faults", _counts(result.faults))
    table.add_row("jobs ended", _counts(result.jobs))
    table.add_row("invariants", f"{', '.join(result.invariants)} ({result.checks:,} checks)")
    if result.violation is None:
        table.add_row("result", Text("no violation", style="bold green"))
    else:
        v = result.violation
        table.add_row("result", Text(f"VIOLATION of {v.invariant} at t={format_time(v.time)}", style="bold red"))
    table.add_row("digest", result.digest)
    table.add_row("wall time", f"{wall_seconds:.3f}s")
    console.print(table)
    if result.violation is not None:
        v = result.violation
        console.print()
        console.print(Text(f"{v.invariant}: {v.message}", style="bold red"))
        console.print(Text(f"detected at t={format_time(v.time)}, trace event {v.step}; the steps that led to it:",
                           style="bold"))
        render_events(console, v.last_events)


def render_events(console: Console, events: Iterable[Event]) -> None:
    for event in events:
        console.print(Text(format_event(event), style=_ACTION_STYLE.get(event[2], "")))
