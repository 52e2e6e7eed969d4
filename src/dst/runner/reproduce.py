"""The ``dst run`` command line that runs a seed again: what ``dst run``, ``dst fuzz`` and a result print."""

from __future__ import annotations

import shlex
from typing import Iterable

import attrs

from ..models import ModelError
from ..plan import Branch
from ..scenario import EMBEDDED, Scenario, ScenarioError, load_scenario
from .swarm import ENABLE, WORLDS, aimed, enable, swarm, world


def command(seed: int, scenario_arg: str | None, bugs: Iterable[str], use_swarm: bool,
            model: str | None = None, no_bugs: bool = False, aim: bool = False, enable: Iterable[str] = (),
            world: str | None = None, branch: Branch | None = None) -> str:
    """``dst run --seed N`` with the flags given, as a shell takes it (a path with a space is quoted): the
    scenario as the command line names it (None: the embedded default), the model it runs instead of the
    file's, the bugs it turns on besides the file's (with ``no_bugs``, instead of them), the fault kinds it
    turns on that the file leaves off, whether its faults are aimed, the smaller world it runs in, and where it
    branches off the seed's own run."""
    return shlex.join(arguments(seed, scenario_arg, bugs, use_swarm, model, no_bugs, aim, enable, world, branch))


def arguments(seed: int, scenario_arg: str | None, bugs: Iterable[str], use_swarm: bool,
              model: str | None = None, no_bugs: bool = False, aim: bool = False,
              enable: Iterable[str] = (), world: str | None = None, branch: Branch | None = None) -> list[str]:
    """:func:`command` as the list of its words."""
    parts = ["dst", "run", "--seed", str(seed)]
    if scenario_arg:
        parts += ["--scenario", scenario_arg]
    if model:
        parts += ["--model", model]
    if no_bugs:
        parts.append("--no-bugs")
    for slug in bugs:
        parts += ["--bug", slug]
    for kind in enable:
        parts += ["--enable", kind]
    if aim:
        parts.append("--aim")
    if world is not None:
        parts += ["--world", world]
    if use_swarm:
        parts.append("--swarm")
    if branch is not None:
        parts += ["--branch", str(branch)]
    return parts


def command_name(scenario: Scenario) -> str | None:
    """How the command line names where ``scenario`` was loaded from: a file's path, a shipped scenario's name,
    or None for the embedded default (nor a source of its own: see :func:`reproduce`)."""
    source = scenario.source
    if source == EMBEDDED:
        return None
    if source.startswith("<embedded ") and source.endswith(">"):
        return source[len("<embedded "):-1]
    return source


def reproduce(scenario: Scenario, seed: int) -> str | None:
    """The ``dst run`` command that runs seed ``seed`` of ``scenario`` again (with ``--swarm`` when ``scenario``
    is the seed's swarm of the one loaded), or None when no command line can: a negative seed, a scenario
    built or changed in code, or one whose file has changed or gone since it was loaded."""
    if seed < 0:
        return None
    branch = scenario.branch
    scenario = attrs.evolve(scenario, branch=None)  # the seed's own run: the branch is a flag of its command
    name = command_name(scenario)
    try:
        try:
            own: str | None = load_scenario(name).model.impl
        except (ScenarioError, ModelError):  # the file's own model is gone: the command must name one
            own = None
        model = None if own == scenario.model.impl else scenario.model.impl
        on_disk = load_scenario(name, model=model)
    except (ScenarioError, ModelError):
        return None
    no_bugs = bool(set(on_disk.bugs) - set(scenario.bugs))  # a shipped scenario the default campaign ran correct
    extra = list(scenario.bugs) if no_bugs else [slug for slug in scenario.bugs if slug not in on_disk.bugs]
    on_disk = attrs.evolve(on_disk, bugs=scenario.bugs)
    size = next((size for size in WORLDS if scenario.name.endswith(f", {size} world")), None)
    kinds = _enabled(scenario.name.removesuffix(f", {size} world"), on_disk.name)
    shape = on_disk
    for kind in kinds:
        shape = enable(shape, kind)
    for aim, loaded in ((False, shape), (True, aimed(shape))):
        sized = loaded if size is None else world(loaded, size)
        for use_swarm, ran in ((False, sized), (True, swarm(sized, seed))):
            if ran == scenario:
                return command(seed, name, extra, use_swarm, model, no_bugs, aim, kinds, size, branch)
    return None


def _enabled(name: str, loaded: str) -> tuple[str, ...]:
    """The fault kinds a scenario named ``name`` turned on (``--enable``) over the one named ``loaded``, in order:
    each says so in the name (``default, with clock_skew``)."""
    rest, kinds = name.removesuffix(", aimed"), []
    while rest != loaded:
        kind = next((k for k in ENABLE if rest.endswith(f", with {k}")), None)
        if kind is None:
            return ()
        kinds.append(kind)
        rest = rest.removesuffix(f", with {kind}")
    return tuple(reversed(kinds))
