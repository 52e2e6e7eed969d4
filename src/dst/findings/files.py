"""Finding files: ``findings/NNN-what-happened.toml``.

A finding is a scenario file with a ``[finding]`` table: the complete scenario (every key
written out), its minimized plan as a readable ``steps`` list a person can edit, and what
the run is expected to do (the violated invariant, its message, the trace digest). So
``dst run --scenario findings/007-....toml --seed N`` runs it too.

Files are written atomically (a temporary file, then a hard link that fails rather than
overwrite), numbered after the highest number already there, and skipped when a finding
with the same signature already exists.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import stat
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterable, Iterator

import attrs

from ..errors import UserError
from .. import __version__
from ..faults import FAULTS, fault_of
from ..invariants import BY_ID
from ..models import DEFAULT_IMPL
from ..text import parse_duration, shorten, toml_key, toml_string, toml_value
from ..files import FileError, check_folder, read_toml, staged, where, why
from ..scenario import Scenario, ScenarioError, scenario_from_doc, scenario_to_doc
from ..sim.trace import Event, format_time

FORMAT = 1
_NAME = re.compile(r"^(\d{3,})-[a-z0-9-]+\.toml$")


class FindingError(UserError):
    """A finding file is malformed; ``str()`` is the one line to show the user (exit 2)."""


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
    what = unit.titled(message) if unit is not None else finding_invariant
    faults = [kind for kind in map(fault_of, scenario.steps or ()) if kind is not None]
    seen = {e[2] for e in trace if e[1] in ("net", "server")}  # what the draws did, if the steps do not say
    faults += [kind for kind in FAULTS if kind.pinned and kind.drawn_as in seen]
    if faults:
        return f"{what}-{min(faults, key=lambda kind: kind.title_rank).title}"
    return what


# --- writing ------------------------------------------------------------------------------------------

def _lines(prints: tuple[str, ...], per_line: int = 10) -> str:
    rows = [", ".join(toml_string(p) for p in prints[i:i + per_line]) for i in range(0, len(prints), per_line)]
    return "[\n" + "".join(f"  {row},\n" for row in rows) + "]"


def render(finding: Finding, number: int) -> str:
    """The finding as TOML: a header, the scenario's top-level keys and steps, [finding], the sections."""
    doc = scenario_to_doc(finding.scenario)
    replay = f"dst replay findings/{number:03d}-{finding.title}.toml"
    out = [
        f"# dst finding {number:03d}: {finding.title}",
        f"# {finding.invariant} at t={format_time(finding.time)}: {finding.message}",
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
    out.append(f"fingerprints = {_lines(finding.fingerprints)}")
    for section, values in doc.items():
        out += ["", f"[{section}]"] + [f"{toml_key(k)} = {toml_value(v)}" for k, v in values.items()]
    return "\n".join(out) + "\n"


_MAX_BYTES = 1 << 20  # a finding is a few kilobytes: a larger file in the folder is not one


def _finding_files(directory: Path) -> list[Path]:
    """The folder's finding files: regular files (not links, not FIFOs) named ``NNN-*.toml``, in order."""
    files = []
    for path in sorted(directory.iterdir()):
        try:
            info = path.lstat()
        except OSError:
            continue
        if _NAME.match(path.name) and stat.S_ISREG(info.st_mode) and info.st_size <= _MAX_BYTES:
            files.append(path)
    return files


def existing(directory: Path) -> dict[str, Path]:
    """Signatures of the findings already in ``directory`` (a file that is not a finding is skipped)."""
    found: dict[str, Path] = {}
    for path in _finding_files(directory):
        try:
            meta = read_toml(path).get("finding", {})
        except FileError:
            continue
        if not isinstance(meta, dict) or meta.get("format") != FORMAT:
            continue
        if isinstance(meta.get("signature"), str):
            found.setdefault(meta["signature"], path)
        origin = meta.get("origin", {})
        if isinstance(origin, dict) and isinstance(origin.get("signature"), str):
            found.setdefault(origin["signature"], path)
    return found


class FolderError(UserError):
    """The findings folder cannot take a finding; ``str()`` is one line (exit 2, before a campaign starts)."""


def ready(directory: Path) -> Path:
    """Make sure findings can be written into ``directory`` (created if missing), or say why in one line."""
    try:
        check_folder(directory)
    except FileExistsError:
        raise FolderError(f"{where(directory)}: expected a folder for findings, but it is a file") from None
    except (OSError, ValueError) as e:
        raise FolderError(f"{where(directory)}: cannot write findings there ({why(e)})") from None
    return directory


@contextmanager
def _locked(directory: Path) -> Iterator[None]:
    """One writer at a time in a folder (two campaigns at once write each signature once)."""
    with open(directory / ".dst-findings.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def write(finding: Finding, directory: Path) -> tuple[Path, bool]:
    """Write ``finding`` into ``directory`` as the next number; returns (path, written). When a finding
    with its signature is already there, returns that one's path and writes nothing. The file is read
    back before it is given its name, so a finding that would not read is never written."""
    ready(directory)
    with _locked(directory):
        known = existing(directory)
        for sig in (finding.signature, finding.origin.get("signature")):
            if sig in known:
                return known[sig], False
        numbers = [int(m.group(1)) for p in directory.iterdir() if (m := _NAME.match(p.name))]
        number = max(numbers, default=0) + 1
        while True:
            with staged(directory, render(finding, number).encode(), prefix=".finding-") as temp:
                again = read(temp)
                assert (again.digest, again.invariant, again.scenario.steps) == \
                    (finding.digest, finding.invariant, finding.scenario.steps), "a finding did not read back as written"
                target = directory / f"{number:03d}-{finding.title}.toml"
                try:
                    os.link(temp, target)  # fails rather than overwrite
                    return target, True
                except FileExistsError:
                    number += 1  # a name taken by hand meanwhile


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

    if meta.get("format") != FORMAT:
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
    if not scenario.steps:
        raise FindingError(f"{at}: steps: expected the finding's steps (at least one)")
    invariant = need("invariant", str, "an invariant id")
    if invariant not in scenario.invariants:
        raise FindingError(f"{at}: finding.invariant: expected one of the scenario's invariants, "
                           f"got {shorten(invariant)}")
    origin, minimizer = meta.get("origin", {}), meta.get("minimizer", {})
    return Finding(
        scenario=scenario, seed=seed, invariant=invariant, message=need("message", str, "the violation's message"),
        time=time, signature=need("signature", str, "a signature string"),
        digest=need("trace_digest", str, "the trace digest"), fingerprints=tuple(prints),
        title=path.stem.split("-", 1)[-1], origin=origin if isinstance(origin, dict) else {},
        minimizer=minimizer if isinstance(minimizer, dict) else {},
        dst_version=str(meta.get("dst_version", "")), path=path,
    )
