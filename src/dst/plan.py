"""The one plan format: a run described as timed, readable steps.

A generated run, a hand-written script and a finding all describe a run the same
way: ``t=76s c2 acquire limit=db slots=1 work=30s writes=2``, ``t=1s c1 pause
for=89s``, ``t=10s server restart down=2s``. Each step has an ``id`` that the
keyed random streams use as its key, so deleting one step leaves the draws of the
others unchanged.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Mapping

import attrs

from .faults import FAULT_ACTIONS, FAULTS, fault_of
from .sim.trace import MAX_STEP_ID, parse_key
from .text import format_duration, key_name, parse_duration, shorten, toml_value

# action -> (who may perform it, {argument: kind}); kinds: "duration", "int" (>= 1), "count" (>= 0), "name",
# "key" (a message as the trace names it: 17.3.0), or names between bars ("before|after": one of them). The
# workload's actions, then every fault kind's (dst.faults).
ACTIONS: dict[str, tuple[str, dict[str, str]]] = {
    "acquire": ("client", {"limit": "name", "slots": "int", "work": "duration", "writes": "count"}),
    "serve": ("client", {}),
    "submit": ("user", {"run": "int", "work": "duration"}),
    "cancel": ("user", {"run": "int"}),
    "branch": ("world", {"draw": "int"}),  # see Branch
}
for _kind in FAULTS:
    _who, _args = ACTIONS.get(_kind.action, (_kind.target, {}))
    ACTIONS[_kind.action] = ("client-or-server" if _who != _kind.target else _who,
                             {**_args, **dict(_kind.args), **({_kind.duration_arg: "duration"} if _kind.duration_arg else {}),
                              **({} if _kind.pinned else {"moment": "name"}),  # a scheduled fault can be aimed
                              **({"past": "duration"} if _kind.lasts_past else {})})
ACTIONS = dict(sorted(ACTIONS.items()))

__all__ = ["ACTIONS", "FAULT_ACTIONS", "Branch", "Step", "is_client", "make_step", "sort_steps", "step_from_mapping"]

_CLIENT = re.compile(r"^c[1-9]\d{0,5}$")  # c1 to c999999: a number int() reads, a name a line shows


def is_client(actor: str) -> bool:
    return bool(_CLIENT.match(actor))


@attrs.frozen(order=False, repr=False)
class Step:
    """One timed step of a plan. ``args`` is a sorted tuple of ``(name, value)``. Its ``repr`` is the line a
    scenario's ``steps`` list holds: ``{ id = 3, at = "76s", actor = "c2", action = "acquire", work = "30s" }``."""

    id: int
    at: int
    actor: str
    action: str
    args: tuple[tuple[str, object], ...] = ()

    def arg(self, name: str, default: object = None) -> object:
        for key, value in self.args:
            if key == name:
                return value
        return default

    def with_arg(self, name: str, value: object) -> Step:
        """This step with argument ``name`` set to ``value``."""
        return attrs.evolve(self, args=tuple(sorted({**dict(self.args), name: value}.items())))

    def number(self, name: str, default: int = 0) -> int:
        """An integer argument (a duration in ms, a count): the loader has checked its kind."""
        value = self.arg(name, default)
        assert isinstance(value, int)
        return value

    def text(self, name: str) -> str:
        """A name argument (a message key, a job's action): the loader has checked its kind."""
        value = self.arg(name)
        assert isinstance(value, str)
        return value

    def as_job(self, action: str) -> Step:
        """The same step as a job of ``action`` with no arguments (a restart's ``then``: keyed as this step)."""
        return attrs.evolve(self, action=action, args=())

    def describe(self) -> str:
        parts = [f"t={format_duration(self.at)}", self.actor, self.action]
        kinds = ACTIONS[self.action][1]
        for key, value in self.args:
            shown = format_duration(value) if kinds.get(key) == "duration" else value  # type: ignore[arg-type]
            parts.append(f"{key}={shown}")
        return " ".join(parts)

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"id": self.id, "at": format_duration(self.at), "actor": self.actor, "action": self.action}
        kinds = ACTIONS[self.action][1]
        for key, value in self.args:
            out[key] = format_duration(value) if kinds.get(key) == "duration" else value  # type: ignore[arg-type]
        return out

    def __repr__(self) -> str:
        """The step as a TOML inline table, to paste into a scenario's ``steps``."""
        return toml_value(self.to_dict())

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        """Hypothesis (and IPython) print a step as its ``repr``, not field by field."""
        printer.text(repr(self))


