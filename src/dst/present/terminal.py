"""Rich renderings of runs, violations and traces (presentation only).

Text from outside dst (a scenario's name, a path, a model's messages and trace details, a command) is
printed through :func:`plain`: never read as markup, its control characters shown as escapes.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any, Iterable, Sequence

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..causal import STEP_KINDS
from ..faults import FAULT_ACTIONS, FAULTS
from ..models import DEFAULT_IMPL
from ..runner import RunResult
from ..scenario import Scenario
from ..sim.trace import Event, format_event, format_time
from ..text import one_line

if TYPE_CHECKING:
    from ..explore.report import Report

# How an event kind is styled in a timeline: fault kinds by their registry colour.
ACTION_STYLE = {"resume": "yellow", "boot": "cyan", "lost": "dim red", "duplicated": "magenta", "cut": "dim magenta",
                "drop": "dim red", **{kind.action: kind.style for kind in FAULTS if kind.target == "client"},
                **{kind.drawn_as: kind.style for kind in FAULTS if kind.pinned}}


def plain(*parts: str | tuple[str, str]) -> Text:
    """Parts, each a string or (string, style), as one rich Text: never markup (``"[/]"`` is printed as
    written, where rich would fail on it), control characters escaped (``one_line``)."""
    text = Text()
    for part in parts:
        chunk, style = (part, "") if isinstance(part, str) else part
        text.append(one_line(chunk), style=style)
    return text


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "none"


def _plan_summary(result: RunResult) -> str:
    kinds = Counter("fault" if s.action in FAULT_ACTIONS else s.action for s in result.plan)
    words = {"acquire": "jobs", "fault": "faults", "serve": "serve loops", "submit": "submissions", "cancel": "cancels"}
    return f"{len(result.plan)} steps: " + ", ".join(f"{kinds[k]} {words[k]}" for k in words if kinds[k])


def render_run(console: Console, scenario: Scenario, result: RunResult, wall_seconds: float) -> None:
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold")
    table.add_column()
    table.add_row("scenario", plain(f"{scenario.name} ({scenario.source})"))
    if result.model != DEFAULT_IMPL:
        table.add_row("model", plain(result.model))
    table.add_row("seed", str(result.seed))
    if result.bugs:
        table.add_row("bugs on", plain(", ".join(result.bugs)))
    table.add_row("virtual time", format_time(result.virtual_time))
    table.add_row("events", f"{result.events:,} kernel events, {len(result.trace):,} in the trace")
    table.add_row("plan", _plan_summary(result))
    table.add_row("faults", plain(_counts(result.faults)))
    table.add_row("jobs ended", plain(_counts(result.jobs)))
    table.add_row("invariants", plain(f"{', '.join(result.invariants)} ({result.checks:,} checks)"))
    mine = result.assertion_counts()
    if mine:
        from ..invariants.user import never_met, summary

        table.add_row("assertions", plain(summary(mine)))
        for line in never_met(mine):
            table.add_row("never met", plain((line, "yellow")))
    if result.unjudged is not None:
        table.add_row("result", plain((f"no violation, but {result.unjudged.kind}: {result.unjudged.why}",
                                       "bold yellow")))
    elif result.violation is None:
        table.add_row("result", Text("no violation", style="bold green"))
    else:
        table.add_row("result", plain((result.headline, "bold red")))
    table.add_row("digest", result.digest)
    table.add_row("wall time", f"{wall_seconds:.3f}s")
    console.print(table)
    if result.violation is not None:
        v = result.violation
        console.print()
        console.print(plain((f"{v.invariant}: {v.message}", "bold red")))
        render_consequences(console, result)
        led = result.causal()
        console.print(Text(f"detected at t={format_time(v.time)}, trace event {v.step}; the {len(led):,} events "
                           f"that led to it (of {len(result.decided_trace):,}):", style="bold"))
        render_events(console, led)


def render_consequences(console: Console, result: RunResult) -> None:
    """What else the run violated after its first violation, each invariant the first time: the cause's
    consequences (see docs/findings.md)."""
    if result.consequences:
        console.print(Text("its consequences (what else the run violated, each the first time):", style="bold"))
        for c in result.consequences:
            console.print(plain("  ", (c.invariant, "red"), f" at t={format_time(c.time)}: {c.message}"))


def render_events(console: Console, events: Iterable[Event]) -> None:
    for event in events:
        console.print(plain((format_event(event), ACTION_STYLE.get(event[2], ""))))


PROGRESS_LINE_SECONDS = 10.0  # off a terminal: how often a progress line is written (presentation only)


class FuzzProgress:
    """Progress on stderr: seeds done, seeds/s, violations so far, time left. On a terminal, a live line
    (none with --json); elsewhere, such as a CI log, a plain line every ``line_seconds`` of ``elapsed``."""

    def __init__(self, console: Console, *, total: int | None, budget: float | None, quiet: bool,
                 line_seconds: float = PROGRESS_LINE_SECONDS) -> None:
        from rich.progress import BarColumn, Progress, TextColumn

        self._progress = Progress(TextColumn("[bold]fuzz[/]"), BarColumn(), TextColumn("{task.description}"),
                                  console=console, transient=True, disable=quiet or not console.is_terminal)
        self._task = self._progress.add_task("", total=total)
        self._budget = budget
        self._total = total
        self._shown = 0.0
        # Off a terminal the lines are written with --json too: the JSON goes to stdout and these to stderr, so
        # they never mix in a redirected file, and a CI job that saves the JSON still shows in its log that the
        # campaign is alive (some CI systems end a job that has been silent for ten minutes). On a terminal,
        # --json keeps the screen to the JSON, as both streams share it.
        self._console = console
        self._lines = not console.is_terminal
        self._line_seconds = line_seconds
        self._next_line = line_seconds

    def __enter__(self) -> "FuzzProgress":
        self._progress.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._progress.__exit__(*exc)  # type: ignore[arg-type]

    def status(self, tally: Any, elapsed: float) -> str:
        """``1,234 seeds, 85/s, 2 violations, 60s left``: left is the budget's, or the seeds' at this speed."""
        rate = tally.seeds_run / elapsed if elapsed > 0 else 0.0
        lefts = [max(0.0, self._budget - elapsed)] if self._budget else []
        if self._total is not None and rate > 0:
            lefts.append(max(0, self._total - tally.seeds_run) / rate)
        left = f", {min(lefts):.0f}s left" if lefts else ""
        plural = "" if tally.violations == 1 else "s"
        errors = f", {tally.model_errors:,} model error{'' if tally.model_errors == 1 else 's'}" if tally.model_errors else ""
        branches = f" (+{tally.branches_run:,} branches)" if tally.branches_run else ""
        return (f"{tally.seeds_run:,} seeds{branches}, {rate:.0f}/s, {tally.violations:,} violation{plural}{errors}"
                f"{left}")

    def update(self, tally: Any, elapsed: float) -> None:
        """Called after each seed with the seconds since the campaign began (from the caller's clock)."""
        if self._lines:
            if elapsed >= self._next_line:  # at most one line per interval, however long a seed took
                self._next_line = (elapsed // self._line_seconds + 1) * self._line_seconds
                self._console.print(plain(f"dst fuzz: {self.status(tally, elapsed)}"))
            return
        if elapsed - self._shown < 0.1 and tally.violations == 0 and tally.model_errors == 0:
            return  # redraw at most ten times a second
        self._shown = elapsed
        self._progress.update(self._task, completed=tally.seeds_run, description=self.status(tally, elapsed))


def render_fuzz(console: Console, report: Report) -> None:
    seeds = report["seeds"]
    span = f"{seeds['first']}..{seeds['last_run']}" if seeds["last_run"] is not None else "none"
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    arms = report.get("coverage", {}).get("scenarios", {})
    if len(arms) > 2:  # the default campaign: its scenarios by the seeds coverage gave them
        most = sorted(arms.items(), key=lambda kv: (-kv[1], kv[0]))
        grid.add_row("scenarios", plain(f"{len(arms)}, steered by coverage; most seeds: "
                                        + ", ".join(f"{name} {n:,}" for name, n in most[:4])))
    else:
        grid.add_row("scenario", plain(f"{report['scenario']} ({report['source']})"))
    if report["model"] != DEFAULT_IMPL:
        grid.add_row("model", plain(report["model"]))
    if report["bugs"]:
        grid.add_row("bugs on", plain(", ".join(report["bugs"])))
    missing = seeds.get("shards_missing")  # a merge of some of the shards (dst merge)
    grid.add_row("seeds", f"{report['seeds_run']:,} run ({span}{', shard ' + seeds['shard'] if seeds['shard'] else ''})"
                 f"{', swarm' if report['swarm'] else ''}"
                 + (f"; shard(s) {', '.join(map(str, missing))} missing" if missing else ""))
    if report.get("branches_run", 0):
        grid.add_row("branches", f"{report.get('branches_run', 0):,} run off the seeds' risky moments, each the seed's "
                                 f"run to there and new draws from there on")
    grid.add_row("speed", f"{report['seeds_per_second']} seeds/s, {report['events']:,} events in {report['wall_seconds']}s")
    errors = report.get("model_errors", 0)
    style = "bold red" if report["violations"] or errors else "bold green"
    grid.add_row("result", Text(f"{report['violations']} violation(s)"
                                + (f" and {errors} model error(s)" if errors else "")
                                + f" in {len(report['signatures'])} signature(s)"
                                + (" (interrupted)" if report["interrupted"] else ""), style=style))
    for group in report["unjudged"]:
        grid.add_row(plain(group["kind"]), plain((f"{group['count']} seed(s) not judged in full; first, seed "
                                                  f"{group['first_seed']}: {group['why']} ({group['reproduce']})",
                                                  "yellow")))
    if "coverage" in report:
        from ..explore.coverage import violated

        _coverage_rows(grid, report["coverage"], violated(report))
    console.print(grid)
    if not report["signatures"]:
        return
    table = Table(show_lines=True)
    table.add_column("invariant", style="bold red")
    table.add_column("seeds", justify="right")
    table.add_column("first violation")
    table.add_column("reproduce")
    for sig in report["signatures"]:
        first = plain(f"seed {sig['first_seed']}: {sig['message']}")
        then = ", ".join(f"{c['invariant']} at t={format_time(c['time_ms'])}" for c in sig.get("consequences", ()))
        if then:
            first.append("\n")
            first.append_text(plain((f"its consequences: {then}", "dim")))
        table.add_row(plain(sig["invariant"]), f"{sig['count']}", first, plain((sig["reproduce"], "cyan")))
    console.print(table)
    for f in report["findings"]:
        verb = "wrote" if f["new"] else "already known:"
        console.print(plain(f"{verb} ", (f["path"], "cyan"), f" ({f['steps_before']} steps minimized to "
                            f"{f['steps_after']} in {f['minimizer_runs']} runs, {f['minimizer_seconds']}s)"))


def _coverage_rows(grid: Table, coverage: dict[str, Any], broken: set[str]) -> None:
    """What the campaign exercised, and, in yellow, what it never reached (``broken``: the invariants it
    violated, which met their cases whatever else says so)."""
    from ..explore.coverage import never_enabled, never_reached

    grid.add_row("faults fired", plain(_counts(coverage.get("faults", {}))))
    off = never_enabled(coverage)
    if off:
        grid.add_row("never enabled", plain((f"{', '.join(off)}: no seed turned them on, so nothing they cause was "
                                             f"looked for (give them a rate or a chance in a scenario)", "yellow")))
    reached = [f"{name} in {c['runs']:,} run(s)" for name, c in coverage.get("situations", {}).items() if c["runs"]]
    grid.add_row("reached", plain(", ".join(reached) or "no risky situation"))
    for line in never_reached(coverage, broken):
        grid.add_row("never reached", plain((line, "yellow")))
    if coverage.get("assertions"):
        from ..invariants.user import summary

        grid.add_row("assertions", plain(summary(coverage["assertions"])))
    cases = coverage.get("invariants", {})
    met = [f"{name} {n:,}" for name, n in cases.items() if n]
    grid.add_row("cases met", plain(", ".join(met) or "none"))
    unmet = [name for name, n in cases.items() if not n and name not in broken]
    if unmet:
        grid.add_row("never tested", plain((f"{', '.join(unmet)}: checked, but never met a case it exists for",
                                            "yellow")))


def render_bugs(console: Console, model: str, bugs: Iterable[Any]) -> None:
    """Each bug: its slug, what it breaks (the invariant it breaks first leading), what is wrong, its story."""
    listed = list(bugs)
    console.print(plain((f"{len(listed)} bugs {model} can switch on (--bug SLUG, or bugs = [...] in a scenario):",
                         "bold")))
    for bug in listed:
        console.print()
        console.print(plain((bug.slug, "bold cyan")), plain(f"breaks {', '.join(bug.breaks)}; "
                                                            f"its story takes {bug.sketch_steps} steps"))
        console.print(plain(f"  {bug.summary}"))
        if bug.story:
            console.print(plain((f"  {bug.story}", "dim")))


def render_selftest(console: Console, found: list[Any], clean: list[Any],
                    recorded: dict[str, dict[str, Any]] | None = None, model: str = DEFAULT_IMPL) -> None:
    whose = "every catalogue bug" if model == DEFAULT_IMPL else f"every bug of {model}"
    table = Table(title=plain(f"{whose}, found by fuzzing its scenario"))
    columns = [("slug", "left"), ("expected", "left"), ("hit", "left"), ("seeds", "right"), ("first seed", "right"),
               ("seconds", "right")] + ([("minimized", "right"), ("finding", "left")] if recorded else [])
    for name, justify in columns:
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for row in found:
        hit = plain((row.hit or "missed", "green" if row.ok else "bold red"))
        cells: list[str | Text] = [plain(row.slug), plain(" / ".join(row.expected)), hit, str(row.seeds),
                                   str(row.first_seed or "-"), f"{row.seconds:.2f}"]
        if recorded:
            r = recorded.get(row.slug)
            cells += [f"{r['steps_before']} -> {r['steps_after']}" if r else "-", plain(r["path"]) if r else "-"]
        table.add_row(*cells)
    console.print(table)
    seeds = sum(r.seeds for r in clean)
    bad = [v for r in clean for v in r.violations]
    if bad:
        console.print(Text(f"the correct model was accused {len(bad)} time(s) in {seeds} seeds:", style="bold red"))
        for r in clean:
            for v in r.violations:
                console.print(plain(f"  {r.slug} seed {v.seed}: {v.invariant}: {v.message}"))
    else:
        console.print(Text(f"with the bugs off: no violation in {seeds} seeds over {len(clean)} scenarios",
                           style="bold green"))
    missed = [r.slug for r in found if not r.ok]
    if missed:
        console.print(plain((f"missed or wrong invariant: {', '.join(missed)}", "bold red")))




def lane_order(actor: str) -> tuple[int, int, str]:
    """Where an actor's lane goes in a timeline (text or page): the user, clients by number, then the rest."""
    if actor == "user":
        return (0, 0, actor)
    if actor.startswith("c") and actor[1:].isdigit():
        return (1, int(actor[1:]), actor)
    return (2, ("server", "resource", "net").index(actor) if actor in ("server", "resource", "net") else 9, actor)


def render_timeline(console: Console, result: RunResult, events: Sequence[Event] | None = None) -> None:
    """The run, one line per event: a lane per actor marks who acted; plan steps stand out; the violation
    ends it. ``events``: only these (formatted) events of the run, with a line saying how many of all."""
    shown = result.trace if events is None else events
    actors = sorted({e[1] for e in shown}, key=lane_order)
    lane = {a: i for i, a in enumerate(actors)}
    header = " ".join(f"{a:^3}"[:3] if len(a) <= 3 else a[:3] for a in actors)
    console.print(plain((f"{'time':>10}  {header}  event", "bold")))
    for event in shown:  # formatted: details as text
        time, actor, kind, detail = event
        marks = ["·"] * len(actors)
        marks[lane[actor]] = "▶" if kind in STEP_KINDS else "●"
        lanes = " ".join(f" {m} " for m in marks)
        style = ACTION_STYLE.get(kind, "bold" if kind in STEP_KINDS else "")
        console.print(plain((f"{format_time(time):>10}  {lanes}  {actor} {kind} {detail}".rstrip(), style)))
    v = result.violation
    if v is not None:
        console.print(plain((f"{format_time(v.time):>10}  {'':{max(0, len(actors) * 4 - 1)}}  ✗ {v.invariant}: {v.message}",
                             "bold red reverse")))
    if events is not None and len(events) < len(result.trace):
        console.print(Text(f"{len(events):,} of the run's {len(result.trace):,} events", style="dim"))
