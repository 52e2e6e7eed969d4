"""Scenario files: TOML -> a validated, frozen :class:`Scenario`.

Every value is checked on load. A user error raises :class:`ScenarioError`
whose message is one line naming the file, the key path and what was expected;
the CLI prints it and exits 2. The schema is documented in ``docs/scenarios.md``.
"""

from __future__ import annotations

import re
import tomllib
from importlib import resources
from pathlib import Path
from typing import Any, Callable

import attrs

from .model.bugs import KNOWN_BUGS
from .plan import Step, parse_duration, sort_steps, step_from_mapping

RUN_INVARIANTS = ("bounded-transition", "at-least-once", "cancelled-never-starts", "owner-only-update")
INVARIANT_IDS = ("slot-accounting", "capacity", "no-foreign-release", "fenced-writes", "single-executor", "stranded-slot",
                 *RUN_INVARIANTS)
CONTRACTS = ("token", "token-and-lease")
SCHEDULERS = ("uniform", "pct")
DEFAULT_NAME = "default"
EMBEDDED = "<embedded default>"


class ScenarioError(ValueError):
    """A scenario file is malformed; ``str()`` is the one line to show the user."""


Range = tuple[int, int]
_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


@attrs.frozen
class RunConfig:
    duration: int = 600_000
    quiet: int = 120_000
    drain_limit: int = 600_000
    granularity: int = 1  # generated times and durations are whole multiples of this (ms)
    scheduler: str = "uniform"  # how the server picks the next ready handler step: "uniform" or "pct"


@attrs.frozen
class ModelConfig:
    limits: tuple[tuple[str, int], ...] = (("db", 2),)
    ttl: int = 60_000
    reaper_interval: int = 15_000
    renew_fraction: float = 0.75
    renew_attempts: int = 3
    retry_after: int = 1_000
    store_latency: Range = (1, 20)
    resource_contract: str = "token"

    def limit(self, name: str) -> int:
        return dict(self.limits)[name]


@attrs.frozen
class WorkloadConfig:
    clients: int = 4
    jobs: int = 6
    limit: str = "db"
    slots: int = 1
    work: Range = (5_000, 100_000)
    think: Range = (0, 20_000)
    writes: Range = (1, 4)
    write_time: int = 1_000
    request_timeout: int = 2_000
    retries: int = 3
    acquire_patience: int = 120_000


@attrs.frozen
class NetworkConfig:
    latency: Range = (1, 50)
    loss: float = 0.01
    duplicate: float = 0.01
    delay: float = 0.01
    delay_by: Range = (1_000, 20_000)


@attrs.frozen
class RunsConfig:
    """The server-owned deadlines part: runs submitted, cancelled, and served from a stream."""

    submissions: int = 0  # runs submitted over the active phase; 0 leaves the part out
    workers: int = 2  # clients c1..cN serve the stream
    work: Range = (10_000, 120_000)
    cancel: float = 0.3  # fraction of runs a user cancels
    cancel_early: float = 0.2  # of those, the fraction cancelled before they are submitted
    cancelling_timeout: int = 300_000
    sweep_interval: int = 20_000
    redelivery_timeout: int = 300_000
    heartbeat_interval: int = 30_000
    poll_interval: int = 5_000

    @property
    def enabled(self) -> bool:
        return self.submissions > 0


@attrs.frozen
class FaultRate:
    """A fault kind: expected occurrences per virtual minute, and how long each lasts."""

    rate: float = 0.0
    duration: Range = (0, 0)


@attrs.frozen
class FaultsConfig:
    crash: FaultRate = FaultRate()
    restart: FaultRate = FaultRate()
    pause: FaultRate = FaultRate()
    partition: FaultRate = FaultRate()
    server_restart: FaultRate = FaultRate()

    def kinds(self) -> tuple[tuple[str, FaultRate], ...]:
        return tuple((f.name, getattr(self, f.name)) for f in attrs.fields(FaultsConfig))


@attrs.frozen
class Scenario:
    name: str = DEFAULT_NAME
    description: str = ""
    run: RunConfig = RunConfig()
    model: ModelConfig = ModelConfig()
    workload: WorkloadConfig = WorkloadConfig()
    network: NetworkConfig = NetworkConfig()
    faults: FaultsConfig = FaultsConfig()
    runs: RunsConfig = RunsConfig()
    invariants: tuple[str, ...] = INVARIANT_IDS
    bugs: tuple[str, ...] = ()
    steps: tuple[Step, ...] | None = None  # a scripted run; None means generated from the seed
    source: str = EMBEDDED


