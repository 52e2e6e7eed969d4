"""Scenario files: loading, defaults, overrides, and one clear line for every user error.

The contract under test (docs/cli.md, "Exit codes"): a bad scenario file gives ONE line that
starts with the file, names the key path and says what was expected; the CLI prints that line and
exits 2, never a traceback.
"""

from __future__ import annotations

import datetime as dt
import math
from importlib import resources
from pathlib import Path
from typing import Any

import attrs
import pytest
import tomllib
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from dst.cli import main
from dst.reference import ReferenceOptions
from dst.reference.bugs import KNOWN_BUGS
from dst.plan import Step
from dst.files import where
from dst.runner import run
from dst.scenario import (
    EMBEDDED,
    INVARIANT_IDS,
    FaultRate,
    FaultsConfig,
    ModelConfig,
    NetworkConfig,
    RunConfig,
    Scenario,
    ScenarioError,
    WorkloadConfig,
    load_scenario,
)

REPO = Path(__file__).resolve().parents[1]


def write(tmp_path: Path, text: str, name: str = "scenario.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def assert_one_line(message: str) -> None:
    assert "\n" not in message and len(message.splitlines()) == 1, f"not one line: {message!r}"


# --- the embedded default ----------------------------------------------------------------------

def test_embedded_default_loads_with_the_documented_values() -> None:
    s = load_scenario()
    assert s.source == EMBEDDED
    assert s.name == "default"
    assert s.steps is None  # generated from the seed
    assert s.bugs == ()
    assert s.invariants == INVARIANT_IDS
    assert s.run == RunConfig(duration=600_000, quiet=120_000, drain_limit=600_000)
    assert s.model == ModelConfig(impl="dst.reference:model", limits=(("db", 2),), store_latency=(1, 20))
    assert s.model.settings() == ReferenceOptions(
        ttl=60_000, reaper_interval=15_000, renew_fraction=0.75, renew_attempts=3, retry_after=1_000,
        resource_contract="token", cancelling_timeout=300_000, sweep_interval=20_000, redelivery_timeout=300_000,
        heartbeat_interval=30_000, poll_interval=5_000)
    assert s.workload == WorkloadConfig(clients=4, jobs=6, limit="db", slots=1, work=(5_000, 100_000), think=(0, 20_000),
                                        writes=(1, 4), request_timeout=2_000, retries=3, acquire_patience=120_000)
    assert s.network == NetworkConfig(latency=(1, 50), loss=0.01, duplicate=0.01)
    assert s.faults == FaultsConfig(
        crash=FaultRate(0.05, (0, 0)),
        restart=FaultRate(0.1, (0, 0)),
        pause=FaultRate(0.3, (1_000, 90_000)),
        partition=FaultRate(0.2, (1_000, 60_000)),
        server_restart=FaultRate(0.05, (0, 5_000)),
    )


def test_repo_default_toml_is_the_embedded_file() -> None:
    embedded = resources.files("dst").joinpath("scenarios/default.toml").read_bytes()
    at_root = (REPO / "scenarios" / "default.toml").read_bytes()
    assert at_root == embedded, "scenarios/default.toml and src/dst/scenarios/default.toml have drifted apart"


def test_loading_the_repo_default_by_path_gives_the_embedded_scenario() -> None:
    path = REPO / "scenarios" / "default.toml"
    from_file = load_scenario(path)
    assert from_file.source == str(path)
    assert attrs.evolve(from_file, source=EMBEDDED) == load_scenario()


def test_scenario_is_frozen() -> None:
    s = load_scenario()
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        s.name = "other"  # type: ignore[misc]
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        s.model.limits = ()  # type: ignore[misc]


# --- minimal and full files --------------------------------------------------------------------

def test_empty_file_loads_with_defaults_named_after_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, "", "minimal.toml")
    s = load_scenario(path)
    assert s == attrs.evolve(Scenario(), name="minimal", source=str(path))
    assert s.workload.limit == "db"
    assert s.steps is None


def test_comment_only_file_is_the_same_as_an_empty_one(tmp_path: Path) -> None:
    a = load_scenario(write(tmp_path, "", "a.toml"))
    b = load_scenario(write(tmp_path, "# nothing to see\n\n", "a2.toml"))
    assert attrs.evolve(b, name="a", source=a.source) == a


def test_load_accepts_str_and_path(tmp_path: Path) -> None:
    path = write(tmp_path, 'name = "x"\n')
    assert load_scenario(str(path)) == load_scenario(path)


FULL = """\
name = "override"
description = "every key set"
invariants = ["capacity", "fenced-writes", "capacity"]
{bugs}

[run]
duration = "90s"
quiet = 30                 # a bare number is seconds
drain_limit = "1.5m"

[model]
limits = {{ db = 3, cache = 1 }}
ttl = "250ms"
reaper_interval = 2.5
renew_fraction = 0.5
renew_attempts = 5
retry_after = "2s"
store_latency = ["2ms", "30ms"]
resource_contract = "token-and-lease"

[workload]
clients = 7
jobs = 0
limit = "db"
slots = 3
work = ["1s", "2s"]
think = "3s"
writes = [2, 5]
request_timeout = "500ms"
retries = 0
acquire_patience = "1h"

[network]
latency = ["5ms", "7ms"]
loss = 0
duplicate = 1

[faults]
crash = {{ rate = 0.5 }}
restart = {{ rate = 1, duration = "4s" }}
pause = {{ rate = 2.5, duration = ["1s", "2s"] }}
partition = {{ rate = 0, duration = [0, 60] }}
server_restart = {{ rate = 0.25, duration = ["0s", "5s"] }}
"""


