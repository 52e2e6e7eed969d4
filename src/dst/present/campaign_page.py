"""A campaign's report as one HTML page: what it found and what it exercised (``dst show report.json``).

The report is what ``dst fuzz --json`` (or ``dst merge``) printed, and the page is drawn from it alone: it
imports nothing the report names (a file someone sent runs no code). The page draws its coverage as
bars: the faults that fired by kind, the risky situations and the share of runs that reached each,
and the cases each invariant met; what was never reached stands out, with the invariants it left
untested, above the violations found and the commands that reproduce them. Static HTML and CSS,
no script: every text from the report goes through ``html.escape``.
"""

from __future__ import annotations

from html import escape

from ..explore.coverage import never_reached, violated
from ..explore.report import Report, Signature
from ..sim.trace import format_time
from .page import GENERATOR

_STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 24px; color: #263238; max-width: 1100px; }
h1 { font-size: 20px; margin: 0 0 4px; } h2 { font-size: 16px; margin: 28px 0 8px; }
.meta { color: #546e7a; } .never { background: #fff8e1; border-left: 4px solid #b07d00; padding: 6px 10px; margin: 4px 0; }
table { border-collapse: collapse; width: 100%; } td, th { padding: 3px 8px; text-align: left; vertical-align: top; }
th { color: #546e7a; font-weight: 600; border-bottom: 1px solid #cfd8dc; }
td.n { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; width: 7em; }
.bar { height: 12px; background: #00838f; border-radius: 2px; min-width: 1px; }
tr.zero td { color: #b07d00; } tr.zero .bar { background: none; }
.violation { color: #c62828; } code { font: 12px ui-monospace, monospace; background: #eceff1; padding: 1px 4px; }
"""


def campaign_page(report: Report) -> str:
    """The page of a campaign report (checked: :func:`dst.explore.report.read`)."""
    coverage = report.get("coverage", {})
    runs = max(1, report["seeds_run"])
    parts = [
        "<!doctype html>", "<html lang=\"en\"><head><meta charset=\"utf-8\">", GENERATOR,
        f"<title>dst campaign: {escape(report['scenario'])}</title><style>{_STYLE}</style></head><body>",
        f"<h1>dst campaign: {escape(report['scenario'])}</h1>",
        f"<div class=\"meta\" data-role=\"summary\">{_summary(report)}</div>",
    ]
    never = never_reached(coverage, violated(report))
    parts.append("<h2>Never reached</h2>")
    parts += [f"<div class=\"never\" data-role=\"never\">{escape(line)}</div>" for line in never] or \
        ["<p data-role=\"never-none\">Every risky situation came up at least once.</p>"]
    parts.append(_bars("Risky situations: share of runs that reached each", "situation",
                       [(name, c.get("runs", 0), f"{c.get('runs', 0):,} runs, {c.get('reached', 0):,} times",
                         c.get("statement", "")) for name, c in coverage.get("situations", {}).items()], runs))
    cases = coverage.get("invariants", {})
    parts.append(_bars("Invariants: cases met (situations they exist for that came up)", "invariant",
                       [(name, n, f"{n:,}", "") for name, n in cases.items()], max([1, *cases.values()])))
    faults = coverage.get("faults", {})
    parts.append(_bars("Faults fired, by kind", "fault", [(name, n, f"{n:,}", "") for name, n in faults.items()],
                       max([1, *faults.values()])))
    parts.append(_violations(report))
    parts.append("</body></html>\n")
    return "\n".join(parts)


def _summary(report: Report) -> str:
    seeds = report["seeds"]
    shard = f", shard {seeds['shard']}" if seeds["shard"] else ""
    found = report["violations"]
    verdict = (f"<span class=\"violation\">{found:,} violation(s) in {len(report['signatures'])} "
               f"signature(s)</span>" if found else "no violation")
    return escape(f"model {report['model']}; {report['seeds_run']:,} seeds run "
                  f"(from {seeds['first']}{shard}){', swarm' if report['swarm'] else ''}; "
                  f"{report['events']:,} events; ") + verdict


def _bars(title: str, role: str, rows: list[tuple[str, int, str, str]], scale: int) -> str:
    out = [f"<h2>{escape(title)}</h2>", "<table>", f"<tr><th>{escape(role)}</th><th></th><th>count</th></tr>"]
    for name, value, shown, statement in rows:
        width = 100.0 * value / scale if scale else 0.0
        out.append(f"<tr class=\"{'zero' if not value else ''}\" data-role=\"{escape(role)}\" "
                   f"data-name=\"{escape(name)}\" data-count=\"{value}\"><td><code>{escape(name)}</code>"
                   f"{'<br>' + escape(statement) if statement else ''}</td>"
                   f"<td style=\"width:50%\"><div class=\"bar\" style=\"width:{width:.1f}%\"></div></td>"
                   f"<td class=\"n\">{escape(shown)}</td></tr>")
    out.append("</table>")
    return "\n".join(out)


def _consequences(sig: Signature) -> str:
    """What else the signature's first seed violated, each the first time (its cause's consequences)."""
    then = ", ".join(f"{c['invariant']} at t={format_time(c['time_ms'])}" for c in sig.get("consequences", ()))
    return f"<br><small>its consequences: {escape(then)}</small>" if then else ""


def _violations(report: Report) -> str:
    signatures = report["signatures"]
    if not signatures:
        return "<h2>Violations</h2><p>None.</p>"
    out = ["<h2>Violations</h2>", "<table>", "<tr><th>invariant</th><th>seeds</th><th>first violation</th>"
           "<th>reproduce</th></tr>"]
    for sig in signatures:
        out.append(f"<tr data-role=\"signature\"><td class=\"violation\">{escape(sig['invariant'])}</td>"
                   f"<td class=\"n\">{sig['count']:,}</td>"
                   f"<td>seed {sig['first_seed']}: {escape(str(sig['message']))}{_consequences(sig)}</td>"
                   f"<td><code>{escape(sig['reproduce'])}</code></td></tr>")
    out.append("</table>")
    return "\n".join(out)
