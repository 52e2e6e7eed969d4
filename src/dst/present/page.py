"""``dst show``: one run (a seed, or a finding's replay) drawn as one self-contained HTML page.

The page has a lane per actor on a horizontal axis of virtual time: each lease as a bar in its holder's
lane, faults as marks and shaded spans, messages as arrows from sender to receiver, the causal slice
highlighted and the violation marked. Everything it draws is worked out here, in plain functions over
the run's trace that tests check without a browser (:func:`lease_bars`, :func:`fault_marks`,
:func:`message_arrows`, :func:`page_data`); ``page.html`` beside this module draws it.

The run's data goes into the page as JSON in a ``<script type="application/json">`` block, with every
``<``, ``>``, ``&`` and non-ASCII character written as a ``\\uXXXX`` escape, so no text from a trace
(``</script>``, ``<!--``, U+2028) can end the block or become markup; the page shows text with
``textContent`` only. The page holds no timestamp and no random id: the same run gives the same bytes.
"""

from __future__ import annotations

import json
import re
from importlib import resources
from pathlib import Path
from typing import Any, Sequence

import attrs

from ..errors import UserError
from ..causal import STEP_KINDS, causal_slice
from ..faults import FAULTS, fault_of
from ..text import format_duration
from .shapes import MESSAGE_KINDS, LeaseBar, claim_bars, fault_kind, fault_marks, lease_bars, message_arrows
from .terminal import ACTION_STYLE, lane_order
from ..runner import RunResult
from ..files import check_folder, not_regular, read_bytes, replace, where, why

# --- the page -------------------------------------------------------------------------------------

# Rich's colour names (the fault kinds' styles) as colours that read on a white page.
_COLOURS = {"red": "#c62828", "yellow": "#b07d00", "magenta": "#a2399b", "cyan": "#00838f", "green": "#2e7d32",
            "blue": "#1565c0"}
_PLAIN = "#546e7a"


def css_style(rich_style: str) -> dict[str, Any]:
    """A rich style (``"bold red"``, ``"dim magenta"``) as the page draws it: a colour, dim, bold."""
    words = rich_style.split()
    colour = next((_COLOURS[w] for w in words if w in _COLOURS), _PLAIN)
    return {"color": colour, "dim": "dim" in words, "bold": "bold" in words}


def _mark_style(actor: str, kind: str) -> tuple[str, str]:
    """How an event is drawn: its shape, and the rich style it has in the text timeline."""
    fault = fault_kind(actor, kind)
    if fault is not None:
        return "fault", fault.style
    if kind in STEP_KINDS:
        return "step", ACTION_STYLE.get(kind, "bold")
    return ("message" if kind in MESSAGE_KINDS else "other"), ACTION_STYLE.get(kind, "")


def lanes(result: RunResult) -> list[str]:
    """The actors drawn, one lane each, in the text timeline's order: the user, the clients, the server,
    the resource, the network."""
    actors = {event[1] for event in result.raw_trace} | {step.actor for step in result.plan} | {"server"}
    return sorted(actors, key=lane_order)


def slice_indexes(result: RunResult, every_step: bool) -> list[int]:
    """The trace indexes of the violation's causal slice (none without one), as ``RunResult.causal``."""
    v = result.violation
    if v is None:
        return []
    trace = result.trace if result.decided is None else result.trace[:result.decided]  # up to the outcome
    return causal_slice(trace, v.message, during=v.during, every_step=every_step)


def _rows(bars: Sequence[LeaseBar]) -> list[int]:
    """A row for each bar within its holder's lane, so that bars that overlap in time do not overlap."""
    free_from: dict[str, list[int]] = {}  # holder -> when each of its rows is free again
    rows = []
    for bar in bars:
        ends = free_from.setdefault(bar.holder, [])
        row = next((r for r, end in enumerate(ends) if end <= bar.start), len(ends))
        if row == len(ends):
            ends.append(bar.end)
        else:
            ends[row] = bar.end
        rows.append(row)
    return rows


