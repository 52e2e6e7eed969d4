"""Reading a scenario: a TOML document (a file, a finding, a scenario shipped with dst) checked key by key
into a :class:`Scenario`. Every mistake is a :class:`ScenarioError` of one line naming the file, the
key path and what was expected; the command line prints it and exits 2.
"""

from __future__ import annotations

import os
import tomllib
from importlib import resources
from pathlib import Path
from typing import Any, Callable

import attrs

from ..files import FileError, read_toml, where
from ..invariants import INVARIANT_IDS
from ..models import DEFAULT_IMPL, ModelError, resolve
from ..plan import Step, sort_steps, step_from_mapping
from ..sut import Model, OptionError
from ..text import key_name, shorten
from .schema import (DEFAULT_NAME, EMBEDDED, NAME, SECTIONS, FaultRate, FaultsConfig, InnerValueError, ModelConfig,
                     RunConfig, RunsConfig, Scenario, ScenarioError, WorkloadConfig, kind_of)
from .write import scenario_to_doc


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
        at = f"{path}.{name}" if path else name
        try:
            return read(doc[name])
        except InnerValueError as e:
            raise ScenarioError(f"{self.where}: {at}.{e.key}: {e}") from None
        except ValueError as e:
            raise ScenarioError(f"{self.where}: {at}: {e}") from None

    def section(self, doc: dict[str, Any], path: str, cls: type, defaults: Any = None) -> Any:
        """A config section, every key read by its declared kind (missing keys from ``defaults``, if given)."""
        fields = attrs.fields(cls)
        t = self.table(doc, path.rsplit(".", 1)[-1], path, tuple(f.name for f in fields))
        return cls(**{f.name: self.value(t, f.name, path, kind_of(f).read,
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
        values = {f.name: self.value(t, f.name, "model", kind_of(f).read, f.default)
                  for f in attrs.fields(ModelConfig) if f.name != "options"}
        options = None
        if model.options is not None:
            read = {f.name: self.value(t, f.name, "model", kind_of(f).read, f.default) for f in fields}
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
    sections = {name: r.section(doc, name, cls) for name, cls in SECTIONS.items()}
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


def shipped_names(impl: str = DEFAULT_IMPL) -> tuple[str, ...]:
    """The scenarios shipped in the folder a model names (:attr:`dst.sut.Model.scenarios`, ``"package:folder"``),
    by name, sorted; none when it names no folder."""
    folder = resolve(impl).scenarios
    if folder is None:
        return ()
    package, _, path = folder.partition(":")
    files = resources.files(package).joinpath(path)
    return tuple(sorted(p.name.removesuffix(".toml") for p in files.iterdir() if p.name.endswith(".toml")))


def load_shipped(name: str, impl: str = DEFAULT_IMPL) -> Scenario:
    """``<name>.toml`` of the model's scenario folder, run on that model whatever model the file names."""
    package, _, path = (resolve(impl).scenarios or "").partition(":")
    if (package, path) == ("dst", "scenarios"):
        return load_scenario(name, model=impl)  # dst's own: named as the command line names them
    file = resources.files(package).joinpath(path, f"{name}.toml")
    text = file.read_text(encoding="utf-8")
    return parse_scenario(tomllib.loads(text), _as_given(file, f"{path or package}/{name}.toml"), model=impl)


def _as_given(file: Any, fallback: str) -> str:
    """A shipped scenario's file as the command line can name it from the working folder (its path relative to it,
    or whole when it lies outside), so a finding's or a campaign's ``dst run`` command loads that very file; a file
    inside an archive has no path, and keeps its name within the package."""
    if not isinstance(file, Path):
        return fallback
    whole = os.path.abspath(file)
    try:
        near = os.path.relpath(whole)
    except ValueError:  # another drive
        return whole
    return whole if near.startswith(os.pardir) else near


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


def dropped(scenario: Scenario, path: str | Path | None) -> tuple[str, ...]:
    """What the scenario file at ``path`` sets that ``scenario`` (loaded from it on another model) does not
    have, because the other model has no such bug or option: ``bug double-release``, ``option acquire_wait``."""
    try:
        own = load_scenario(path)
    except (ScenarioError, ModelError):  # its own model is gone: nothing to compare with
        return ()
    kept = _options_of(scenario.model.impl)
    return (*(f"bug {slug}" for slug in own.bugs if slug not in scenario.bugs),
            *(f"option {name}" for name in _options_set(own) if name not in kept))


def scenario_from_doc(doc: dict[str, Any], source: str, model: str | None = None) -> Scenario:
    """A scenario from a TOML document, run on ``model`` instead of its own if given. The document's own model is
    then never imported (it may be gone, slow, or do anything as it is imported): its keys are read as the new
    model's, less the options and bugs the new one does not have (:func:`dropped` says which)."""
    if model is None:
        return parse_scenario(doc, source)
    section = doc.get("model")
    if isinstance(section, dict):
        kept = {f.name for f in attrs.fields(ModelConfig)} | _options_of(model)
        doc = {**doc, "model": {k: v for k, v in section.items() if k in kept}}
    if isinstance(doc.get("bugs"), list):
        known = {bug.slug for bug in resolve(model).bugs}
        doc = {**doc, "bugs": [slug for slug in doc["bugs"] if slug in known]}
    return parse_scenario(doc, source, model=model)


def with_model(scenario: Scenario, model: str) -> Scenario:
    """The scenario run on another model: the options it sets apart from its model's defaults carry over
    where the new model has them; the rest take the new model's defaults. The bugs it switches on and the
    options it sets that the new model does not have are dropped (a catalogue scenario run against a model of
    one's own tests whether that model has the bug): :func:`dropped` says which."""
    if model == scenario.model.impl:
        return scenario
    doc = scenario_to_doc(scenario)
    if "bugs" in doc:
        known = {bug.slug for bug in resolve(model).bugs}
        doc["bugs"] = [slug for slug in doc["bugs"] if slug in known]
    for name in _options_set(scenario):
        if name not in _options_of(model):
            del doc["model"][name]
    defaults = attrs.evolve(scenario.model, options=None).settings()
    if defaults is not None:
        for f in attrs.fields(type(defaults)):
            if f.name in doc["model"] and getattr(defaults, f.name) == getattr(scenario.model.settings(), f.name):
                del doc["model"][f.name]
    return parse_scenario(doc, scenario.source, model=model)


def _options_set(scenario: Scenario) -> list[str]:
    """The model options ``scenario`` sets apart from its model's defaults."""
    given, defaults = scenario.model.settings(), attrs.evolve(scenario.model, options=None).settings()
    if given is None:
        return []
    return [f.name for f in attrs.fields(type(given)) if getattr(given, f.name) != getattr(defaults, f.name)]


def _options_of(model: str) -> set[str]:
    cls = resolve(model).options
    return set() if cls is None else {f.name for f in attrs.fields(cls)}