def test_every_key_overridden(tmp_path: Path) -> None:
    bugs = KNOWN_BUGS[:2]
    path = write(tmp_path, FULL.format(bugs=f"bugs = {list(bugs)!r}".replace("'", '"')))
    s = load_scenario(path)
    assert s == Scenario(
        name="override",
        description="every key set",
        run=RunConfig(duration=90_000, quiet=30_000, drain_limit=90_000),
        model=ModelConfig(limits=(("cache", 1), ("db", 3)), store_latency=(2, 30), options=ReferenceOptions(
            ttl=250, reaper_interval=2_500, renew_fraction=0.5, renew_attempts=5, retry_after=2_000,
            resource_contract="token-and-lease")),
        workload=WorkloadConfig(clients=7, jobs=0, limit="db", slots=3, work=(1_000, 2_000), think=(3_000, 3_000),
                                writes=(2, 5), request_timeout=500, retries=0, acquire_patience=3_600_000),
        network=NetworkConfig(latency=(5, 7), loss=0.0, duplicate=1.0),
        faults=FaultsConfig(
            crash=FaultRate(0.5, (0, 0)),
            restart=FaultRate(1.0, (4_000, 4_000)),
            pause=FaultRate(2.5, (1_000, 2_000)),
            partition=FaultRate(0.0, (0, 60_000)),
            server_restart=FaultRate(0.25, (0, 5_000)),
        ),
        invariants=("capacity", "fenced-writes"),  # de-duplicated, order kept
        bugs=tuple(bugs),
        steps=None,
        source=str(path),
    )
    assert dict(s.model.limits)["cache"] == 1


def test_workload_limit_defaults_to_the_first_limit_by_name(tmp_path: Path) -> None:
    s = load_scenario(write(tmp_path, "[model]\nlimits = { zeta = 1, alpha = 4 }\n"))
    assert s.model.limits == (("alpha", 4), ("zeta", 1))
    assert s.workload.limit == "alpha"


def test_slots_may_equal_the_chosen_limits_capacity(tmp_path: Path) -> None:
    s = load_scenario(write(tmp_path, '[model]\nlimits = { a = 1, b = 3 }\n[workload]\nlimit = "b"\nslots = 3\n'))
    assert (s.workload.limit, s.workload.slots) == ("b", 3)


@pytest.mark.parametrize(("value", "ms"), [
    ('"60s"', 60_000),
    ('"250ms"', 250),
    ('"0.25s"', 250),
    ('"1.5m"', 90_000),
    ('"2h"', 7_200_000),
    ("60", 60_000),      # bare numbers are seconds
    ("1.5", 1_500),
    ("0.001", 1),
])
def test_duration_forms(tmp_path: Path, value: str, ms: int) -> None:
    assert load_scenario(write(tmp_path, f"[model]\nttl = {value}\n")).model.settings().ttl == ms


@pytest.mark.parametrize(("value", "expected"), [
    ('["1s", "2s"]', (1_000, 2_000)),
    ('["1ms", "1ms"]', (1, 1)),
    ("[1, 2]", (1_000, 2_000)),
    ('"3ms"', (3, 3)),      # a single duration is a degenerate range
    ('["0s", "1m"]', (0, 60_000)),
])
def test_range_forms(tmp_path: Path, value: str, expected: tuple[int, int]) -> None:
    assert load_scenario(write(tmp_path, f"[network]\nlatency = {value}\n")).network.latency == expected


# --- validation: one line naming the file, the key and what was expected -------------------------

STEP_OK = '{ at = "0s", actor = "c1", action = "acquire" }'


def steps(bad: str) -> str:
    """A steps array whose SECOND entry (index 1) is ``bad``."""
    return f"steps = [ {STEP_OK}, {bad} ]\n"


