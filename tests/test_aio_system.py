"""An unmodified asyncio service under simulation: processes that crash, pause and restart, the network,
facts and invariants, refusals in one line, and the same bytes for the same seed."""

from __future__ import annotations

import json
from typing import Any

import pytest

import aio_models
from dst.cli import EXIT_MODEL_ERROR, main
from dst.runner import run
from dst.scenario import parse_scenario

BASE: dict[str, Any] = {
    "run": {"duration": "20s", "quiet": "30s"},
    "model": {"limits": {"db": 1}, "store_latency": ["5ms", "5ms"]},
    "workload": {"clients": 2, "jobs": 0, "request_timeout": "3s", "retries": 0},
    "network": {"latency": ["10ms", "10ms"], "loss": 0.0, "duplicate": 0.0},
}


def scripted(model: str, steps: list[dict[str, Any]], **model_keys: Any) -> Any:
    doc = json.loads(json.dumps(BASE))
    doc["model"].update(impl=f"aio_models:{model}", **model_keys)
    doc["steps"] = steps
    return parse_scenario(doc, "<test>")


@pytest.fixture(autouse=True)
def _clear_log() -> None:
    aio_models.LOG.clear()


def during(log: list[tuple[str, object]], what: str) -> list[object]:
    return [when for name, when in log if name == what and when != "after"]


def test_a_crashed_server_runs_none_of_its_code_afterwards_and_boots_again():
    result = run(scripted("probe", [{"at": "0s", "actor": "c1", "action": "acquire", "work": "1s"},
                                    {"at": "500ms", "actor": "server", "action": "restart", "down": "2s"}]), 1)
    log = aio_models.LOG
    assert during(log, "handling") == [0.01]
    assert during(log, "finally") == [] and during(log, "cancelled") == []  # no finally, no CancelledError
    assert during(log, "boot") == [0.0, 2.5]  # the factory builds the service again after the downtime
    ticks = during(log, "tick")
    assert 1.0 not in ticks and 3.5 in ticks  # the old ticker died with its process; the new one ticks from 2.5 s
    assert result.jobs == {"timed out": 1}


def test_a_paused_server_freezes_its_timers_and_goes_on_where_it_stopped():
    run(scripted("probe", [{"at": "2500ms", "actor": "server", "action": "pause", "for": "3s"}]), 1)
    ticks = during(aio_models.LOG, "tick")
    assert ticks[:4] == [1.0, 2.0, 5.5, 6.5]  # the tick due at 3 s waited for the resume at 5.5 s


def test_a_client_crash_ends_its_job_without_its_finally():
    result = run(scripted("probe", [{"at": "0s", "actor": "c1", "action": "acquire", "work": "10s"},
                                    {"at": "3s", "actor": "c1", "action": "crash"}]), 1)
    assert during(aio_models.LOG, "granted") and not during(aio_models.LOG, "c1 finally")
    assert result.jobs == {}


def test_a_client_runs_what_it_registered_with_on_crash_when_it_dies():
    result = run(scripted("crash_hook", [{"at": "0s", "actor": "c1", "action": "acquire", "work": "10s"},
                                         {"at": "3s", "actor": "c1", "action": "restart"},
                                         {"at": "4s", "actor": "c1", "action": "acquire", "work": "1s"},
                                         {"at": "5s", "actor": "c2", "action": "acquire", "work": "1s"}]), 1)
    # c1's first incarnation dies at its restart; its second and c2 finish, and theirs never run
    assert during(aio_models.LOG, "c1.1 died") == [3.0] and result.jobs == {"done": 2}
    assert [name for name, _ in aio_models.LOG] == ["c1.1 died"]


def test_a_client_pause_cuts_its_work_and_it_goes_on_after():
    result = run(scripted("probe", [{"at": "0s", "actor": "c1", "action": "acquire", "work": "10s"},
                                    {"at": "3s", "actor": "c1", "action": "pause", "for": "4s"}]), 1)
    assert result.jobs == {"done": 1}
    assert during(aio_models.LOG, "c1 finally") == [7.0]  # the 10 s of work was cut at 3 s and ended at the resume


