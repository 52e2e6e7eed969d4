"""The keys of a scenario file and the frozen :class:`Scenario` they make.

Every key is declared once, with its default and its *kind* (a duration, a range, a probability ...):
the kind both checks a value on the way in (:mod:`dst.scenario.read`) and writes it back out
(:mod:`dst.scenario.write`), so a finding can embed its whole scenario and be read again exactly.
The schema is documented in ``docs/scenarios.md``.
"""

from __future__ import annotations

from typing import Any, Callable

import attrs

from ..errors import UserError
from ..faults import SCHEDULED
from ..sim.schedule import STRATEGIES
from ..invariants import INVARIANT_IDS
from ..models import DEFAULT_IMPL, ModelError, resolve
from ..plan import Branch, Step
from ..sut import Model
from ..text import format_duration, key_name, parse_duration, shorten

SCHEDULERS = tuple(STRATEGIES)  # "uniform", "pct": dst.sim.schedule
DEFAULT_NAME = "default"
EMBEDDED = "<embedded default>"

Range = tuple[int, int]


class ScenarioError(UserError):
    """A scenario file is malformed; ``str()`` is the one line to show the user."""


class InnerValueError(ValueError):
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
            raise InnerValueError(key_name(name), f"expected an integer from 1 to {MAX_COUNT:,}, got {shorten(cap)}")
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


def kind_of(field: Any) -> Kind:
    """How a field is read and written: a harness key's own kind, or a model option's declared one."""
    kind: Kind | None = field.metadata.get("kind")
    if kind is not None:
        return kind
    name = field.metadata.get("dst.kind")
    if name == "choice":
        return _one_of(field.metadata.get("dst.choices", ()))
    if name not in _OPTION_KINDS:
        raise ModelError(f"the model's option {field.name!r}: unknown kind {name!r} (known: choice, "
                     f"{', '.join(_OPTION_KINDS)})")
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
    # A run past this ends unjudged (over budget). Capped: a run keeps its trace in memory, a few hundred bytes
    # an event, so a billion would take the machine's memory before the budget ended it.
    max_events: int = key(2_000_000, _count(1, 20_000_000))
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
    # Probability that a connection store's connection (Redis) is reset at a server round trip, before or after the
    # store ran the write: the client reads the end of the stream, and its retry sends the command again.
    store_reset: float = key(0.0, PROBABILITY)
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
    # Connections only (HTTP): a reset, and a retrying proxy in front of the server (dst.sim.network).
    reset: float = key(0.0, PROBABILITY)
    proxy_retry: float = key(0.0, PROBABILITY)
    proxy_timeout: Range = key((1_000, 60_000), RANGE)


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
    at a sensitive moment the model marks (the rest strike whenever they fall). ``past``: an aimed one that
    strikes a moment naming a deadline (the holder's expiry as it reckons it) lasts until this long past it
    (a pause, a partition, a server pause; [0, 0]: as ``duration`` says)."""

    rate: float = key(0.0, RATE)
    duration: Range = key((0, 0), RANGE)
    targeted: float = key(0.0, PROBABILITY)
    past: Range = key((0, 0), RANGE)


class _Faults:
    def kinds(self) -> tuple[tuple[str, FaultRate], ...]:
        """Each fault kind's name and its rate, in the registry's order."""
        return tuple((f.name, getattr(self, f.name)) for f in attrs.fields(type(self)))  # type: ignore[arg-type]


# One FaultRate per scheduled kind in the fault registry (dst.faults), in its order.
FaultsConfig: Any = attrs.make_class("FaultsConfig", {kind.name: attrs.field(default=FaultRate(duration=kind.duration))
                                                      for kind in SCHEDULED},
                                     bases=(_Faults,), frozen=True)
FaultsConfig.__module__ = __name__


SECTIONS: dict[str, type] = {"run": RunConfig, "workload": WorkloadConfig, "network": NetworkConfig, "runs": RunsConfig}


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
    # A variation, not a key of the file: the run branches there (its plan gets the branch's step, which a scripted
    # scenario's steps hold instead).
    branch: Branch | None = None


def scripted(scenario: Scenario, plan: tuple[Step, ...]) -> Scenario:
    """The scenario as an exact script of ``plan``: generation settings that no longer matter are zeroed,
    so the file reads as what it is."""
    faults = attrs.evolve(scenario.faults, **{k: attrs.evolve(f, rate=0.0) for k, f in scenario.faults.kinds()})
    clients = max([int(s.actor[1:]) for s in plan if s.actor.startswith("c")] + [1])
    return attrs.evolve(scenario, steps=plan, faults=faults, branch=None,
                        workload=attrs.evolve(scenario.workload, clients=clients, jobs=0),
                        runs=attrs.evolve(scenario.runs, submissions=0))