# (toml text, key path named in the message, fragment saying what was expected)
MALFORMED = [
    # top level
    pytest.param("colour = 1\n", "colour", "one of the top-level keys", id="unknown-top-level-key"),
    pytest.param("name = 5\n", "name", "expected a string, got 5", id="name-not-a-string"),
    pytest.param("description = [1]\n", "description", "expected a string", id="description-not-a-string"),
    pytest.param("run = 5\n", "run", "expected a table, got 5", id="run-not-a-table"),
    pytest.param('faults = "none"\n', "faults", "expected a table", id="faults-not-a-table"),
    # [run]
    pytest.param('[run]\ndurration = "1s"\n', "run.durration", "one of the keys duration, quiet, drain_limit",
                 id="run-unknown-key"),
    pytest.param('[run]\nduration = "0s"\n', "run.duration", "expected a duration above zero", id="run-duration-zero"),
    pytest.param('[run]\nduration = "-5s"\n', "run.duration", "expected a duration such as", id="run-duration-negative-str"),
    pytest.param("[run]\nquiet = -1\n", "run.quiet", "expected a non-negative", id="run-quiet-negative"),
    pytest.param("[run]\ndrain_limit = true\n", "run.drain_limit", "expected a duration", id="run-drain-bool"),
    pytest.param('[run]\nduration = "10 parsecs"\n', "run.duration", "expected a duration such as '60s'",
                 id="run-duration-unit"),
    pytest.param('[run]\nduration = "0.5ms"\n', "run.duration", "whole number of milliseconds", id="run-duration-sub-ms"),
    # [model]
    pytest.param('[model]\ntll = "60s"\n', "model.tll", "one of the keys impl, limits, store_latency, store_slow, store_slow_by, store_reset, ttl", id="model-unknown-key"),
    pytest.param('[model]\nttl = "abc"\n', "model.ttl", "expected a duration such as '60s' or '250ms', got 'abc'",
                 id="model-ttl-garbage"),
    pytest.param('[model]\nttl = "60 sec"\n', "model.ttl", "expected a duration", id="model-ttl-bad-unit"),
    pytest.param("[model]\nttl = 0\n", "model.ttl", "expected a duration above zero", id="model-ttl-zero"),
    pytest.param("[model]\nttl = -60\n", "model.ttl", "expected a non-negative", id="model-ttl-negative"),
    pytest.param("[model]\nttl = [1, 2]\n", "model.ttl", "expected a duration", id="model-ttl-list"),
    pytest.param('[model]\nreaper_interval = "0ms"\n', "model.reaper_interval", "above zero", id="model-reaper-zero"),
    pytest.param("[model]\nrenew_fraction = 1.0\n", "model.renew_fraction", "strictly between 0 and 1",
                 id="renew-fraction-one"),
    pytest.param("[model]\nrenew_fraction = 0\n", "model.renew_fraction", "strictly between 0 and 1",
                 id="renew-fraction-zero"),
    pytest.param("[model]\nrenew_fraction = 1.5\n", "model.renew_fraction", "strictly between 0 and 1",
                 id="renew-fraction-above"),
    pytest.param("[model]\nrenew_fraction = -0.1\n", "model.renew_fraction", "strictly between 0 and 1",
                 id="renew-fraction-negative"),
    pytest.param('[model]\nrenew_fraction = "0.5"\n', "model.renew_fraction", "strictly between 0 and 1",
                 id="renew-fraction-string"),
    pytest.param("[model]\nrenew_fraction = true\n", "model.renew_fraction", "strictly between 0 and 1",
                 id="renew-fraction-bool"),
    pytest.param("[model]\nrenew_attempts = 0\n", "model.renew_attempts", "expected an integer from 1 to 1,000,000",
                 id="renew-attempts-zero"),
    pytest.param("[model]\nrenew_attempts = 2.5\n", "model.renew_attempts", "expected an integer from 1 to 1,000,000",
                 id="renew-attempts-float"),
    pytest.param("[model]\nretry_after = [1, 2]\n", "model.retry_after", "expected a duration", id="retry-after-list"),
    pytest.param('[model]\nstore_latency = ["20ms", "1ms"]\n', "model.store_latency", "low <= high",
                 id="store-latency-reversed"),
    pytest.param('[model]\nstore_latency = ["1ms"]\n', "model.store_latency", "[low, high]", id="store-latency-short"),
    pytest.param('[model]\nstore_latency = ["1ms", "2ms", "3ms"]\n', "model.store_latency", "[low, high]",
                 id="store-latency-long"),
    pytest.param('[model]\nstore_latency = ["a", "b"]\n', "model.store_latency", "expected a duration",
                 id="store-latency-garbage"),
    pytest.param('[model]\nresource_contract = "lease"\n', "model.resource_contract",
                 "expected one of 'token', 'token-and-lease', got 'lease'", id="resource-contract-unknown"),
    pytest.param("[model]\nlimits = 3\n", "model.limits", "a table of limit names to capacities", id="limits-not-table"),
    pytest.param("[model]\nlimits = {}\n", "model.limits", "a table of limit names to capacities", id="limits-empty"),
    pytest.param("[model]\nlimits = { db = 0 }\n", "model.limits.db", "expected an integer from 1 to 1,000,000, got 0",
                 id="limit-capacity-zero"),
    pytest.param('[model]\nlimits = { db = "2" }\n', "model.limits.db", "expected an integer from 1 to 1,000,000",
                 id="limit-capacity-string"),
    pytest.param("[model]\nlimits = { db = 1.5 }\n", "model.limits.db", "expected an integer from 1 to 1,000,000",
                 id="limit-capacity-float"),
    # [workload]
    pytest.param("[workload]\nclient = 2\n", "workload.client", "one of the keys clients, jobs", id="workload-unknown-key"),
    pytest.param("[workload]\nclients = 0\n", "workload.clients", "expected an integer from 1 to 10,000, got 0", id="clients-zero"),
    pytest.param('[workload]\nclients = "4"\n', "workload.clients", "expected an integer from 1 to 10,000", id="clients-string"),
    pytest.param("[workload]\nclients = true\n", "workload.clients", "expected an integer from 1 to 10,000", id="clients-bool"),
    pytest.param("[workload]\njobs = -1\n", "workload.jobs", "expected an integer from 0 to 1,000,000", id="jobs-negative"),
    pytest.param('[workload]\nlimit = "cache"\n', "workload.limit", "expected one of 'db', got 'cache'",
                 id="workload-limit-unknown"),
    pytest.param('[model]\nlimits = { a = 1 }\n[workload]\nlimit = "db"\n', "workload.limit", "expected one of 'a'",
                 id="workload-limit-not-in-own-limits"),
    pytest.param("[workload]\nslots = 3\n", "workload.slots", "at most the capacity of limit 'db' (2)",
                 id="slots-above-capacity"),
    pytest.param('[model]\nlimits = { a = 5, b = 1 }\n[workload]\nlimit = "b"\nslots = 2\n', "workload.slots",
                 "at most the capacity of limit 'b' (1)", id="slots-above-chosen-limit"),
    pytest.param("[workload]\nslots = 0\n", "workload.slots", "expected an integer from 1 to 1,000,000", id="slots-zero"),
    pytest.param('[workload]\nwork = ["100s", "5s"]\n', "workload.work", "low <= high", id="work-reversed"),
    pytest.param('[workload]\nthink = "-1s"\n', "workload.think", "expected a duration", id="think-negative"),
    pytest.param("[workload]\nwrites = [3, 1]\n", "workload.writes", "low <= high", id="writes-reversed"),
    pytest.param("[workload]\nwrites = -1\n", "workload.writes", "an integer from 0 to 1,000,000 or [low, high]", id="writes-negative"),
    pytest.param('[workload]\nwrites = "2"\n', "workload.writes", "an integer from 0 to 1,000,000 or [low, high]", id="writes-string"),
    pytest.param("[workload]\nwrites = [1, 2.5]\n", "workload.writes", "integers from 0 to 1,000,000 with low <= high", id="writes-float"),
    pytest.param('[workload]\nrequest_timeout = "0ms"\n', "workload.request_timeout", "above zero",
                 id="request-timeout-zero"),
    pytest.param("[workload]\nretries = -1\n", "workload.retries", "expected an integer from 0 to 1,000,000", id="retries-negative"),
    pytest.param('[workload]\nacquire_patience = "soon"\n', "workload.acquire_patience", "expected a duration",
                 id="patience-garbage"),
    # [network]
    pytest.param('[network]\njitter = "1ms"\n', "network.jitter", "one of the keys latency, loss, duplicate",
                 id="network-unknown-key"),
    pytest.param("[network]\nloss = 1.5\n", "network.loss", "expected a probability between 0 and 1, got 1.5",
                 id="loss-above-one"),
    pytest.param("[network]\nloss = -0.1\n", "network.loss", "probability between 0 and 1", id="loss-negative"),
    pytest.param("[network]\nloss = inf\n", "network.loss", "probability between 0 and 1", id="loss-inf"),
    pytest.param("[network]\nloss = nan\n", "network.loss", "probability between 0 and 1", id="loss-nan"),
    pytest.param('[network]\nduplicate = "0.1"\n', "network.duplicate", "probability between 0 and 1",
                 id="duplicate-string"),
    pytest.param("[network]\nduplicate = true\n", "network.duplicate", "probability between 0 and 1",
                 id="duplicate-bool"),
    pytest.param('[network]\nlatency = ["50ms", "1ms"]\n', "network.latency", "low <= high", id="latency-reversed"),
    # [faults]
    pytest.param("[faults]\nmeteor = { rate = 1 }\n", "faults.meteor",
                 "one of the keys crash, restart, pause, partition, clock_skew, server_restart, server_pause", id="faults-unknown-kind"),
    pytest.param('[faults]\npause = { rate = 1, length = "1s" }\n', "faults.pause.length",
                 "one of the keys rate, duration", id="faults-kind-unknown-key"),
    pytest.param("[faults]\npause = { rate = -1 }\n", "faults.pause.rate",
                 "expected a number of faults per virtual minute from 0 to 1,000", id="pause-rate-negative"),
    pytest.param('[faults]\npause = { rate = "often" }\n', "faults.pause.rate", "number of faults per virtual minute from 0 to 1,000",
                 id="pause-rate-string"),
    pytest.param("[faults]\ncrash = { rate = true }\n", "faults.crash.rate", "number of faults per virtual minute from 0 to 1,000",
                 id="crash-rate-bool"),
    pytest.param("[faults]\npause = 3\n", "faults.pause", "expected a table, got 3", id="faults-kind-not-table"),
    pytest.param('[faults.partition]\nduration = ["60s", "1s"]\n', "faults.partition.duration", "low <= high",
                 id="partition-duration-reversed"),
    pytest.param('[faults]\nserver_restart = { duration = "-1s" }\n', "faults.server_restart.duration",
                 "expected a duration", id="server-restart-duration-negative"),
    # invariants and bugs
    pytest.param('invariants = ["capacity", "no-such-invariant"]\n', "invariants",
                 "expected invariant ids from: slot-accounting", id="unknown-invariant"),
    pytest.param('invariants = "capacity"\n', "invariants", "expected a list of invariant ids", id="invariants-not-list"),
    pytest.param("invariants = [1]\n", "invariants", "expected a list of invariant ids", id="invariants-not-strings"),
    pytest.param('bugs = ["no-such-bug"]\n', "bugs", "expected bug slugs of dst.reference:model from", id="unknown-bug"),
    pytest.param('bugs = "double-release"\n', "bugs", "expected a list of bug slugs", id="bugs-not-list"),
    # steps
    pytest.param("steps = 3\n", "steps", "expected an array of step tables", id="steps-not-array"),
    pytest.param(f"steps = [ {STEP_OK}, 1 ]\n", "steps[1]", "expected a table with at, actor and action",
                 id="step-not-table"),
    pytest.param(steps('{ at = "1s", actor = "c1", action = "explode" }'), "steps[1].action",
                 "expected one of acquire, branch, cancel, clock-skew, crash, delay, duplicate, lose, partition, pause, proxy-retry, reset, restart, serve, slow, store-reset, submit, got 'explode'", id="step-unknown-action"),
    pytest.param('steps = [{ at = "0s", actor = "c1", action = "lose", message = "1.1.0" }]\n', "steps[0].actor",
                 "expected 'net' (the network), got 'c1'", id="pinned-fault-wrong-actor"),
    pytest.param('steps = [{ at = "0s", actor = "net", action = "duplicate", message = "one" }]\n', "steps[0].message",
                 "expected a key as the trace writes it, such as '17.3.0' or 'reaper.4.0', got 'one'", id="pinned-fault-bad-key"),
    pytest.param('steps = [{ at = "0s", actor = "c1", action = "slow", message = "1.1.0", round_trip = 1, by = "1s" }]\n',
                 "steps[0].actor", "expected 'server'", id="slow-not-on-a-client"),
    pytest.param(steps('{ at = "1s", actor = "c1" }'), "steps[1].action", "expected one of acquire",
                 id="step-missing-action"),
    pytest.param(steps('{ at = "1s", actor = "client1", action = "crash" }'), "steps[1].actor",
                 "expected a client name such as 'c1', got 'client1'", id="step-bad-actor"),
    pytest.param(steps('{ at = "1s", actor = "c0", action = "crash" }'), "steps[1].actor", "a client name",
                 id="step-actor-c0"),
    pytest.param(steps('{ at = "1s", actor = "server", action = "acquire" }'), "steps[1].actor",
                 "expected a client name such as 'c1', got 'server'", id="step-server-cannot-acquire"),
    pytest.param(steps('{ at = "1s", actor = "", action = "restart" }'), "steps[1].actor",
                 "expected a client name such as 'c1' or 'server'", id="step-empty-actor"),
    pytest.param(steps('{ at = "1s", actor = 1, action = "crash" }'), "steps[1].actor", "a client name",
                 id="step-actor-int"),
    pytest.param(steps('{ at = "later", actor = "c1", action = "crash" }'), "steps[1].at",
                 "expected a duration such as '60s'", id="step-bad-at"),
    pytest.param(steps('{ actor = "c1", action = "crash" }'), "steps[1].at", "expected a duration",
                 id="step-missing-at"),
    pytest.param(steps('{ at = "-1s", actor = "c1", action = "crash" }'), "steps[1].at", "expected a duration",
                 id="step-negative-at"),
    pytest.param(steps('{ at = "1s", actor = "c1", action = "serve", work = "1s" }'), "steps[1].work",
                 "not an argument of serve (arguments: none)", id="step-unknown-arg-none-allowed"),
    pytest.param(steps('{ at = "1s", actor = "c1", action = "acquire", for = "1s" }'), "steps[1].for",
                 "not an argument of acquire (arguments: limit, slots, work, writes)", id="step-unknown-arg"),
    pytest.param(steps('{ at = "1s", actor = "c1", action = "acquire", work = "long" }'), "steps[1].work",
                 "expected a duration", id="step-bad-duration-arg"),
    pytest.param(steps('{ at = "1s", actor = "c1", action = "acquire", writes = -1 }'), "steps[1].writes",
                 "got -1", id="step-writes-negative"),
    pytest.param(steps('{ at = "1s", actor = "c1", action = "acquire", writes = 1.5 }'), "steps[1].writes",
                 "got 1.5", id="step-writes-float"),
    pytest.param(steps('{ at = "1s", actor = "c1", action = "acquire", slots = 0 }'), "steps[1].slots",
                 "got 0", id="step-slots-zero"),
    pytest.param(steps('{ at = "1s", actor = "c1", action = "acquire", slots = true }'), "steps[1].slots",
                 "got True", id="step-slots-bool"),
    pytest.param(steps('{ at = "1s", actor = "c1", action = "acquire", limit = "" }'), "steps[1].limit",
                 "expected a name", id="step-empty-limit"),
    pytest.param(steps('{ at = "1s", actor = "c1", action = "pause", for = -1 }'), "steps[1].for",
                 "expected a non-negative", id="step-pause-negative"),
    pytest.param(steps('{ id = -1, at = "1s", actor = "c1", action = "crash" }'), "steps[1].id",
                 "expected an integer from 0 to 4,398,046,511,103", id="step-negative-id"),
    pytest.param(steps('{ id = "a", at = "1s", actor = "c1", action = "crash" }'), "steps[1].id",
                 "expected an integer from 0 to 4,398,046,511,103", id="step-string-id"),
    # A message's key holds its step's id in 42 bits: a larger one would overflow into the background bit.
    pytest.param(steps('{ id = 9223372036854775807, at = "1s", actor = "c1", action = "crash" }'), "steps[1].id",
                 "expected an integer from 0 to 4,398,046,511,103, got 9223372036854775807", id="step-id-too-large"),
    pytest.param('steps = [ { id = 7, at = "0s", actor = "c1", action = "crash" },'
                 ' { id = 7, at = "1s", actor = "c2", action = "crash" } ]\n',
                 "steps[1].id", "expected an id no other step has, got 7", id="step-duplicate-ids"),
    pytest.param(steps('{ id = 1, at = "1s", actor = "c2", action = "crash" }'), "steps[1].id",
                 "expected an id no other step has, got 1", id="step-id-clashes-with-default-id"),
]

