"""A finding's file: ``findings/NNN-what-happened.toml``, written and read.

A finding is a scenario file with a ``[finding]`` table: the complete scenario (every key
written out), its minimized plan as a readable ``steps`` list a person can edit, and what
the run is expected to do (the violated invariant, its message, its consequences, the trace
digest). So ``dst run --scenario findings/007-....toml --seed N`` runs it too.
"""

from __future__ import annotations

import hashlib
import re
import shlex
from pathlib import Path
from typing import Any, Iterable

import attrs

from ..version import __version__
from ..errors import BUILD_RAISED, MODEL_ERROR, UserError
from ..faults import FAULTS, fault_of
from ..files import FileError, from_here, read_toml, where
from ..invariants import BY_ID
from ..invariants.user import is_user, title as user_title
from ..models import DEFAULT_IMPL
from ..scenario import Scenario, ScenarioError, scenario_from_doc, scenario_to_doc
from ..sim.trace import Event
from ..sut import format_time
from ..text import parse_duration, shorten, toml_key, toml_string, toml_value

FORMAT = 1


class FindingError(UserError):
    """A finding file is malformed; ``str()`` is the one line to show the user (exit 2)."""


@attrs.frozen
class Consequence:
    """Another invariant the finding's run violated after its first violation (each the first time): what
    followed from the cause. A finding records them; a replay compares only the cause."""

    invariant: str
    time: int
    message: str


@attrs.frozen
class Finding:
    scenario: Scenario  # with its steps
    seed: int
    invariant: str
    message: str
    time: int
    signature: str
    digest: str
    fingerprints: tuple[str, ...]
    title: str
    origin: dict[str, Any] = attrs.field(factory=dict)
    minimizer: dict[str, Any] = attrs.field(factory=dict)
    dst_version: str = __version__
    path: Path | None = None
    consequences: tuple[Consequence, ...] | None = None  # None: written before consequences were recorded

    @property
    def known_bug(self) -> bool:
        """It documents a bug switched on in a model variant (rather than one in the model as it is)."""
        return bool(self.scenario.bugs)


def fingerprints(trace: Iterable[Event]) -> tuple[str, ...]:
    """A short hash per trace event: enough to name the first event where a replay differs."""
    return tuple(hashlib.blake2b(repr(e).encode(), digest_size=4).hexdigest() for e in trace)


def signature(impl: str, bugs: Iterable[str], invariant: str, shape: str) -> str:
    """What violations of one kind have in common: the model, its bugs on, the invariant and the message's shape."""
    who = "+".join(sorted(bugs)) or "correct model"
    return f"[{who if impl == DEFAULT_IMPL else f'{impl} {who}'}] {invariant}: {shape}"


# --- titles -------------------------------------------------------------------------------------------

def title(finding_invariant: str, message: str, scenario: Scenario, trace: Iterable[Event]) -> str:
    """A readable summary of what happened: what broke, and the fault that set it up."""
    unit = BY_ID.get(finding_invariant)
    what = unit.titled(message) if unit is not None else (
        _model_error_title(message) if finding_invariant == MODEL_ERROR else
        user_title(finding_invariant) if is_user(finding_invariant) else finding_invariant)
    faults = [kind for kind in map(fault_of, scenario.steps or ()) if kind is not None]
    seen = {e[2] for e in trace if e[1] in ("net", "server")}  # what the draws did, if the steps do not say
    faults += [kind for kind in FAULTS if kind.pinned and kind.drawn_as in seen]
    if faults:
        return f"{what}-{min(faults, key=lambda kind: kind.title_rank).title}"
    return what


