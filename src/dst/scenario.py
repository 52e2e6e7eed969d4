"""Scenario files: TOML -> a validated, frozen :class:`Scenario`, and back.

Every key is declared once, with its default and its *kind* (a duration, a range, a
probability ...); the kind both checks a value on load and writes it back out, so a
finding can embed its whole scenario and be read again exactly. A user error raises
:class:`ScenarioError` whose message is one line naming the file, the key path and what
was expected; the CLI prints it and exits 2. The schema is documented in ``docs/scenarios.md``.
"""

from __future__ import annotations

import tomllib
from importlib import resources
from pathlib import Path
from typing import Any, Callable

import attrs

from .errors import UserError
from .files import PATH_LIMIT, FileError, read_text, read_toml, where  # noqa: F401  (PATH_LIMIT, read_text: the CLI's)
from .faults import SCHEDULED
from .invariants import INVARIANT_IDS, RUN_INVARIANTS  # noqa: F401  (RUN_INVARIANTS: re-exported)
from .models import DEFAULT_IMPL, ModelError, resolve
from .plan import Step, sort_steps, step_from_mapping
from .sut import Model, OptionError
from .text import format_duration, key_name, one_line, parse_duration, shorten

SCHEDULERS = ("uniform", "pct")
DEFAULT_NAME = "default"
EMBEDDED = "<embedded default>"

Range = tuple[int, int]


class ScenarioError(UserError):
    """A scenario file is malformed; ``str()`` is the one line to show the user."""