def _amounts(result: RunResult) -> dict[tuple[str, str, int], str]:
    """What a fault's span is drawn with besides its kind: the duration its plan step gives (a clock skew's
    ``by 30s``, a pause's ``for 5s``), which its trace event may not say."""
    out = {}
    for step in result.plan:
        fault = fault_of(step)
        if fault is not None and fault.duration_arg and not fault.pinned:
            ms = step.number(fault.duration_arg)
            out[(fault.name, step.actor, step.at)] = f"{fault.duration_arg} {format_duration(ms)}"
    return out


@attrs.frozen
class Source:
    """What the page says of where the run came from."""

    title: str  # "findings/009-....toml" or "default, seed 5"
    command: str  # the command that runs it again
    verdict: str | None = None  # a finding's replay: "reproduces: ..."


def page_data(result: RunResult, source: Source, *, every_step: bool = False) -> dict[str, Any]:
    """Everything the page draws, as plain JSON data. Events are ``[time, lane, style, kind, text, in the
    slice]``; leases, faults and arrows refer to events by their index in ``events``."""
    trace = result.trace
    names = lanes(result)
    lane = {name: i for i, name in enumerate(names)}
    in_slice = set(slice_indexes(result, every_step))
    sliced = bool(in_slice)  # without a violation nothing is dimmed
    slice_actors = {trace[i][1] for i in in_slice}

    kinds: list[str] = []
    kind_index: dict[str, int] = {}
    styles: list[dict[str, Any]] = []
    style_index: dict[tuple[str, str], int] = {}
    style_of: dict[tuple[str, str], int] = {}  # (actor, kind) -> its style's index
    events = []
    for i, (time, actor, kind, text) in enumerate(trace):
        if kind not in kind_index:
            kind_index[kind] = len(kinds)
            kinds.append(kind)
        style = style_of.get((actor, kind))
        if style is None:
            shape, rich = _mark_style(actor, kind)
            if (shape, rich) not in style_index:
                style_index[(shape, rich)] = len(styles)
                styles.append({"shape": shape, **css_style(rich)})
            style = style_of[(actor, kind)] = style_index[(shape, rich)]
        events.append([time, lane[actor], style, kind_index[kind], text, int(i in in_slice or not sliced)])

    bars = sorted(lease_bars(result.raw_trace, result.virtual_time) + claim_bars(result.raw_trace, result.virtual_time),
                  key=lambda bar: bar.start)  # rows are given in start order
    leases = [{"what": bar.what, "lease": bar.lease, "holder": bar.holder, "lane": lane[bar.holder], "row": row, "token": bar.token,
               "seat": bar.seat, "limit": bar.limit, "spans": [list(s) for s in bar.spans], "ended": bar.ended,
               "renewals": list(bar.renewals), "renewed_to": list(bar.renewed_to), "events": list(bar.events),
               "slice": int(not sliced or any(i in in_slice for i in bar.events))}
              for bar, row in zip(bars, _rows(bars))]
    amounts = _amounts(result)
    faults = [{"kind": m.kind, "lane": lane[m.actor], "start": m.start, "end": m.end, "event": m.event,
               "slice": int(not sliced or m.event in in_slice), "amount": amounts.get((m.kind, m.actor, m.start))}
              for m in fault_marks(result.raw_trace, result.virtual_time, result.befell[1])]
    work = [{"lane": lane[client], "lease": under, "start": start, "end": end,
             "slice": int(not sliced or client in slice_actors)}
            for client, under, start, end in result.work if client in lane]
    arrows = [[a.sent, a.received, int(a.lost), int(not sliced or (a.sent in in_slice and a.received in in_slice))]
              for a in message_arrows(result.raw_trace)]
    v = result.violation
    return {
        "format": 1,
        "title": source.title,
        "command": source.command,
        "verdict": source.verdict,
        "scenario": result.scenario,
        "model": result.model,
        "seed": result.seed,
        "bugs": list(result.bugs),
        "outcome": result.outcome,
        "unjudged": None if result.unjudged is None else result.unjudged.why,
        "virtual_time": result.virtual_time,
        "digest": result.digest,
        "lanes": names,
        "kinds": kinds,
        "styles": styles,
        "fault_kinds": {kind.name: {"effect": kind.effect, **css_style(kind.style)} for kind in FAULTS},
        "events": events,
        "slice_size": len(in_slice),
        "leases": leases,
        "faults": faults,
        "arrows": arrows,
        "work": work,
        "violation": None if v is None else {"invariant": v.invariant, "message": v.message, "time": v.time,
                                             "during": v.during},
        "consequences": [{"invariant": c.invariant, "message": c.message, "time": c.time} for c in result.consequences],
    }