def scenario_file(tmp_path: Any, model: str, steps: str = '{ at = "0s", actor = "c1", action = "acquire", work = "1s" }') -> str:
    path = tmp_path / f"{model}.toml"
    path.write_text(f"""steps = [{steps}]
[run]
duration = "20s"
quiet = "30s"
[model]
impl = "aio_models:{model}"
limits = {{ db = 1 }}
[workload]
clients = 1
jobs = 0
""")
    return str(path)


@pytest.mark.parametrize("model, call, instead", [
    ("thread", "threading.Thread.start()", "asyncio"),
    ("executor", "loop.run_in_executor()", "coroutine"),
    ("socket", "loop.create_connection()", "network"),
    ("swallowed", "threading.Thread.start()", "asyncio"),  # caught by the service: the run ends all the same
])
def test_what_a_simulated_run_cannot_have_is_a_model_error_naming_the_call_and_the_users_line(model, call, instead,
                                                                                              tmp_path, capsys):
    assert main(["run", "--seed", "1", "--scenario", scenario_file(tmp_path, model)]) == EXIT_MODEL_ERROR
    out, err = capsys.readouterr()
    [line] = [line for line in out.splitlines() if line.startswith("model-error: ")]
    assert call in line and instead in line and "aio_models.py:" in line, line
    assert "MODEL ERROR at t=" in out and "Traceback" not in out + err


def test_the_service_reads_virtual_time_from_the_real_clock_functions():
    from dst.aio import VIRTUAL_EPOCH_MS

    result = run(scripted("clock", [{"at": "2s", "actor": "c1", "action": "acquire", "work": "1s"}]), 1)
    [(outcome, _)] = result.jobs.items()
    wall, monotonic = (float(x) for x in outcome.split())
    assert wall == pytest.approx(VIRTUAL_EPOCH_MS / 1000 + 2.01, abs=0.0001)  # sent at 2 s, delivered 10 ms later
    assert monotonic == pytest.approx(2.01, abs=0.01)


def test_a_violation_found_inside_a_handlers_task_is_noted_where_its_callback_returns():
    result = run(scripted("foreign", [{"at": "0s", "actor": "c1", "action": "acquire", "work": "1s"}]), 1)
    v = result.violation
    assert v is not None and v.invariant == "no-foreign-release"
    assert v.during == "1.1.0"  # the request it was detected in
    # Noted where the handler's callback returned, its reply sent, as a violation raised there used to end the run:
    # the trace up to it, and so its digest, is what it was before runs went on for their consequences.
    assert [e[2] for e in result.trace[v.step - 2:v.step]] == ["recv", "reply"] and result.decided == v.step
    # The run went on: the client got its answer, and the count that disagrees is a consequence.
    assert result.jobs == {"ok": 1} and [c.invariant for c in result.consequences] == ["slot-accounting"]


def test_state_left_between_runs_is_named_by_check_determinism(tmp_path, capsys):
    assert main(["run", "--seed", "1", "--check-determinism", "--scenario", scenario_file(tmp_path, "leaky")]) == 1
    out = capsys.readouterr().out
    assert "a second run in the same process diverges" in out and "module global or singleton" in out


def test_the_determinism_check_names_the_first_event_where_a_second_run_parts():
    from dst.explore.determinism import HERE, check_determinism

    leaky = scripted("leaky", [{"at": "0s", "actor": "c1", "action": "acquire", "work": "1s"}])
    first = run(leaky, 1)
    divergence = check_determinism(leaky, 1, first, fresh_process=False)
    assert divergence is not None and divergence.second == HERE and divergence.index is not None
    # The server's reply, one call further along in the second run (the module global counts every run's calls).
    assert divergence.first_event == first.trace[divergence.index] and divergence.second_event is not None
    (time, actor, kind, said), again = divergence.first_event, divergence.second_event
    assert (actor, kind) == ("server", "reply") and again[:3] == (time, actor, kind)
    assert int(again[3].split()[1]) == int(said.split()[1]) + 1
    assert divergence.line().startswith("a second run in the same process diverges at trace event 4: first run t=")
    # A scenario built in code has no command line to run it in a fresh process: said before anything runs.
    with pytest.raises(ValueError, match="no dst run command runs it in a fresh process"):
        check_determinism(leaky, 1)