class _Inner(ValueError):
    """A bad value one key further down than the key being read (``model.limits.db``)."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key


# --- kinds: how a value is checked on the way in and written on the way out ------------------------

@attrs.frozen
class Kind:
    read: Callable[[object], Any]  # raises ValueError("expected ...")
    write: Callable[[Any], Any] = lambda v: v


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value


def _duration(minimum: int) -> Kind:
    def read(value: object) -> int:
        ms = parse_duration(value)
        if ms < minimum:
            raise ValueError(f"expected a duration above zero, got {shorten(value)}")
        return ms

    return Kind(read, format_duration)


def _read_range(value: object) -> Range:
    """A duration, or ``[low, high]`` durations."""
    if isinstance(value, list):
        if len(value) != 2:
            raise ValueError(f"expected [low, high] durations, got {shorten(value)}")
        lo, hi = parse_duration(value[0]), parse_duration(value[1])
        if lo > hi:
            raise ValueError(f"expected low <= high, got {shorten(value)}")
        return (lo, hi)
    ms = parse_duration(value)
    return (ms, ms)


# Sizes past these are plainly a slip (a run of them would take hours or gigabytes), not a test.
MAX_COUNT = 1_000_000
MAX_CLIENTS = 10_000


def _read_int_range(value: object) -> Range:
    if isinstance(value, list):
        if len(value) != 2 or not all(_is_int(v) and 0 <= v <= MAX_COUNT for v in value) or value[0] > value[1]:
            raise ValueError(f"expected [low, high] integers from 0 to {MAX_COUNT:,} with low <= high, "
                             f"got {shorten(value)}")
        return (value[0], value[1])
    if not _is_int(value) or not 0 <= value <= MAX_COUNT:  # type: ignore[operator]
        raise ValueError(f"expected an integer from 0 to {MAX_COUNT:,} or [low, high], got {shorten(value)}")
    return (value, value)  # type: ignore[return-value]


def _count(minimum: int, maximum: int = MAX_COUNT) -> Kind:
    def read(value: object) -> int:
        if not _is_int(value) or not minimum <= value <= maximum:  # type: ignore[operator]
            raise ValueError(f"expected an integer from {minimum} to {maximum:,}, got {shorten(value)}")
        return value  # type: ignore[return-value]

    return Kind(read)


def _number(test: Callable[[float], bool], expected: str) -> Kind:
    def read(value: object) -> float:
        if not _is_number(value) or not test(value):  # type: ignore[arg-type]
            raise ValueError(f"expected {expected}, got {shorten(value)}")
        return float(value)  # type: ignore[arg-type]

    return Kind(read)


def _one_of(options: tuple[str, ...]) -> Kind:
    def read(value: object) -> str:
        if value not in options:
            raise ValueError(f"expected one of {', '.join(repr(o) for o in options)}, got {shorten(value)}")
        return value

    return Kind(read)


def _read_limits(value: object) -> tuple[tuple[str, int], ...]:
    if not isinstance(value, dict) or not value:
        raise ValueError(f"expected a table of limit names to capacities, such as {{ db = 2 }}, got {shorten(value)}")
    for name, cap in value.items():
        if not _is_int(cap) or not 1 <= cap <= MAX_COUNT:
            raise _Inner(key_name(name), f"expected an integer from 1 to {MAX_COUNT:,}, got {shorten(cap)}")
    return tuple(sorted(value.items()))


DURATION, POSITIVE = _duration(0), _duration(1)
RANGE = Kind(_read_range, lambda r: [format_duration(r[0]), format_duration(r[1])])
INT_RANGE = Kind(_read_int_range, list)
PROBABILITY = _number(lambda v: 0 <= v <= 1, "a probability between 0 and 1")
FRACTION = _number(lambda v: 0 < v < 1, "a fraction strictly between 0 and 1")
MAX_RATE = 1_000
RATE = _number(lambda v: 0 <= v <= MAX_RATE, f"a number of faults per virtual minute from 0 to {MAX_RATE:,}")
LIMITS = Kind(_read_limits, dict)
def _read_name(value: object) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"expected a name, got {shorten(value)}")
    return value


NAME = Kind(_read_name)


def _read_flag(value: object) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"expected true or false, got {shorten(value)}")
    return value


# The kinds a model's options may declare (dst.sut.option), by name.
_OPTION_KINDS: dict[str, Kind] = {
    "duration": DURATION, "positive-duration": POSITIVE, "range": RANGE, "count": _count(0),
    "positive-count": _count(1), "fraction": FRACTION, "probability": PROBABILITY, "name": NAME,
    "flag": Kind(_read_flag),
}


def _kind(field: Any) -> Kind:
    """How a field is read and written: a harness key's own kind, or a model option's declared one."""
    kind = field.metadata.get("kind")
    if kind is not None:
        return kind
    name = field.metadata.get("dst.kind")
    if name == "choice":
        return _one_of(field.metadata.get("dst.choices", ()))
    if name not in _OPTION_KINDS:
        raise TypeError(f"option {field.name!r}: unknown kind {name!r} (known: choice, {', '.join(_OPTION_KINDS)})")
    return _OPTION_KINDS[name]


def key(default: Any, kind: Kind) -> Any:
    """A scenario key: its default, and how it is read and written."""
    return attrs.field(default=default, metadata={"kind": kind})


# --- the sections -----------------------------------------------------------------------------------

@attrs.frozen
class RunConfig:
    duration: int = key(600_000, POSITIVE)
    quiet: int = key(120_000, DURATION)
    drain_limit: int = key(600_000, DURATION)
    granularity: int = key(1, POSITIVE)  # generated times and durations are whole multiples of this
    max_events: int = key(2_000_000, _count(1, 1_000_000_000))  # a run past this ends unjudged: over budget
    scheduler: str = key("uniform", _one_of(SCHEDULERS))  # how the server picks the next ready handler step


@attrs.frozen
class ModelConfig:
    """The system under test: which model (``impl``), the limits and store latency the harness
    simulates for it, and the model's own options (None: the model's defaults)."""

    impl: str = key(DEFAULT_IMPL, NAME)
    limits: tuple[tuple[str, int], ...] = key((("db", 2),), LIMITS)
    store_latency: Range = key((1, 20), RANGE)
    store_slow: float = key(0.0, PROBABILITY)  # probability that a store round trip is slow ...
    store_slow_by: Range = key((1_000, 5_000), RANGE)  # ... by this much more: a lock wait, a checkpoint
    options: Any = None

    def resolve(self) -> Model[Any]:
        return resolve(self.impl)

    def settings(self) -> Any:
        """The model's options: as the scenario gives them, or the model's defaults."""
        if self.options is not None:
            return self.options
        cls = self.resolve().options
        return None if cls is None else cls()

    def with_options(self, **changes: Any) -> "ModelConfig":
        """This section with some of the model's options changed (``resource_contract="token-and-lease"``)."""
        return attrs.evolve(self, options=attrs.evolve(self.settings(), **changes))