GENERATOR = '<meta name="generator" content="dst show">'  # how dst knows a page it wrote (see write_page)
_DATA = "{{DATA}}"


def embed_json(data: Any) -> str:
    """``data`` as JSON that is inert inside a ``<script>`` block: ``<``, ``>`` and ``&`` (so no
    ``</script>`` or ``<!--``) and every non-ASCII character (U+2028 among them) are ``\\uXXXX`` escapes."""
    text = json.dumps(data, ensure_ascii=True, sort_keys=True, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def render_page(data: dict[str, Any]) -> str:
    """The whole page: the template with the data in its JSON block."""
    template = resources.files("dst.present").joinpath("page.html").read_text(encoding="utf-8")
    before, after = template.split(_DATA)
    return before + embed_json(data) + after


def read_page_data(page: str) -> Any:
    """The data a page carries (what its script reads): for tests and tools."""
    match = re.search(r'<script type="application/json" id="dst-data">(.*?)</script>', page, re.S)
    if match is None:
        raise ValueError("not a page dst show wrote: no data block")
    return json.loads(match.group(1))


# --- writing it -----------------------------------------------------------------------------------

class PageError(UserError):
    """The page cannot be written where asked; ``str()`` is the one line to show (exit 2)."""

    prefix = "dst show: "


def default_name(*parts: object) -> str:
    """``dst-show-<parts>.html``, each part cut down to letters, digits and dashes."""
    words = [re.sub(r"[^a-z0-9]+", "-", str(p).lower()).strip("-") for p in parts]
    stem = "-".join(w for w in words if w)[:100].strip("-") or "run"
    return f"dst-show-{stem}.html"


def is_page(path: Path) -> bool:
    """Is ``path`` a page ``dst show`` wrote (its generator tag near the top)?"""
    try:
        return GENERATOR.encode() in read_bytes(path, 512)
    except (OSError, ValueError):
        return False


def check_output(path: Path, *, force: bool = False) -> None:
    """Raise :class:`PageError` if a page could not be written to ``path`` (see :func:`write_page`)."""
    try:
        problem = _output_problem(path, force)
    except (OSError, ValueError) as e:  # a name too long, a NUL in it
        problem = f"cannot write the page ({why(e)})"
    if problem is not None:
        raise PageError(f"{where(path)}: {problem}")


def _output_problem(path: Path, force: bool) -> str | None:
    what = not_regular(path)
    if what is not None:
        return f"is {what}: name a file for the page"
    if not force and (path.exists() or path.is_symlink()) and not is_page(path):
        return "already exists and is not a page dst show wrote: name another file with -o, or --force to replace it"
    if not path.parent.is_dir():
        return f"cannot write the page (no folder {where(path.parent)})"
    check_folder(path.parent)
    return None


def write_page(path: Path, page: str, *, force: bool = False) -> None:
    """Write ``page`` to ``path`` whole or not at all (a temporary file, then its name). An existing file is
    replaced only if it is a page dst show wrote, or with ``force``: nothing else a user made is lost."""
    check_output(path, force=force)
    data = page.encode("utf-8")
    try:
        replace(path, data, prefix=".dst-show-")
    except (OSError, ValueError) as e:
        raise PageError(f"{where(path)}: cannot write the page ({why(e)})") from None