# Inputs that once escaped as tracebacks or hangs (non-finite numbers, unhashable actions, unknown limits).
MALFORMED_BUGS = [
    pytest.param("[model]\nttl = inf\n", "model.ttl", "expected", id="ttl-inf"),
    pytest.param("[model]\nttl = nan\n", "model.ttl", "expected a", id="ttl-nan"),
    pytest.param('[workload]\nwork = ["1s", inf]\n', "workload.work", "expected", id="range-inf"),
    pytest.param(steps('{ at = "1s", actor = "c1", action = ["crash"] }'), "steps[1].action", "expected one of",
                 id="step-action-list"),
    pytest.param(steps('{ at = "1s", actor = "c1", action = { a = 1 } }'), "steps[1].action", "expected one of",
                 id="step-action-table"),
    pytest.param(steps('{ at = "1s", actor = "c1", action = "acquire", limit = "nope" }'), "steps[1].limit",
                 "expected", id="step-unknown-limit"),
]

# These load "successfully" today and then hang the simulation (expovariate(inf) is 0, NaN never
# reaches the duration), so they are checked at load time only, never run through the CLI.
MALFORMED_HANGS = [
    pytest.param("[faults]\npause = { rate = inf }\n", "faults.pause.rate", "expected", id="rate-inf"),
    pytest.param("[faults]\npause = { rate = nan }\n", "faults.pause.rate", "expected", id="rate-nan"),
]