@attrs.frozen
class WorkloadConfig:
    clients: int = key(4, _count(1, MAX_CLIENTS))
    jobs: int = key(6, _count(0))
    limit: str = key("db", NAME)  # checked against model.limits after reading
    slots: int = key(1, _count(1))
    work: Range = key((5_000, 100_000), RANGE)
    think: Range = key((0, 20_000), RANGE)
    writes: Range = key((1, 4), INT_RANGE)
    write_time: int = key(1_000, DURATION)
    request_timeout: int = key(2_000, POSITIVE)
    retries: int = key(3, _count(0))
    acquire_patience: int = key(120_000, DURATION)


@attrs.frozen
class NetworkConfig:
    latency: Range = key((1, 50), RANGE)
    loss: float = key(0.01, PROBABILITY)
    duplicate: float = key(0.01, PROBABILITY)
    delay: float = key(0.01, PROBABILITY)
    delay_by: Range = key((1_000, 20_000), RANGE)


@attrs.frozen
class RunsConfig:
    """The server-owned deadlines part: runs submitted, cancelled, and served from a stream."""

    submissions: int = key(0, _count(0))  # runs submitted over the active phase; 0 leaves the part out
    workers: int = key(2, _count(1, MAX_CLIENTS))  # clients c1..cN serve the stream
    work: Range = key((10_000, 120_000), RANGE)
    cancel: float = key(0.3, PROBABILITY)  # fraction of runs a user cancels
    cancel_early: float = key(0.2, PROBABILITY)  # of those, the fraction cancelled before they are submitted

    @property
    def enabled(self) -> bool:
        return self.submissions > 0


@attrs.frozen
class FaultRate:
    """A fault kind: expected occurrences per virtual minute, how long each lasts, and the fraction aimed
    at a sensitive moment the model marks (the rest strike whenever they fall)."""

    rate: float = key(0.0, RATE)
    duration: Range = key((0, 0), RANGE)
    targeted: float = key(0.0, PROBABILITY)


class _Faults:
    def kinds(self) -> tuple[tuple[str, FaultRate], ...]:
        """Each fault kind's name and its rate, in the registry's order."""
        return tuple((f.name, getattr(self, f.name)) for f in attrs.fields(type(self)))  # type: ignore[arg-type]


# One FaultRate per scheduled kind in the fault registry (dst.faults), in its order.
FaultsConfig: Any = attrs.make_class("FaultsConfig", {kind.name: attrs.field(default=FaultRate(duration=kind.duration))
                                                      for kind in SCHEDULED},
                                     bases=(_Faults,), frozen=True)
FaultsConfig.__module__ = __name__


_SECTIONS: dict[str, type] = {"run": RunConfig, "workload": WorkloadConfig, "network": NetworkConfig,
                              "runs": RunsConfig}


@attrs.frozen
class Scenario:
    name: str = DEFAULT_NAME
    description: str = ""
    run: RunConfig = RunConfig()
    model: ModelConfig = ModelConfig()
    workload: WorkloadConfig = WorkloadConfig()
    network: NetworkConfig = NetworkConfig()
    faults: Any = FaultsConfig()
    runs: RunsConfig = RunsConfig()
    invariants: tuple[str, ...] = INVARIANT_IDS
    bugs: tuple[str, ...] = ()
    steps: tuple[Step, ...] | None = None  # a scripted run; None means generated from the seed
    source: str = EMBEDDED


# --- reading ------------------------------------------------------------------------------------------