def _model_error_title(message: str) -> str:
    """A model error's words: ``c2: KeyError: 'boom' at my_limiter.py:32 in Limiter.renew`` ->
    ``the-model-raised-keyerror-in-limiter-renew``; a refusal (``... threading.Thread.start() called at ...``) ->
    ``the-model-called-threading-thread-start``; a build that raised -> ``the-model-s-build-raised-typeerror``."""
    said = message.split(": ", 1)[-1]
    called = re.match(r"([\w.]+)(\(\))? called at ", said)
    if called:
        words = f"the model called {called.group(1)}"
    elif stalled := re.match(r"Stalled: the code of ([\w.<>]+) ", said):
        words = f"the model stalled in {stalled.group(1)}"
    elif said.startswith(BUILD_RAISED):
        words = BUILD_RAISED + re.split(r"[: ]", said[len(BUILD_RAISED):], maxsplit=1)[0]
    else:
        where = re.search(r" in ([\w.<>]+)$", said)
        words = f"the model raised {re.split(r'[: ]', said, maxsplit=1)[0]}" + (f" in {where.group(1)}" if where else "")
    return re.sub(r"[^a-z0-9]+", "-", words.lower()).strip("-")[:80]


# --- writing ------------------------------------------------------------------------------------------

def _lines(prints: tuple[str, ...], per_line: int = 10) -> str:
    rows = [", ".join(toml_string(p) for p in prints[i:i + per_line]) for i in range(0, len(prints), per_line)]
    return "[\n" + "".join(f"  {row},\n" for row in rows) + "]"


def render(finding: Finding, number: int, directory: Path = Path("findings")) -> str:
    """The finding as TOML: a header, the scenario's top-level keys and steps, [finding], the sections. Its replay
    command names the file in ``directory`` as a command typed where it is written names it."""
    doc = scenario_to_doc(finding.scenario)
    replay = f"dst replay {shlex.quote(from_here(directory / f'{number:03d}-{finding.title}.toml'))}"
    then = ", ".join(f"{c.invariant} at t={format_time(c.time)}" for c in finding.consequences or ())
    out = [
        f"# dst finding {number:03d}: {finding.title}",
        f"# {finding.invariant} at t={format_time(finding.time)}: {finding.message}",
        *([f"# its consequences: {then}"] if then else []),
        f"# replay:  {replay}",
        "# The steps below are the minimized run; edit them freely (a step's id keys its random draws).",
        "",
    ]
    for k in ("name", "description", "bugs", "invariants"):
        out.append(f"{k} = {toml_value(doc.pop(k))}")
    out.append("steps = [")
    out += [f"  {toml_value(step)}," for step in doc.pop("steps")]
    out.append("]")
    meta = {
        "format": FORMAT, "dst_version": finding.dst_version, "seed": finding.seed, "invariant": finding.invariant,
        "message": finding.message, "time": format_time(finding.time), "signature": finding.signature,
        "trace_digest": finding.digest, "replay": replay, "origin": finding.origin, "minimizer": finding.minimizer,
    }
    out += ["", "[finding]"] + [f"{k} = {toml_value(v)}" for k, v in meta.items()]
    rows = [{"invariant": c.invariant, "time": format_time(c.time), "message": c.message}
            for c in finding.consequences or ()]
    out.append("consequences = " + ("[\n" + "".join(f"  {toml_value(row)},\n" for row in rows) + "]" if rows else "[]"))
    out.append(f"fingerprints = {_lines(finding.fingerprints)}")
    for section, values in doc.items():
        out += ["", f"[{section}]"] + [f"{toml_key(k)} = {toml_value(v)}" for k, v in values.items()]
    return "\n".join(out) + "\n"


# --- reading ------------------------------------------------------------------------------------------