@attrs.frozen
class Branch:
    """Where a run branches off the seed's own: at ``at`` (ms), before anything else due then, every draw the run
    makes from then on (the network's, the store's, the order of ready steps, the service's own ``random``) is
    branch ``draw``'s, and what came before is the seed's own run. A branch is a run of its own, addressed by its
    seed and this, and runs the same whether it was forked from the seed's run at that moment or run from the start.
    In a plan it is a step: ``t=3m3.457s world branch draw=2``."""

    at: int
    draw: int  # 1, 2, ...

    def step(self) -> Step:
        return make_step(0, self.at, "world", "branch", draw=self.draw)

    def __str__(self) -> str:
        """As ``--branch`` takes it: ``183457ms/2``."""
        return f"{format_duration(self.at)}/{self.draw}"

    @classmethod
    def parse(cls, text: str) -> Branch:
        """``AT/DRAW`` (``183457ms/2``, ``3m/1``); raises ``ValueError('expected ...')``."""
        at, _, draw = text.rpartition("/")
        try:
            ms = parse_duration(at)
        except ValueError:
            ms = -1
        if ms < 1 or not re.fullmatch(r"[0-9]{1,9}", draw) or int(draw) < 1:
            raise ValueError(f"expected AT/DRAW, a moment after the start and a draw from 1 (such as 183457ms/2), "
                             f"got {shorten(text)}")
        return cls(ms, int(draw))


def make_step(id: int, at: int, actor: str, action: str, **args: object) -> Step:
    return Step(id, at, actor, action, tuple(sorted(args.items())))


def step_from_mapping(data: Mapping[str, object], default_id: int) -> Step:
    """Build a step from a TOML table; raises ``ValueError('key: expected ...')``."""
    known = {"id", "at", "actor", "action"}
    action = data.get("action")
    if not isinstance(action, str) or action not in ACTIONS:
        raise ValueError(f"action: expected one of {', '.join(sorted(ACTIONS))}, got {shorten(action)}")
    who, kinds = ACTIONS[action]
    actor = data.get("actor")
    if who in ("user", "net", "world"):
        if actor != who:
            whom = {"user": "who submits and cancels runs", "net": "the network", "world": "the run's draws"}[who]
            raise ValueError(f"actor: expected {who!r} ({whom}), got {shorten(actor)}")
    else:
        clients, server = who in ("client", "client-or-server"), who in ("server", "client-or-server")
        if not isinstance(actor, str) or not ((clients and is_client(actor)) or (server and actor == "server")):
            want = " or ".join((["a client name such as 'c1'"] if clients else []) + (["'server'"] if server else []))
            raise ValueError(f"actor: expected {want}, got {shorten(actor)}")
    try:
        at = parse_duration(data.get("at"))
    except ValueError as e:
        raise ValueError(f"at: {e}") from None
    step_id = data.get("id", default_id)
    if not isinstance(step_id, int) or isinstance(step_id, bool) or not 0 <= step_id <= MAX_STEP_ID:
        raise ValueError(f"id: expected an integer from 0 to {MAX_STEP_ID:,}, got {shorten(step_id)}")
    args: dict[str, object] = {}
    for key, value in data.items():
        if key in known:
            continue
        kind = kinds.get(key)
        if kind is None:
            allowed = ", ".join(sorted(kinds)) or "none"
            raise ValueError(f"{key_name(key)}: not an argument of {action} (arguments: {allowed})")
        if kind == "duration":
            try:
                args[key] = parse_duration(value)
            except ValueError as e:
                raise ValueError(f"{key}: {e}") from None
        elif kind == "key":
            try:
                parse_key(value)
            except ValueError:
                raise ValueError(f"{key}: expected a key as the trace writes it, such as '17.3.0' or 'reaper.4.0', "
                                 f"got {shorten(value)}") from None
            args[key] = value
        elif kind in ("int", "count"):
            least = 1 if kind == "int" else 0
            if not isinstance(value, int) or isinstance(value, bool) or value < least:
                raise ValueError(f"{key}: expected an integer >= {least}, got {shorten(value)}")
            args[key] = value
        elif "|" in kind:
            choices = kind.split("|")
            if value not in choices:
                raise ValueError(f"{key}: expected {' or '.join(map(repr, choices))}, got {shorten(value)}")
            args[key] = value
        else:
            if not isinstance(value, str) or not value:
                raise ValueError(f"{key}: expected a name, got {shorten(value)}")
            args[key] = value
    step = Step(step_id, at, actor, action, tuple(sorted(args.items())))
    fault = fault_of(step)
    if fault is not None and fault.pinned:  # a pinned fault is nothing without what it names
        needs = [name for name, _ in fault.args] + ([fault.duration_arg] if fault.duration_arg else [])
        for key in needs:
            if key not in args:
                listed = ", ".join(needs[:-1]) + " and " + needs[-1] if len(needs) > 1 else needs[0]
                raise ValueError(f"{key}: missing: a {action} step needs {listed}")
    return step


def sort_steps(steps: Iterable[Step]) -> tuple[Step, ...]:
    """Plans run in time order; steps at the same time in id order."""
    return tuple(sorted(steps, key=lambda s: (s.at, s.id)))