class _Reader:
    """Walks a TOML document, recording the key path for error messages."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.where = where(source)  # the file as error lines name it

    def fail(self, path: str, expected: str, got: object = attrs.NOTHING) -> ScenarioError:
        tail = "" if got is attrs.NOTHING else f", got {shorten(got)}"
        return ScenarioError(f"{self.where}: {path}: expected {expected}{tail}")

    def table(self, doc: dict[str, Any], name: str, path: str, allowed: tuple[str, ...]) -> dict[str, Any]:
        value = doc.get(name, {})
        if not isinstance(value, dict):
            raise self.fail(path, "a table", value)
        for k in value:
            if k not in allowed:
                raise self.fail(f"{path}.{key_name(k)}" if path else key_name(k),
                                f"one of the keys {', '.join(allowed)} (unknown key)")
        return value

    def value(self, doc: dict[str, Any], name: str, path: str, read: Callable[[object], Any], default: Any) -> Any:
        """``doc[name]`` read by ``read`` (``default`` when absent), its errors named by key path."""
        if name not in doc:
            return default
        where = f"{path}.{name}" if path else name
        try:
            return read(doc[name])
        except _Inner as e:
            raise ScenarioError(f"{self.where}: {where}.{e.key}: {e}") from None
        except ValueError as e:
            raise ScenarioError(f"{self.where}: {where}: {e}") from None

    def section(self, doc: dict[str, Any], path: str, cls: type, defaults: Any = None) -> Any:
        """A config section, every key read by its declared kind (missing keys from ``defaults``, if given)."""
        fields = attrs.fields(cls)
        t = self.table(doc, path.rsplit(".", 1)[-1], path, tuple(f.name for f in fields))
        return cls(**{f.name: self.value(t, f.name, path, _kind(f).read,
                                         f.default if defaults is None else getattr(defaults, f.name))
                      for f in fields})

    def model(self, doc: dict[str, Any]) -> tuple[ModelConfig, Model[Any]]:
        """[model]: the harness's keys, then the named model's own options, each read by its declared kind."""
        own = tuple(f.name for f in attrs.fields(ModelConfig) if f.name != "options")
        t = doc.get("model", {})
        if not isinstance(t, dict):
            raise self.fail("model", "a table", t)
        impl = self.value(t, "impl", "model", NAME.read, DEFAULT_IMPL)
        try:
            model = resolve(impl)
        except ModelError as e:
            raise ScenarioError(f"{self.where}: model.impl: {e}") from None
        fields = attrs.fields(model.options) if model.options is not None else ()
        allowed = own + tuple(f.name for f in fields)
        for k in t:
            if k not in allowed:
                theirs = f"; {impl} has no options" if not fields else ""
                raise self.fail(f"model.{key_name(k)}", f"one of the keys {', '.join(allowed)} (unknown key{theirs})")
        values = {f.name: self.value(t, f.name, "model", _kind(f).read, f.default)
                  for f in attrs.fields(ModelConfig) if f.name != "options"}
        options = None
        if model.options is not None:
            read = {f.name: self.value(t, f.name, "model", _kind(f).read, f.default) for f in fields}
            try:
                options = model.options(**read)
            except OptionError as e:
                raise self.fail(f"model.{e.key}", str(e).removeprefix("expected "), t.get(e.key, read.get(e.key)))
            if options == model.options():
                options = None  # the model's defaults: one scenario, however it was spelled
        return ModelConfig(**values, options=options), model


def _names(options: tuple[str, ...], what: str) -> Callable[[object], tuple[str, ...]]:
    def convert(value: object) -> tuple[str, ...]:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ValueError(f"expected a list of {what}, got {shorten(value)}")
        for v in value:
            if v not in options:
                raise ValueError(f"expected {what} from: {', '.join(options) or 'none'}; got unknown {v!r}")
        return tuple(dict.fromkeys(value))

    return convert


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise ValueError(f"expected a string, got {shorten(value)}")
    return value


# A finding file is a scenario file with a [finding] table, which the scenario itself ignores.
_TOP_KEYS = ("name", "description", "run", "model", "workload", "network", "faults", "runs", "invariants", "bugs",
             "steps", "finding")


def parse_scenario(doc: dict[str, Any], source: str, *, model: str | None = None) -> Scenario:
    """A scenario from a TOML document; ``model`` names the model to run instead of the document's own."""
    if model is not None:
        section = doc.get("model", {})
        doc = {**doc, "model": {**section, "impl": model} if isinstance(section, dict) else section}
    r = _Reader(source)
    for k in doc:
        if k not in _TOP_KEYS:
            raise r.fail(key_name(k), f"one of the top-level keys {', '.join(_TOP_KEYS)} (unknown key)")
    model_config, implementation = r.model(doc)
    sections = {name: r.section(doc, name, cls) for name, cls in _SECTIONS.items()}
    workload, runs = sections["workload"], sections["runs"]
    limits = dict(model_config.limits)

    # Checks across keys.
    if "limit" not in doc.get("workload", {}):
        workload = attrs.evolve(workload, limit=model_config.limits[0][0])
    elif workload.limit not in limits:
        raise r.fail("workload.limit", f"one of {', '.join(repr(n) for n in limits)}", workload.limit)
    if workload.slots > limits[workload.limit]:
        raise r.fail("workload.slots", f"at most the capacity of limit {workload.limit!r} ({limits[workload.limit]})",
                     workload.slots)

    kinds = tuple(f.name for f in attrs.fields(FaultsConfig))
    t = r.table(doc, "faults", "faults", kinds)
    blank = FaultsConfig()  # each kind's own defaults (a duration that suits it)
    faults = FaultsConfig(**{kind: r.section(t, f"faults.{kind}", FaultRate, getattr(blank, kind)) for kind in kinds})
    _check_plan_size(r, sections["run"], workload, faults, runs)

    return Scenario(
        name=r.value(doc, "name", "", _text, Path(source).stem if not source.startswith("<embedded") else DEFAULT_NAME),
        description=r.value(doc, "description", "", _text, ""),
        run=sections["run"], model=model_config, workload=workload, network=sections["network"], faults=faults, runs=runs,
        invariants=r.value(doc, "invariants", "", _names(INVARIANT_IDS, "invariant ids"), INVARIANT_IDS),
        bugs=r.value(doc, "bugs", "", _names(tuple(b.slug for b in implementation.bugs),
                                             f"bug slugs of {model_config.impl}"), ()),
        steps=_steps(r, doc, limits, workload.limit) if "steps" in doc else None,
        source=source,
    )


