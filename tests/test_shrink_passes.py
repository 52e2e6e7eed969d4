"""The minimizer's passes that shrink as a person would: a pinned fault follows its request when a deletion takes
a retry away, and a client's fault moves onto the holder a person would write it on."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import attrs
import pytest

from dst.explore.follow import reaimed, retimed
from dst.explore.candidates import folded
from dst.explore.shrink import shrink
from dst.runner import run
from dst.plan import make_step
from dst.scenario import load_scenario, scripted
from dst.sim.trace import RESPONSE, SENT, message_key


def _sent(*keys: int, carrying: dict[int, str] | None = None) -> Any:
    """A run whose trace sent these keys, each carrying what ``carrying`` says (or nothing): the only part of a
    result re-aiming reads."""
    return SimpleNamespace(raw_trace=tuple((0, "c1", "send", (SENT, (carrying or {}).get(key), "server", key))
                                           for key in keys))


def test_a_pinned_fault_whose_message_was_never_sent_follows_the_nearest_one_of_its_request() -> None:
    lost = make_step(9, 1000, "net", "lose", message="5.2.3r")
    scenario = scripted(load_scenario(None), (make_step(5, 0, "c1", "acquire", limit="db", slots=1, work=1000),
                                             lost))
    answered = [message_key(5, 2, n) | RESPONSE for n in (0, 1)]  # two tries were answered; the fourth never sent
    again = reaimed(scenario, _sent(message_key(5, 2, 0), *answered, message_key(6, 2, 3) | RESPONSE))
    assert again is not None
    assert [s.arg("message") for s in again.steps or () if s.action == "lose"] == ["5.2.1r"]


def test_a_pinned_fault_that_struck_is_left_alone() -> None:
    lost = make_step(9, 1000, "net", "lose", message="5.2.0r")
    scenario = scripted(load_scenario(None), (make_step(5, 0, "c1", "acquire", limit="db", slots=1, work=1000),
                                             lost))
    assert reaimed(scenario, _sent(message_key(5, 2, 0) | RESPONSE)) is None
    assert reaimed(scenario, _sent(message_key(5, 3, 0) | RESPONSE)) is None  # nothing of its request to aim at


def test_a_pinned_fault_follows_what_its_message_carried_when_a_deletion_shifts_the_ordinals() -> None:
    # A worker's 47th read answered with run 15; deleting another submission leaves fewer reads before it, so its
    # 41st read now hands out run 15 and the 47th something else: the lost reply follows run 15, not the number.
    lost = make_step(9, 1000, "net", "lose", message="2.10.46r")
    scenario = scripted(load_scenario(None), (make_step(2, 0, "c1", "serve"), lost))
    reads = [message_key(2, 10, n) | RESPONSE for n in range(50)]
    before = _sent(*reads, carrying={reads[45]: "delivered run 14 claim 2", reads[46]: "delivered run 15 claim 3"})
    # Claims renumber too (one fewer was handed out): what it carried is the run, more than the claim.
    after = _sent(*reads, carrying={reads[40]: "delivered run 15 claim 2", reads[44]: "delivered run 14 claim 3",
                                    reads[46]: "empty (0 unfinished)"})
    again = reaimed(scenario, after, before)
    assert again is not None and [s.arg("message") for s in again.steps or () if s.action == "lose"] == ["2.10.40r"]
    assert reaimed(scenario, before, before) is None  # it still strikes what it struck: left alone
    assert reaimed(scenario, _sent(*reads, carrying={reads[46]: "empty (0 unfinished)"}), before) is None


def _heard(*received: tuple[int, str, int]) -> Any:
    """A run in which each client received the message of that key at that time."""
    return SimpleNamespace(raw_trace=tuple((at, client, "recv", ("@ (#)", None, key)) for at, client, key in received))


def test_a_pause_moves_with_the_last_reply_its_client_heard_before_it() -> None:
    # c2 was granted its lease at 143 s and paused 20 s into its work; with a contending job deleted, the grant comes
    # at 100 s: the pause follows it to 120 s, where its old time would strike after the work was done.
    granted = message_key(4, 1, 1) | RESPONSE
    pause = make_step(9, 163_000, "c2", "pause", **{"for": 40_000})
    crash = make_step(10, 170_000, "c3", "crash")
    scenario = scripted(load_scenario(None), (make_step(4, 0, "c2", "acquire", limit="db", slots=1, work=60_000),
                                             pause, crash))
    before = _heard((90_000, "c2", message_key(4, 1, 0) | RESPONSE), (143_000, "c2", granted), (150_000, "c3", 7))
    after = _heard((100_000, "c2", granted), (150_000, "c3", 7))
    again = retimed(scenario, after, before)
    assert again is not None
    assert {s.actor: s.at for s in again.steps or () if s.action in ("pause", "crash")} == {"c2": 120_000, "c3": 170_000}
    assert retimed(scenario, before, before) is None  # nothing it heard moved: left alone


def test_folding_a_client_moves_its_faults_onto_the_other_and_keeps_the_struck_job_long_enough() -> None:
    steps = (make_step(1, 0, "c1", "acquire", limit="db", slots=1, work=10_000, writes=0),
             make_step(2, 5_000, "c2", "acquire", limit="db", slots=1, work=100_000, writes=0),
             make_step(3, 50_000, "c2", "crash"))
    moved = folded(steps, "c2", "c1")
    assert [(s.id, s.actor, s.action) for s in moved] == [(1, "c1", "acquire"), (3, "c1", "crash")]
    assert moved[0].arg("work") == 105_000  # until the job the crash struck would have ended
    assert folded(steps, "c1", "c2") == [steps[1], steps[2]]  # c1 had no fault: its job just goes


@pytest.mark.slow
def test_a_stale_write_on_two_seats_shrinks_to_one_seat_without_the_holder_of_the_other() -> None:
    # Seed 25 of the default scenario finds the unfenced write with a third client keeping the other seat of a
    # limit of 2 busy; lowering the limit alone has that client block the others. A seat and that client go
    # together, and the story is the textbook one: a holder paused past its lease, the next one writing first.
    import attrs

    from dst.explore.record import minimize

    shrunk = minimize(attrs.evolve(load_scenario(None), bugs=("unfenced-resource",)), 25, use_swarm=True)
    assert shrunk is not None and shrunk.result.violation is not None
    assert shrunk.result.violation.invariant == "fenced-writes"
    assert shrunk.scenario.model.limits == (("db", 1),) and shrunk.steps_after <= 4
    assert any(p.name == "fewer_seats" and p.kept for p in shrunk.passes)


@pytest.mark.slow
def test_steps_move_earlier_by_whole_periods_of_the_reaper_so_they_keep_their_place_among_its_ticks() -> None:
    # The SQLite example's reaper-without-recheck needs the holder's late renewal to land between the reaper's read
    # and its delete, so the steps' phase against the reaper's ticks (every 2 s) matters. Closing the gap before the
    # first step by the gap itself, by half of it or to a whole second moved that phase, and the minimized run began
    # at t=292789ms; a cut by whole periods keeps it and begins the run within the first period.
    from dst.explore.record import minimize

    example = Path(__file__).parent.parent / "examples" / "sqlite_leases" / "scenarios"
    scenario = load_scenario(str(example / "reaper-without-recheck.toml"))  # reaper_interval 2s
    shrunk = minimize(scenario, 9, use_swarm=True)
    assert shrunk is not None and shrunk.result.violation is not None
    assert shrunk.result.violation.invariant == "removed-before-expiry"  # the delete itself, the slip
    assert shrunk.result.periods == (2000,)
    assert shrunk.steps_after == 2 and (shrunk.scenario.steps or ())[0].at < 2000


def test_a_crash_moves_back_to_the_request_it_orphans_and_the_plan_shrinks_again_from_there() -> None:
    # Seed 1 of the default scenario finds double-release as a reaper's decrement and admission's count of an
    # expired lease both freeing one slot: a client crashed while its acquire waited, and its lease, granted to
    # no one, expired. Greedy passes stopped at 7 steps on a limit of 2; with the crash moved to the client's
    # request (which alone does not violate) a shrink from there finds the story in 4.
    import attrs

    from dst.explore.record import minimize

    shrunk = minimize(attrs.evolve(load_scenario(None), bugs=("double-release",)), 1, use_swarm=True)
    assert shrunk is not None and shrunk.result.violation is not None
    assert shrunk.result.violation.invariant == "capacity"
    steps = shrunk.scenario.steps or ()
    assert len(steps) == 4 and shrunk.scenario.model.limits == (("db", 1),)
    crash = next(s for s in steps if s.action == "crash")
    assert any(s.actor == crash.actor and s.action == "acquire" and s.at == crash.at for s in steps)
    assert any(p.name == "crash_sooner" and p.kept for p in shrunk.passes)


def test_a_run_whose_draws_made_hundreds_of_faults_is_cut_before_they_are_written_out_and_never_grows():
    # Duplication, loss and delay on every message of a long run: 27 steps whose draws made about 270 faults. On a
    # budget of 12 candidates, writing them all out first left a "minimized" plan of 290 steps; the big cuts first
    # leave a few, and a plan that could not be cut is never longer than the seed's.
    noisy = load_scenario("double-release")
    noisy = attrs.evolve(noisy, network=attrs.evolve(noisy.network, duplicate=0.3, loss=0.05, delay=0.1))
    shrunk = shrink(noisy, 1, max_runs=12)
    assert shrunk.steps_before == 27 and shrunk.steps_after <= 6
    assert "after_the_violation" in {p.name for p in shrunk.passes}
    assert replay_digest(shrunk) == shrunk.result.digest


def replay_digest(shrunk):  # type: ignore[no-untyped-def]
    return run(shrunk.scenario, shrunk.seed).digest


def test_pauses_that_only_add_up_merge_into_one_where_merging_them_all_would_lose_the_gap_the_run_needs() -> None:
    # A renewal answered in the 116 ms between two of c1's pauses is what the run needs (a slip written into the
    # asyncio example, found in a small world): one pause over all three loses it, the two back to back are one.
    from dst.explore.shrink import Shrinker

    acquire = make_step(1, 0, "c1", "acquire", limit="db", slots=1, work=12_000)
    pauses = [make_step(i, at, "c1", "pause", **{"for": lasts})
              for i, (at, lasts) in enumerate(((12_000, 8_884), (21_000, 3_000), (24_000, 11_000)), 2)]
    scenario = scripted(load_scenario(None), (acquire, *pauses))

    class OnlyTheGapMatters(Shrinker):
        tried: list[list[tuple[int, int]]] = []

        def consider(self, candidate: Any) -> bool:
            spans = [(s.at, s.at + s.arg("for")) for s in candidate.steps or () if s.action == "pause"]
            self.tried.append(spans)
            if spans != [(12_000, 20_884), (21_000, 35_000)]:
                return False
            self.best = candidate
            return True

    shrinker = OnlyTheGapMatters(scenario, 1, "single-executor")
    shrinker.merge_faults()
    assert shrinker.tried[0] == [(12_000, 35_000)]  # all of them first
    assert shrinker.tried[1:] == [[(12_000, 24_000), (24_000, 35_000)],  # then each two next to each other
                                  [(12_000, 20_884), (21_000, 35_000)]]
    assert [s.action for s in shrinker.best.steps or ()] == ["acquire", "pause", "pause"]