def test_one_seed_gives_the_same_bytes_twice_in_one_process():
    steps = [{"at": "0s", "actor": "c1", "action": "acquire", "work": "1s"},
             {"at": "100ms", "actor": "c2", "action": "acquire", "work": "1s"},
             {"at": "500ms", "actor": "server", "action": "restart", "down": "1s"}]
    first, second = (run(scripted("probe", steps), 7) for _ in range(2))
    assert first.digest == second.digest


def test_a_fault_aimed_at_await_strikes_as_the_process_next_resumes():
    steps = [{"at": "0s", "actor": "c1", "action": "acquire", "work": "1s"},
             {"at": "5ms", "actor": "server", "action": "pause", "for": "2s", "moment": "await"}]
    result = run(scripted("probe", steps), 1)
    [moment] = [e for e in result.trace if e[2] == "moment"]
    [pause] = [e for e in result.trace if e[2] == "pause"]
    assert moment[1] == "server" and moment[3].startswith("await:") and pause[0] == moment[0] >= 5
    assert during(aio_models.LOG, "handling") == [moment[0] / 1000 + 2]  # the handler ran after the pause


def test_a_pause_aimed_with_past_lasts_until_that_long_after_the_deadline_the_moment_names():
    def went_on(**pause: str) -> float:
        aio_models.LOG.clear()
        steps = [{"at": "0s", "actor": "c1", "action": "acquire", "work": "1s"},
                 {"at": "0s", "actor": "c1", "action": "pause", "moment": "granted", **pause}]
        assert run(scripted("deadline_probe", steps), 1).jobs == {"done": 1}
        [granted], [after] = during(aio_models.LOG, "granted"), during(aio_models.LOG, "went on")
        return round(float(after) - float(granted), 3)  # type: ignore[arg-type]

    assert went_on(**{"for": "60s", "past": "3s"}) == 13  # the 10 s the holder reckons with, and 3 s past them
    assert went_on(**{"for": "60s"}) == 60  # no past: as long as drawn, whatever the moment names
    assert went_on(**{"for": "60s", "past": "0s"}) == 10  # just at the deadline


def test_a_background_job_is_keyed_by_its_own_name_and_a_step_can_pin_its_round_trips():
    def swept(*steps: dict[str, Any]) -> list[object]:
        aio_models.LOG.clear()
        run(scripted("background_probe", [{"at": "0s", "actor": "c1", "action": "acquire"}, *steps]), 1)
        return during(aio_models.LOG, "swept")

    plain = swept()
    assert plain == [1.005]  # a second after boot, then its round trip (5 ms)
    slowed = swept({"at": "0s", "actor": "server", "action": "slow", "message": "sweep.1.1", "round_trip": 1,
                    "by": "2s"})
    assert slowed == [3.005]  # the job's own key: the step slowed its round trip, and nothing else's


def test_a_dead_process_s_last_words_reach_nothing_real():
    # The handler dies mid-sleep with the server; its finally runs only once the run is over, when its coroutine
    # is closed, and still inside the sandbox: it reads the virtual clock, not the real one.
    from dst.aio import VIRTUAL_EPOCH_MS

    run(scripted("probe", [{"at": "0s", "actor": "c1", "action": "acquire", "work": "1s"},
                           {"at": "500ms", "actor": "server", "action": "restart", "down": "1s"}]), 1)
    log = dict(aio_models.LOG)
    assert log["finally"] == "after"
    assert abs(log["finally wall clock"] - VIRTUAL_EPOCH_MS / 1000) < 3600


def test_thread_pool_work_runs_inline_when_the_system_asks_and_is_refused_otherwise(tmp_path, capsys):
    steps = [{"at": "0s", "actor": "c1", "action": "acquire", "work": "1s"}]
    result = run(scripted("sync_fastapi", steps), 1)
    assert result.jobs == {"42 threaded": 1}  # FastAPI's plain-def dependency and endpoint, and asyncio.to_thread
    assert main(["run", "--seed", "1", "--scenario", scenario_file(tmp_path, "sync_fastapi_refused")]) == EXIT_MODEL_ERROR
    [line] = [line for line in capsys.readouterr().out.splitlines() if line.startswith("model-error: ")]
    assert line.startswith("model-error: server: threading.Thread.start() called at ") and "inline_threads=True" in line