# --- validation helpers -------------------------------------------------------------------------

class _Reader:
    """Walks a TOML document, recording the key path for error messages."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, path: str, expected: str, got: object = attrs.NOTHING) -> ScenarioError:
        tail = "" if got is attrs.NOTHING else f", got {got!r}"
        return ScenarioError(f"{self.source}: {path}: expected {expected}{tail}")

    def table(self, doc: dict[str, Any], key: str, path: str, allowed: tuple[str, ...]) -> dict[str, Any]:
        value = doc.get(key, {})
        if not isinstance(value, dict):
            raise self.fail(path, "a table", value)
        for k in value:
            if k not in allowed:
                raise self.fail(f"{path}.{_key(k)}" if path else _key(k), f"one of the keys {', '.join(allowed)} (unknown key)")
        return value

    def get(self, doc: dict[str, Any], key: str, path: str, convert: Callable[[object], Any], default: Any) -> Any:
        if key not in doc:
            return default
        try:
            return convert(doc[key])
        except ValueError as e:
            raise ScenarioError(f"{self.source}: {f'{path}.{key}' if path else key}: {e}") from None


def _key(key: str) -> str:
    """A key as TOML would spell it: bare when it can be, quoted (and escaped, so one line) when not."""
    return key if _BARE_KEY.match(key) else repr(key)


def _duration(value: object) -> int:
    return parse_duration(value)


def _positive_duration(value: object) -> int:
    ms = parse_duration(value)
    if ms <= 0:
        raise ValueError(f"expected a duration above zero, got {value!r}")
    return ms


def _range(value: object) -> Range:
    """A duration, or ``[low, high]`` durations."""
    if isinstance(value, list):
        if len(value) != 2:
            raise ValueError(f"expected [low, high] durations, got {value!r}")
        lo, hi = parse_duration(value[0]), parse_duration(value[1])
        if lo > hi:
            raise ValueError(f"expected low <= high, got {value!r}")
        return (lo, hi)
    ms = parse_duration(value)
    return (ms, ms)


def _int_range(value: object) -> Range:
    if isinstance(value, list):
        if len(value) != 2 or not all(_is_int(v) and v >= 0 for v in value) or value[0] > value[1]:
            raise ValueError(f"expected [low, high] non-negative integers with low <= high, got {value!r}")
        return (value[0], value[1])
    if not _is_int(value) or value < 0:  # type: ignore[operator]
        raise ValueError(f"expected a non-negative integer or [low, high], got {value!r}")
    return (value, value)  # type: ignore[return-value]


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _count(minimum: int) -> Callable[[object], int]:
    def convert(value: object) -> int:
        if not _is_int(value) or value < minimum:  # type: ignore[operator]
            raise ValueError(f"expected an integer >= {minimum}, got {value!r}")
        return value  # type: ignore[return-value]

    return convert


def _probability(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise ValueError(f"expected a probability between 0 and 1, got {value!r}")
    return float(value)


def _fraction(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1:
        raise ValueError(f"expected a fraction strictly between 0 and 1, got {value!r}")
    return float(value)


def _rate(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < float("inf"):
        raise ValueError(f"expected a non-negative number of faults per virtual minute, got {value!r}")
    return float(value)


def _one_of(options: tuple[str, ...]) -> Callable[[object], str]:
    def convert(value: object) -> str:
        if value not in options:
            raise ValueError(f"expected one of {', '.join(repr(o) for o in options)}, got {value!r}")
        return value  # type: ignore[return-value]

    return convert


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise ValueError(f"expected a string, got {value!r}")
    return value


def _names(options: tuple[str, ...], what: str) -> Callable[[object], tuple[str, ...]]:
    def convert(value: object) -> tuple[str, ...]:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ValueError(f"expected a list of {what}, got {value!r}")
        for v in value:
            if v not in options:
                raise ValueError(f"expected {what} from: {', '.join(options)}; got unknown {v!r}")
        return tuple(dict.fromkeys(value))

    return convert


# --- loading ------------------------------------------------------------------------------------

_TOP_KEYS = ("name", "description", "run", "model", "workload", "network", "faults", "runs", "invariants", "bugs",
             "steps")


def parse_scenario(doc: dict[str, Any], source: str) -> Scenario:
    r = _Reader(source)
    for key in doc:
        if key not in _TOP_KEYS:
            raise r.fail(_key(key), f"one of the top-level keys {', '.join(_TOP_KEYS)} (unknown key)")
    d = Scenario()

    t = r.table(doc, "run", "run", ("duration", "quiet", "drain_limit", "granularity", "scheduler"))
    run = RunConfig(
        duration=r.get(t, "duration", "run", _positive_duration, d.run.duration),
        quiet=r.get(t, "quiet", "run", _duration, d.run.quiet),
        drain_limit=r.get(t, "drain_limit", "run", _duration, d.run.drain_limit),
        granularity=r.get(t, "granularity", "run", _positive_duration, d.run.granularity),
        scheduler=r.get(t, "scheduler", "run", _one_of(SCHEDULERS), d.run.scheduler),
    )

    t = r.table(doc, "model", "model", tuple(f.name for f in attrs.fields(ModelConfig)))
    limits = d.model.limits
    if "limits" in t:
        raw = t["limits"]
        if not isinstance(raw, dict) or not raw:
            raise r.fail("model.limits", "a table of limit names to capacities, such as { db = 2 }", raw)
        for name, cap in raw.items():
            if not _is_int(cap) or cap < 1:
                raise r.fail(f"model.limits.{_key(name)}", "an integer >= 1", cap)
        limits = tuple(sorted(raw.items()))
    model = ModelConfig(
        limits=limits,
        ttl=r.get(t, "ttl", "model", _positive_duration, d.model.ttl),
        reaper_interval=r.get(t, "reaper_interval", "model", _positive_duration, d.model.reaper_interval),
        renew_fraction=r.get(t, "renew_fraction", "model", _fraction, d.model.renew_fraction),
        renew_attempts=r.get(t, "renew_attempts", "model", _count(1), d.model.renew_attempts),
        retry_after=r.get(t, "retry_after", "model", _positive_duration, d.model.retry_after),
        store_latency=r.get(t, "store_latency", "model", _range, d.model.store_latency),
        resource_contract=r.get(t, "resource_contract", "model", _one_of(CONTRACTS), d.model.resource_contract),
    )

    t = r.table(doc, "workload", "workload", tuple(f.name for f in attrs.fields(WorkloadConfig)))
    workload = WorkloadConfig(
        clients=r.get(t, "clients", "workload", _count(1), d.workload.clients),
        jobs=r.get(t, "jobs", "workload", _count(0), d.workload.jobs),
        limit=r.get(t, "limit", "workload", _one_of(tuple(n for n, _ in limits)), limits[0][0]),
        slots=r.get(t, "slots", "workload", _count(1), d.workload.slots),
        work=r.get(t, "work", "workload", _range, d.workload.work),
        think=r.get(t, "think", "workload", _range, d.workload.think),
        writes=r.get(t, "writes", "workload", _int_range, d.workload.writes),
        write_time=r.get(t, "write_time", "workload", _duration, d.workload.write_time),
        request_timeout=r.get(t, "request_timeout", "workload", _positive_duration, d.workload.request_timeout),
        retries=r.get(t, "retries", "workload", _count(0), d.workload.retries),
        acquire_patience=r.get(t, "acquire_patience", "workload", _duration, d.workload.acquire_patience),
    )
    if workload.slots > dict(limits)[workload.limit]:
        raise r.fail("workload.slots", f"at most the capacity of limit {workload.limit!r} ({dict(limits)[workload.limit]})", workload.slots)

    t = r.table(doc, "network", "network", ("latency", "loss", "duplicate", "delay", "delay_by"))
    network = NetworkConfig(
        latency=r.get(t, "latency", "network", _range, d.network.latency),
        loss=r.get(t, "loss", "network", _probability, d.network.loss),
        duplicate=r.get(t, "duplicate", "network", _probability, d.network.duplicate),
        delay=r.get(t, "delay", "network", _probability, d.network.delay),
        delay_by=r.get(t, "delay_by", "network", _range, d.network.delay_by),
    )

    kinds = tuple(f.name for f in attrs.fields(FaultsConfig))
    t = r.table(doc, "faults", "faults", kinds)
    rates = {}
    for kind in kinds:
        sub = r.table(t, kind, f"faults.{kind}", ("rate", "duration"))
        rates[kind] = FaultRate(
            rate=r.get(sub, "rate", f"faults.{kind}", _rate, 0.0),
            duration=r.get(sub, "duration", f"faults.{kind}", _range, (0, 0)),
        )
    faults = FaultsConfig(**rates)

    t = r.table(doc, "runs", "runs", tuple(f.name for f in attrs.fields(RunsConfig)))
    d_runs = d.runs
    runs = RunsConfig(
        submissions=r.get(t, "submissions", "runs", _count(0), d_runs.submissions),
        workers=r.get(t, "workers", "runs", _count(1), d_runs.workers),
        work=r.get(t, "work", "runs", _range, d_runs.work),
        cancel=r.get(t, "cancel", "runs", _probability, d_runs.cancel),
        cancel_early=r.get(t, "cancel_early", "runs", _probability, d_runs.cancel_early),
        cancelling_timeout=r.get(t, "cancelling_timeout", "runs", _positive_duration, d_runs.cancelling_timeout),
        sweep_interval=r.get(t, "sweep_interval", "runs", _positive_duration, d_runs.sweep_interval),
        redelivery_timeout=r.get(t, "redelivery_timeout", "runs", _positive_duration, d_runs.redelivery_timeout),
        heartbeat_interval=r.get(t, "heartbeat_interval", "runs", _positive_duration, d_runs.heartbeat_interval),
        poll_interval=r.get(t, "poll_interval", "runs", _positive_duration, d_runs.poll_interval),
    )
    if runs.heartbeat_interval >= runs.redelivery_timeout:
        raise r.fail("runs.heartbeat_interval", f"less than runs.redelivery_timeout ({runs.redelivery_timeout}ms)",
                     runs.heartbeat_interval)

    steps = None
    if "steps" in doc:
        raw_steps = doc["steps"]
        if not isinstance(raw_steps, list):
            raise r.fail("steps", "an array of step tables such as { at = '0s', actor = 'c1', action = 'acquire' }", raw_steps)
        parsed = []
        for i, raw in enumerate(raw_steps):
            if not isinstance(raw, dict):
                raise r.fail(f"steps[{i}]", "a table with at, actor and action", raw)
            try:
                parsed.append(step_from_mapping(raw, default_id=i + 1))
            except ValueError as e:
                raise ScenarioError(f"{source}: steps[{i}].{e}") from None
        seen: set[int] = set()
        for i, step in enumerate(parsed):
            if step.id in seen:
                raise r.fail(f"steps[{i}].id", "an id no other step has", step.id)
            seen.add(step.id)
            limit = step.arg("limit")
            if limit is not None and limit not in dict(limits):
                raise r.fail(f"steps[{i}].limit", f"one of the model's limits ({', '.join(n for n, _ in limits)})", limit)
            slots = step.arg("slots")
            if slots is not None and slots > dict(limits)[limit or workload.limit]:  # type: ignore[operator]
                raise r.fail(f"steps[{i}].slots", f"at most the limit's capacity ({dict(limits)[limit or workload.limit]})", slots)
        steps = sort_steps(parsed)

    return Scenario(
        name=r.get(doc, "name", "", _text, Path(source).stem if source != EMBEDDED else DEFAULT_NAME),
        description=r.get(doc, "description", "", _text, ""),
        run=run,
        model=model,
        workload=workload,
        network=network,
        faults=faults,
        runs=runs,
        invariants=r.get(doc, "invariants", "", _names(INVARIANT_IDS, "invariant ids"), INVARIANT_IDS),
        bugs=r.get(doc, "bugs", "", _names(KNOWN_BUGS, "bug slugs"), ()),
        steps=steps,
        source=source,
    )


def load_scenario(path: str | Path | None = None) -> Scenario:
    """Load and validate a scenario file; ``None`` loads the embedded default."""
    if path is None:
        text = resources.files("dst").joinpath("scenarios/default.toml").read_text(encoding="utf-8")
        return parse_scenario(tomllib.loads(text), EMBEDDED)
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ScenarioError(f"{source}: no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ScenarioError(f"{source}: cannot read the file ({type(e).__name__})") from None
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ScenarioError(f"{source}: not valid TOML: {e}") from None
    return parse_scenario(doc, source)