MAX_PLAN = 1_000_000


def _check_plan_size(r: _Reader, run: RunConfig, workload: WorkloadConfig, faults: Any, runs: RunsConfig) -> None:
    """A generated plan is made whole before the run starts: refuse one that could not fit in memory."""
    shortest = workload.work[0] + workload.think[0]  # a client's jobs stop at run.duration
    jobs = workload.clients * min(workload.jobs, run.duration // shortest + 1 if shortest else workload.jobs)
    parts = {
        "workload.jobs": jobs,
        "faults": int(sum(rate.rate for _, rate in faults.kinds()) * run.duration / 60_000),
        "runs.submissions": 2 * runs.submissions,
    }
    if sum(parts.values()) > MAX_PLAN:
        biggest = max(parts, key=lambda k: parts[k])
        made = ", ".join(f"{n:,} from {k}" for k, n in parts.items() if n)
        raise r.fail(biggest, f"a plan of at most {MAX_PLAN:,} steps over run.duration; this one would have about "
                              f"{sum(parts.values()):,} ({made})")


def _steps(r: _Reader, doc: dict[str, Any], limits: dict[str, int], default_limit: str) -> tuple[Step, ...]:
    raw_steps = doc["steps"]
    if not isinstance(raw_steps, list):
        raise r.fail("steps", "an array of step tables such as { at = '0s', actor = 'c1', action = 'acquire' }",
                     raw_steps)
    parsed: list[Step] = []
    seen: set[int] = set()
    for i, raw in enumerate(raw_steps):
        if not isinstance(raw, dict):
            raise r.fail(f"steps[{i}]", "a table with at, actor and action", raw)
        try:
            step = step_from_mapping(raw, default_id=i + 1)
        except ValueError as e:
            raise ScenarioError(f"{r.where}: steps[{i}].{e}") from None
        if step.id in seen:
            raise r.fail(f"steps[{i}].id", "an id no other step has", step.id)
        seen.add(step.id)
        limit = step.arg("limit")
        if limit is not None and limit not in limits:
            raise r.fail(f"steps[{i}].limit", f"one of the model's limits ({', '.join(limits)})", limit)
        slots = step.arg("slots")
        capacity = limits[limit or default_limit]
        if slots is not None and slots > capacity:  # type: ignore[operator]
            raise r.fail(f"steps[{i}].slots", f"at most the limit's capacity ({capacity})", slots)
        parsed.append(step)
    return sort_steps(parsed)


def embedded_scenarios() -> tuple[str, ...]:
    """The names of the scenarios shipped inside the package (``default``, ``runs``, one per catalogue bug)."""
    folder = resources.files("dst").joinpath("scenarios")
    return tuple(sorted(p.name.removesuffix(".toml") for p in folder.iterdir() if p.name.endswith(".toml")))


def load_scenario(path: str | Path | None = None, *, model: str | None = None) -> Scenario:
    """Load and validate a scenario file, or a scenario shipped with dst by its name (``"runs"``,
    ``"double-release"``); ``None`` loads the embedded default. A file wins over a name. ``model``
    names the model to run instead of the one the file names (``--model``): see :func:`with_model`."""
    name = DEFAULT_NAME if path is None else str(path)
    if path is None or (name in embedded_scenarios() and not Path(path).exists()):
        text = resources.files("dst").joinpath(f"scenarios/{name}.toml").read_text(encoding="utf-8")
        return scenario_from_doc(tomllib.loads(text), EMBEDDED if name == DEFAULT_NAME else f"<embedded {name}>",
                                 model)
    try:
        doc = read_toml(path, missing="no such file (nor the name of a scenario shipped with dst, such as 'default', "
                                      "'runs' or a bug's slug)")
    except FileError as e:
        raise ScenarioError(str(e)) from None
    return scenario_from_doc(doc, str(path), model)


def scenario_from_doc(doc: dict[str, Any], source: str, model: str | None = None) -> Scenario:
    """A scenario from a TOML document, run on ``model`` instead of its own if given (see :func:`with_model`)."""
    if model is None:
        return parse_scenario(doc, source)
    try:
        own = parse_scenario(doc, source)
    except ScenarioError as e:
        if ": model.impl: " not in str(e):
            raise
        return parse_scenario(doc, source, model=model)  # its own model is gone: read its keys as the new one's
    return with_model(own, model)


def scripted(scenario: Scenario, plan: tuple[Step, ...]) -> Scenario:
    """The scenario as an exact script of ``plan``: generation settings that no longer matter are zeroed,
    so the file reads as what it is."""
    faults = attrs.evolve(scenario.faults, **{k: attrs.evolve(f, rate=0.0) for k, f in scenario.faults.kinds()})
    clients = max([int(s.actor[1:]) for s in plan if s.actor.startswith("c")] + [1])
    return attrs.evolve(scenario, steps=plan, faults=faults,
                        workload=attrs.evolve(scenario.workload, clients=clients, jobs=0),
                        runs=attrs.evolve(scenario.runs, submissions=0))


def with_model(scenario: Scenario, model: str) -> Scenario:
    """The scenario run on another model: the options it sets apart from its model's defaults carry over
    (the new model must know them); the rest take the new model's defaults."""
    if model == scenario.model.impl:
        return scenario
    doc = scenario_to_doc(scenario)
    defaults = attrs.evolve(scenario.model, options=None).settings()
    if defaults is not None:
        for f in attrs.fields(type(defaults)):
            if getattr(defaults, f.name) == getattr(scenario.model.settings(), f.name):
                del doc["model"][f.name]
    return parse_scenario(doc, scenario.source, model=model)


# --- writing ------------------------------------------------------------------------------------------

def scenario_to_doc(scenario: Scenario) -> dict[str, Any]:
    """The whole scenario as a TOML document (every key written out), for findings to embed.
    ``parse_scenario(scenario_to_doc(s), source)`` gives ``s`` back."""

    def section(config: Any) -> dict[str, Any]:
        return {f.name: _kind(f).write(getattr(config, f.name)) for f in attrs.fields(type(config))
                if f.name != "options"}

    doc: dict[str, Any] = {"name": scenario.name, "description": scenario.description, "bugs": list(scenario.bugs),
                           "invariants": list(scenario.invariants)}
    doc["model"] = section(scenario.model)
    options = scenario.model.settings()
    if options is not None:
        doc["model"] |= section(options)
    doc |= {name: section(getattr(scenario, name)) for name in _SECTIONS}
    doc["faults"] = {kind: section(rate) for kind, rate in scenario.faults.kinds()}
    if scenario.steps is not None:
        doc["steps"] = [step.to_dict() for step in scenario.steps]
    return doc