def test_a_service_with_two_stores_is_checked_only_when_settled():
    steps = [{"at": "0s", "actor": "c1", "action": "acquire", "work": "1s"},
             {"at": "0s", "actor": "c2", "action": "acquire", "work": "2s"}]
    two = {"limits": {"db": 2}}
    window = run(scripted("split_stores", steps, **two), 1)  # each grant and release leaves the stores apart a moment
    assert window.violation is not None and window.violation.invariant == "slot-accounting"
    settled = run(scripted("split_stores_settled", steps, **two), 1)
    assert settled.ok and settled.jobs == {"done": 2}
    twice = steps + [{"at": "0s", "actor": "net", "action": "duplicate", "message": "1.3.0"}]  # c1's release
    double = run(scripted("split_stores_settled", twice, **two), 1)  # both copies decrement, and it stays so
    assert double.violation is not None and double.violation.invariant == "slot-accounting"
    assert "count(db)=0 but live leases own 1" in double.violation.message


def test_lease_ids_of_the_services_own_kind_go_everywhere_an_int_goes():
    from dst.present.page import Source, page_data

    steps = [{"at": "0s", "actor": "c1", "action": "acquire", "work": "1s"},
             {"at": "0s", "actor": "c2", "action": "acquire", "work": "1s"}]
    for model in ("uuid_leases", "uuid_object_leases"):  # a UUID's text, and uuid.UUID objects
        result = run(scripted(model, steps, limits={"db": 2}), 1)
        assert result.ok and result.jobs == {"done": 2}, result.violation
        stored = [text for _, actor, kind, text in result.trace if kind == "store" and " stored for " in text]
        assert len(stored) == 2 and all(len(text.split()[0]) == 36 for text in stored)  # the id as it is, no "L"
        assert run(scripted(model, steps, limits={"db": 2}), 1).digest == result.digest
    # The reaper takes c1's lease while it works: the violation, the slice and the page name the service's id.
    one = [steps[0]]
    result = run(scripted("uuid_leases_early_reaper", one), 1)
    assert result.violation is not None and result.violation.invariant == "removed-before-expiry"
    [lease] = {text.split()[0] for _, _, kind, text in result.trace if kind == "store"}
    assert result.violation.message.startswith(f"{lease} of c1 was removed at t=505 by the server's own work")
    [then] = result.consequences
    assert (then.invariant, then.message) == ("single-executor", f"{lease} was removed while c1 works under it")
    sliced = [text for _, _, _, text in result.causal()]
    assert any(text.startswith(f"{lease} stored for c1") for text in sliced)
    assert any(text.startswith(f"{lease} removed (c1's") for text in sliced)
    [bar] = page_data(result, Source("t", "dst run"))["leases"]
    assert bar["lease"] == lease and bar["holder"] == "c1" and bar["ended"] == "removed"


def test_the_services_log_lines_are_kept_off_the_terminal_and_shown_in_the_trace_in_virtual_time(capsys, tmp_path):
    path = scenario_file(tmp_path, "chatty")
    assert main(["run", "--seed", "1", "--scenario", path]) == 0
    out, err = capsys.readouterr()
    assert "chatty" not in err and "retrying" not in out + err  # nothing of the service's between dst's lines
    assert "result" in out and "no violation" in out  # dst's own report, whole
    assert main(["run", "--seed", "1", "--scenario", path, "--trace"]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    lines = [" ".join(line.split()) for line in out.splitlines() if " log " in line]
    assert lines == ["t= 0s c1 log WARNING chatty.client: retrying request (1 of 3)",
                     "t= 19ms server log INFO chatty: granting db to c1",
                     "t= 19ms server log ERROR chatty: the store failed once (ValueError: the store said no)"], lines
    result = run(parse_scenario({**BASE, "model": {**BASE["model"], "impl": "aio_models:chatty"},
                                 "steps": [{"at": "0s", "actor": "c1", "action": "acquire"}]}, "<t>"), 1)
    again = run(parse_scenario({**BASE, "model": {**BASE["model"], "impl": "aio_models:chatty"},
                                "steps": [{"at": "0s", "actor": "c1", "action": "acquire"}]}, "<t>"), 1)
    assert result.logs == again.logs and len(result.logs) == 3  # kept, in deterministic text
    assert not any(kind == "log" for _, _, kind, _ in result.trace)  # apart from the trace: no digest moves