def read(path: str | Path, *, model: str | None = None) -> Finding:
    """Read and check a finding file; a malformed one raises :class:`FindingError` (one line). ``model``
    names a model to run it on instead of the one it recorded (``dst replay --model``)."""
    path = Path(path)
    at = where(path)
    try:
        doc = read_toml(path)
    except FileError as e:
        raise FindingError(str(e)) from None
    meta = doc.pop("finding", None)
    if not isinstance(meta, dict):
        raise FindingError(f"{at}: finding: expected a [finding] table (is this a finding file?)")

    def need(key: str, kind: type, what: str) -> Any:
        value = meta.get(key)
        if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
            raise FindingError(f"{at}: finding.{key}: expected {what}, got {shorten(value)}")
        return value

    if meta.get("format") != FORMAT or isinstance(meta.get("format"), bool):  # true == 1 in Python, not in TOML
        raise FindingError(f"{at}: finding.format: expected {FORMAT}, got {shorten(meta.get('format'))}")
    seed = need("seed", int, "the integer seed")
    if seed < 0:
        raise FindingError(f"{at}: finding.seed: expected a non-negative integer, got {shorten(seed)}")
    prints = meta.get("fingerprints", [])
    if not isinstance(prints, list) or not all(isinstance(p, str) for p in prints):
        raise FindingError(f"{at}: finding.fingerprints: expected a list of strings")
    try:
        scenario = scenario_from_doc(doc, str(path), model)
    except ScenarioError as e:
        raise FindingError(str(e)) from None
    recorded = need("time", str, "a time such as '44.637s'")  # a FindingError of its own, not a bad duration
    try:
        time = parse_duration(recorded)
    except ValueError as e:
        raise FindingError(f"{at}: finding.time: {e}") from None
    invariant = need("invariant", str, "an invariant id")
    if not scenario.steps and invariant != MODEL_ERROR:  # a model whose build raises needs no step
        raise FindingError(f"{at}: steps: expected the finding's steps (at least one)")
    if invariant not in scenario.invariants and invariant != MODEL_ERROR and not is_user(invariant):
        raise FindingError(f"{at}: finding.invariant: expected one of the scenario's invariants, "
                           f"{MODEL_ERROR!r} or a user's assertion ('always:<its id>'), "
                           f"got {shorten(invariant)}")
    origin, minimizer = meta.get("origin", {}), meta.get("minimizer", {})
    consequences = _consequences(meta["consequences"], scenario, at) if "consequences" in meta else None
    return Finding(
        scenario=scenario, seed=seed, invariant=invariant, message=need("message", str, "the violation's message"),
        time=time, signature=need("signature", str, "a signature string"),
        digest=need("trace_digest", str, "the trace digest"), fingerprints=tuple(prints),
        title=path.stem.split("-", 1)[-1], origin=origin if isinstance(origin, dict) else {},
        minimizer=minimizer if isinstance(minimizer, dict) else {},
        dst_version=str(meta.get("dst_version", "")), path=path, consequences=consequences,
    )


def _consequences(rows: Any, scenario: Scenario, at: str) -> tuple[Consequence, ...]:
    """``finding.consequences``: a list of { invariant, time, message } tables (absent from a finding written before
    they were recorded: none)."""
    shape = "a list of tables such as { invariant = '<its id>', time = '1.2s', message = '<its message>' }"
    if not isinstance(rows, list):
        raise FindingError(f"{at}: finding.consequences: expected {shape}, got {shorten(rows)}")
    out = []
    for i, row in enumerate(rows):
        key = f"finding.consequences[{i}]"
        if not isinstance(row, dict):
            raise FindingError(f"{at}: {key}: expected a table such as {{ invariant = '<its id>', time = '1.2s', "
                               f"message = '<its message>' }}, got {shorten(row)}")
        invariant, time, message = row.get("invariant"), row.get("time"), row.get("message")
        if not isinstance(invariant, str) or invariant not in scenario.invariants and invariant != MODEL_ERROR \
                and not is_user(invariant):
            raise FindingError(f"{at}: {key}.invariant: expected one of the scenario's invariants, "
                               f"{MODEL_ERROR!r} or a user's assertion ('always:<its id>'), got {shorten(invariant)}")
        if not isinstance(time, str):
            raise FindingError(f"{at}: {key}.time: expected a time such as '44.637s', got {shorten(time)}")
        try:
            ms = parse_duration(time)
        except ValueError as e:
            raise FindingError(f"{at}: {key}.time: {e}") from None
        if not isinstance(message, str):
            raise FindingError(f"{at}: {key}.message: expected the violation's message, got {shorten(message)}")
        out.append(Consequence(str(invariant), ms, message))
    return tuple(out)