def check_message(message: str, path: Path, key: str, expected: str) -> None:
    assert_one_line(message)
    assert message.startswith(f"{path}: {key}: "), message
    assert "expected" in message or "(arguments: " in message, message  # says what would have been right
    assert expected in message, message


@pytest.mark.parametrize(("text", "key", "expected"), MALFORMED + MALFORMED_BUGS + MALFORMED_HANGS)
def test_malformed_file_gives_one_line_naming_file_key_and_expectation(
        tmp_path: Path, text: str, key: str, expected: str) -> None:
    path = write(tmp_path, text, "bad.toml")
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    check_message(str(info.value), path, key, expected)


@pytest.mark.parametrize(("text", "key", "expected"), MALFORMED + MALFORMED_BUGS)
def test_malformed_file_through_the_cli_exits_2_with_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, key: str, expected: str) -> None:
    path = write(tmp_path, text, "bad.toml")
    code = main(["run", "--scenario", str(path)])
    out, err = capsys.readouterr()
    assert code == 2
    assert out == ""
    assert "Traceback" not in err
    assert err.endswith("\n") and len(err.splitlines()) == 1, err
    assert err.startswith(f"dst: {path}: {key}: "), err
    check_message(err.removeprefix("dst: ").rstrip("\n"), path, key, expected)


TOML_SYNTAX = [
    pytest.param("[model\nttl = 1\n", id="unclosed-table-header"),
    pytest.param('[model]\nttl = "1s"\nttl = "2s"\n', id="duplicate-key"),
    pytest.param('name = "unterminated\n', id="unterminated-string"),
    pytest.param("= 1\n", id="missing-key"),
    pytest.param("[run]\n[run]\n", id="duplicate-table"),
]


@pytest.mark.parametrize("text", TOML_SYNTAX)
def test_bad_toml_syntax_names_the_file_and_the_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str) -> None:
    path = write(tmp_path, text, "syntax.toml")
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    message = str(info.value)
    assert_one_line(message)
    assert message.startswith(f"{path}: not valid TOML: "), message
    assert "line" in message  # where in the file

    assert main(["run", "--scenario", str(path)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "Traceback" not in err
    assert err == f"dst: {message}\n"


@pytest.mark.parametrize(("make", "expected"), [
    pytest.param(lambda d: d / "missing.toml", "no such file", id="missing-file"),
    pytest.param(lambda d: d, "cannot read the file", id="directory"),
    pytest.param(lambda d: write(d, "", "x.toml") / "inner.toml", "cannot read the file", id="file-as-directory"),
    pytest.param(lambda d: d / ("n" * 300 + ".toml"), "", id="name-too-long"),
])
def test_unreadable_path_gives_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], make: Any, expected: str) -> None:
    path = make(tmp_path)
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    message = str(info.value)
    assert_one_line(message)
    assert message.startswith(f"{where(path)}: "), message  # a long path is cut in the middle
    assert expected in message

    assert main(["run", "--scenario", str(path)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "Traceback" not in err
    assert err == f"dst: {message}\n"


def test_invalid_utf8_gives_one_line(tmp_path: Path) -> None:
    path = tmp_path / "latin1.toml"
    path.write_bytes(b'name = "caf\xe9"\n')
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    assert_one_line(str(info.value))
    assert str(info.value).startswith(f"{path}: ")


@pytest.mark.parametrize("text", [
    '"bad\\nkey" = 1\n',
    '[model]\nlimits = { "a\\nb" = 0 }\n',
    steps('{ at = "1s", actor = "c1", action = "crash", "x\\ny" = 1 }'),
    '"name\\n" = 1\n',
    steps('{ at = "1s", actor = "c1", action = "crash", "x\\n" = 1 }'),
], ids=["top-level", "limit-name", "step-argument", "ending-in-a-newline", "step-argument-ending-in-a-newline"])
def test_unknown_key_with_a_newline_is_still_one_line(tmp_path: Path, text: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    assert_one_line(str(info.value))


def test_first_error_wins_and_names_its_own_key(tmp_path: Path) -> None:
    # Two errors: the message is about one of them, still one line.
    path = write(tmp_path, "[model]\nttl = 0\n[network]\nloss = 2\n")
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    check_message(str(info.value), path, "model.ttl", "above zero")


# --- property: junk under any known key never escapes as anything but ScenarioError ---------------

SCALAR_PATHS = (
    "name", "description", "invariants", "bugs",
    "run.duration", "run.quiet", "run.drain_limit",
    "model.limits", "model.ttl", "model.reaper_interval", "model.renew_fraction", "model.renew_attempts",
    "model.retry_after", "model.store_latency", "model.resource_contract",
    "workload.clients", "workload.jobs", "workload.limit", "workload.slots", "workload.work", "workload.think",
    "workload.writes", "workload.request_timeout", "workload.retries", "workload.acquire_patience",
    "network.latency", "network.loss", "network.duplicate",
    *(f"faults.{kind}.{key}" for kind in ("crash", "restart", "pause", "partition", "server_restart")
      for key in ("rate", "duration")),
    "step.id", "step.at", "step.actor", "step.action", "step.limit", "step.slots", "step.work", "step.writes",
    "step.for", "step.down",
    # whole sections replaced by junk
    "run", "model", "workload", "network", "faults", "faults.pause", "steps", "step",
)

DURATION_PATHS = frozenset({
    "run.duration", "run.quiet", "run.drain_limit", "model.ttl", "model.reaper_interval", "model.retry_after",
    "model.store_latency", "workload.work", "workload.think", "workload.request_timeout", "workload.acquire_patience",
    "network.latency", "step.at", "step.work", "step.for", "step.down",
    *(f"faults.{kind}.duration" for kind in ("crash", "restart", "pause", "partition", "server_restart")),
})

_LINE_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"

keys = st.text(st.characters(blacklist_characters=_LINE_BREAKS, blacklist_categories=("Cs",)), max_size=8)
plausible = st.one_of(
    st.from_regex(r"\A-?\d{1,4}(\.\d{1,3})?\s?(ms|s|m|h|x)?\Z"),
    st.sampled_from(["db", "c1", "c0", "server", "acquire", "crash", "pause", "restart", "token", "capacity", ""]),
    st.integers(-3, 5),
    st.sampled_from([0.0, 0.5, 1.0, 1.5, -0.5, 1e-9]),
)
toml_scalars = st.one_of(
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(),
    st.text(max_size=12),
    st.dates(),
    st.times(),
    st.datetimes(),
    plausible,
)
junk = st.recursive(
    toml_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(keys, inner, max_size=3),
    max_leaves=8,
)

# Half plausible (so some files load and the later checks run), half anything TOML can hold.
values = st.one_of(plausible, st.lists(plausible, min_size=2, max_size=2), junk)


def _toml(value: Any) -> str:
    """A tiny TOML serializer: enough for every value tomllib can return."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        out = []
        for ch in value:
            if ch in '"\\':
                out.append("\\" + ch)
            elif ord(ch) < 0x20 or ord(ch) == 0x7F:
                out.append(f"\\u{ord(ch):04x}")
            else:
                out.append(ch)
        return '"' + "".join(out) + '"'
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_toml(str(k))} = {_toml(v)}" for k, v in value.items()) + "}"
    raise TypeError(value)


def _document(assignments: dict[str, Any]) -> dict[str, Any]:
    doc: dict[str, Any] = {}
    step: dict[str, Any] = {"at": "0s", "actor": "c1", "action": "acquire"}
    for path, value in assignments.items():
        if path == "step":
            doc["steps"] = [value]
            continue
        if path.startswith("step."):
            step[path[5:]] = value
            doc.setdefault("steps", [step])
            continue
        *sections, leaf = path.split(".")
        node = doc
        for s in sections:
            child = node.setdefault(s, {})
            if not isinstance(child, dict):  # an earlier assignment replaced the section with junk
                return doc
            node = child
        node[leaf] = value
    return doc


def _non_finite(value: Any) -> bool:
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, list):
        return any(_non_finite(v) for v in value)
    return False


@pytest.fixture(scope="module")
def junk_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("junk") / "junk.toml"


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(assignments=st.dictionaries(st.sampled_from(SCALAR_PATHS), values, min_size=1, max_size=4))
@example(assignments={"model.ttl": "60s", "network.loss": 0.5, "workload.clients": 2})
@example(assignments={"model.ttl": [], "network.loss": "x", "workload.clients": {"a": 1}})
@example(assignments={"step": {}})
@example(assignments={"steps": [[]]})
def test_junk_under_known_keys_loads_or_raises_scenario_error(junk_file: Path, assignments: dict[str, Any]) -> None:
    doc = _document(assignments)
    text = "\n".join(f"{_toml(k)} = {_toml(v)}" for k, v in doc.items()) + "\n"
    junk_file.write_text(text, encoding="utf-8")
    try:
        scenario = load_scenario(junk_file)
    except ScenarioError as e:
        event("rejected")
        message = str(e)
        assert_one_line(message)
        assert message.startswith(f"{junk_file}: "), message
    else:
        event("loaded")
        assert isinstance(scenario, Scenario)
        assert scenario.source == str(junk_file)
        assert scenario.workload.slots <= dict(scenario.model.limits)[scenario.workload.limit]


def test_serializer_round_trips() -> None:
    # The property above is only as good as _toml; pin that it writes what tomllib reads back.
    doc = {"a": [1, 2.5, "x\n\"y\\", True, {"k": dt.date(2020, 1, 2)}], "b": {"c d": dt.time(1, 2, 3)}}
    assert tomllib.loads("\n".join(f"{_toml(k)} = {_toml(v)}" for k, v in doc.items())) == doc


# --- scripted scenarios ----------------------------------------------------------------------------

SCRIPT = """\
name = "scripted"
steps = [ {at="0s", actor="c1", action="acquire", work="30s", writes=2}, {at="10s", actor="server", action="restart", down="1s"} ]
"""

SCRIPT_REVERSED = """\
name = "scripted"
steps = [ {at="10s", actor="server", action="restart", down="1s"}, {at="0s", actor="c1", action="acquire", work="30s", writes=2} ]
"""


def test_scripted_scenario_loads_steps_in_time_order(tmp_path: Path) -> None:
    s = load_scenario(write(tmp_path, SCRIPT))
    assert s.steps == (
        Step(1, 0, "c1", "acquire", (("work", 30_000), ("writes", 2))),
        Step(2, 10_000, "server", "restart", (("down", 1_000),)),
    )
    assert [step.describe() for step in s.steps] == [
        "t=0s c1 acquire work=30s writes=2",
        "t=10s server restart down=1s",
    ]


def test_scripted_steps_are_sorted_by_time_whatever_the_file_order(tmp_path: Path) -> None:
    s = load_scenario(write(tmp_path, SCRIPT_REVERSED))
    # default ids follow the file order; the plan follows time
    assert s.steps == (
        Step(2, 0, "c1", "acquire", (("work", 30_000), ("writes", 2))),
        Step(1, 10_000, "server", "restart", (("down", 1_000),)),
    )


def test_steps_at_the_same_time_run_in_id_order(tmp_path: Path) -> None:
    s = load_scenario(write(tmp_path, 'steps = [ { id = 9, at = "5s", actor = "c1", action = "crash" },'
                                      ' { id = 3, at = "5s", actor = "c2", action = "crash" } ]\n'))
    assert [(step.at, step.id) for step in s.steps or ()] == [(5_000, 3), (5_000, 9)]


def test_empty_steps_array_is_an_empty_script_not_a_generated_run(tmp_path: Path) -> None:
    assert load_scenario(write(tmp_path, "steps = []\n")).steps == ()


@pytest.mark.parametrize("seed", [1, 2])
def test_scripted_scenario_runs_exactly_its_steps(tmp_path: Path, seed: int) -> None:
    scenario = load_scenario(write(tmp_path, SCRIPT))
    result = run(scenario, seed)
    assert result.plan == scenario.steps  # the script is the plan, whatever the seed
    assert result.scenario == "scripted"
    assert result.seed == seed
    assert result.faults == {"server_restart": 1}
    assert result.jobs == {"done": 1}
    assert result.ok, result.violation
    restarts = [e for e in result.trace if e[1] == "server" and e[2] == "restart"]
    assert [e[0] for e in restarts] == [10_000]
    writes = [e for e in result.trace if e[1] == "c1" and e[2] == "send" and e[3].startswith("write ")]
    assert len(writes) == 2


def test_scripted_run_is_deterministic(tmp_path: Path) -> None:
    scenario = load_scenario(write(tmp_path, SCRIPT))
    assert run(scenario, 5).trace == run(scenario, 5).trace


# --- writing a scenario back out --------------------------------------------------------------------

def _every_shipped_scenario() -> list[Path]:
    return sorted((Path(__file__).resolve().parents[1] / "scenarios").glob("*.toml"))


@pytest.mark.parametrize("path", _every_shipped_scenario(), ids=lambda p: p.stem)
def test_a_scenario_written_out_reads_back_the_same(path: Path) -> None:
    from dst.runner.swarm import swarm
    from dst.scenario import parse_scenario, scenario_to_doc

    for scenario in (load_scenario(path), swarm(load_scenario(path), 7)):
        again = parse_scenario(scenario_to_doc(scenario), scenario.source)
        assert again == scenario


def test_a_scripted_scenario_written_out_keeps_its_steps(tmp_path: Path) -> None:
    from dst.scenario import parse_scenario, scenario_to_doc

    path = tmp_path / "s.toml"
    path.write_text('steps = [{ at = "1.5s", actor = "c1", action = "acquire", work = "250ms", writes = 0 },'
                    ' { id = 9, at = "2s", actor = "server", action = "restart", down = "1s" }]\n')
    scenario = load_scenario(path)
    assert parse_scenario(scenario_to_doc(scenario), str(path)) == scenario


def test_max_events_is_capped_so_one_run_cannot_take_the_machines_memory(tmp_path):
    # A run keeps its trace in memory: a budget of a billion events would take the memory before it ran out.
    path = tmp_path / "huge.toml"
    path.write_text("[run]\nmax_events = 1_000_000_000\n")
    with pytest.raises(ScenarioError, match=r"run\.max_events: expected an integer from 1 to 20,000,000, got 1000000000"):
        load_scenario(str(path))
