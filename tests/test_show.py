"""dst show: what the page draws (worked out without a browser), the page's data and its safety, the command,
and the page itself in a real headless Chromium."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from dst.cli import main
from dst.findings import read, replay
from dst.runner import RunResult, run
from dst.scenario import load_scenario
from dst.present.shapes import claim_bars, fault_marks, lease_bars, message_arrows
from dst.present.page import GENERATOR, Source, embed_json, page_data, read_page_data, render_page
from dst.sim.trace import format_detail

from conftest import chromium_or_skip, scenario

ROOT = Path(__file__).resolve().parents[1]
PAUSE_FINDING = ROOT / "findings" / "009-two-leases-on-one-seat-after-a-pause.toml"
DUPLICATE_FINDING = ROOT / "findings" / "003-release-frees-another-holders-slot-with-a-duplicated-message.toml"
TWICE_FINDING = ROOT / "findings" / "018-run-executed-twice-during-a-partition.toml"


def _replayed(path: Path) -> RunResult:
    return replay(read(path)).result


def _time_of(result: RunResult, actor: str, kind: str, text: str) -> int:
    """The time of the one event of ``actor`` and ``kind`` whose detail starts with ``text``."""
    (time,) = [e[0] for e in result.trace if e[1] == actor and e[2] == kind and e[3].startswith(text)]
    return time


# --- what is drawn, without a browser -------------------------------------------------------------

def test_each_lease_is_a_bar_in_its_holders_lane_from_its_grant():
    result = _replayed(PAUSE_FINDING)
    bars = {bar.lease: bar for bar in lease_bars(result.raw_trace, result.virtual_time)}
    assert sorted(bars) == ["L1", "L2"]
    l1, l2 = bars["L1"], bars["L2"]
    assert (l1.holder, l1.token, l1.seat, l1.limit) == ("c1", 1, 0, "db")
    assert l1.start == _time_of(result, "server", "reply", "granted L1 ")
    # Granted for the TTL (expiry=60.002s) and not renewed while c1 was paused: it lapses at its expiry. c1 wakes
    # and renews it (the bug): the store's event opens another span, which the run, going on past the violation
    # for its consequences, ends where c1 releases it.
    released = _time_of(result, "server", "store", "L1 removed")
    assert l1.spans == ((l1.start, 60_002), (62_002, released)) and l1.renewals == (62_002,)
    assert result.violation.time == 62_002 < released and l1.ended == "removed"
    assert (l2.holder, l2.token) == ("c2", 2)
    assert l2.start == _time_of(result, "server", "reply", "granted L2 ")
    assert (l2.end, l2.ended) == (_time_of(result, "server", "store", "L2 removed"), "removed")
    # A lease still held when the run ended (a crashed holder's, never reclaimed) is drawn to the end.
    stranded = _replayed(ROOT / "findings" / "008-slot-never-reclaimed-after-a-crash.toml")
    (bar,) = lease_bars(stranded.raw_trace, stranded.virtual_time)
    assert (bar.end, bar.ended) == (stranded.virtual_time, "held when the run ended")


def test_the_servers_own_removals_are_drawn_and_end_a_lease_where_they_happened():
    # The reaper removes c1's lapsed lease: its bar ends at its expiry, and the removal is the server's own event.
    reaped = run(scenario(steps=[{"at": "0s", "actor": "c1", "action": "acquire", "work": "100s", "writes": 0},
                                 {"at": "5s", "actor": "c1", "action": "crash"}]), 1)
    (bar,) = lease_bars(reaped.raw_trace, reaped.virtual_time)
    assert (bar.lease, bar.token, bar.seat, bar.end, bar.ended) == ("L1", 1, 0, 60_015, "expired")
    data = page_data(reaped, Source("t", "c"))
    server = data["lanes"].index("server")
    removals = [e for e in data["events"] if e[1] == server and data["kinds"][e[3]] == "store" and "removed" in e[4]]
    assert [(e[0], e[4]) for e in removals] == [(75_005, "L1 removed (c1's, 1 of db)")]
    # A restart loses a lease kept in memory (finding 002): its bar ends there, and the loss is in the slice.
    lost = _replayed(ROOT / "findings" / "002-count-disagrees-with-live-leases-after-a-server-restart.toml")
    (bar,) = lease_bars(lost.raw_trace, lost.virtual_time)
    restart = _time_of(lost, "server", "restart", "down for")
    assert (bar.end, bar.ended) == (restart, "removed") and bar.start < restart
    assert any(e[2] == "store" and e[3].startswith("L1 removed") for e in lost.causal(every_step=True))


def test_the_page_shows_work_a_renewals_new_expiry_and_a_clock_skews_amount():
    result = run(scenario({}, steps=[{"at": "0s", "actor": "c1", "action": "acquire", "work": "100s", "writes": 0},
                                     {"at": "10s", "actor": "c1", "action": "clock-skew", "by": "30s"}]), 1)
    data = page_data(result, Source("t", "dst run"))
    [lease] = data["leases"]
    assert lease["renewals"] and len(lease["renewed_to"]) == len(lease["renewals"])
    assert all(to > at for at, to in zip(lease["renewals"], lease["renewed_to"]))  # each renewal's new expiry
    [skew] = [f for f in data["faults"] if f["kind"] == "clock_skew"]
    assert skew["amount"] == "by 30s" and skew["start"] == 10_000
    work = data["work"]
    assert work and {w["lease"] for w in work} == {"L1"} and all(w["lane"] == lease["lane"] for w in work)
    assert sum(w["end"] - w["start"] for w in work) == 100_000  # the job's whole work, in its slices
    assert work[0]["start"] >= lease["spans"][0][0] and work[-1]["end"] <= lease["spans"][-1][1]


def test_each_claim_on_a_run_is_a_bar_in_its_workers_lane_from_its_delivery():
    result = _replayed(TWICE_FINDING)
    first, second = claim_bars(result.raw_trace, result.virtual_time)
    delivered = _time_of(result, "server", "reply", "delivered run 11 claim 1 to c2")
    redelivered = _time_of(result, "server", "reply", "redelivered run 11 claim 2 to c1")
    # c2's claim holds until the run is handed to c1 (the trace does not say when it lapsed before that).
    assert (first.what, first.lease, first.holder, first.token) == ("claim", "run 11", "c2", 1)
    assert first.spans == ((delivered, redelivered),) and first.ended == "the run was delivered again"
    assert (second.holder, second.token, second.start) == ("c1", 2, redelivered)
    # The run goes on past the violation (two executions), for its consequences: c1 completes the run.
    assert second.ended == "completed" and result.violation.time < second.end < result.virtual_time
    # A claim still held when the run ended is drawn to the end.
    stuck = _replayed(ROOT / "findings" / "015-run-stuck-in-cancelling-after-a-client-restart.toml")
    (held,) = [bar for bar in claim_bars(stuck.raw_trace, stuck.virtual_time) if bar.ended == "held when the run ended"]
    assert held.end == stuck.virtual_time
    # A claim acked ends at the ack's answer, and its answered heartbeats are marked on it.
    runs = run(load_scenario("runs"), 3)
    acked = [bar for bar in claim_bars(runs.raw_trace, runs.virtual_time) if bar.ended == "completed"]
    assert acked and any(bar.renewals for bar in acked)
    for bar in acked:
        assert any(e[0] == bar.end and e[3].startswith(f"completed to {bar.holder} ")
                   for e in runs.trace if e[1] == "server" and e[2] == "reply"), bar
        assert all(bar.start < t <= bar.end for t in bar.renewals), bar
    page = page_data(_replayed(TWICE_FINDING), Source("t", "c"))
    assert [b["lease"] for b in page["leases"] if b["what"] == "claim"] == ["run 11", "run 11"]


def test_a_pause_is_a_span_until_the_client_resumes():
    result = _replayed(PAUSE_FINDING)
    (pause,) = fault_marks(result.raw_trace, result.virtual_time, result.befell[1])
    assert (pause.kind, pause.actor) == ("pause", "c1")
    assert pause.start == _time_of(result, "c1", "pause", "until")
    assert pause.end == _time_of(result, "c1", "resume", "") == 62_000
    assert result.trace[pause.event][2] == "pause"


def test_a_duplicated_message_is_a_mark_and_arrives_twice():
    result = _replayed(DUPLICATE_FINDING)
    marks = fault_marks(result.raw_trace, result.virtual_time, result.befell[1])
    (duplicate,) = [m for m in marks if m.kind == "duplicate"]
    assert (duplicate.actor, duplicate.end) == ("net", None)
    assert format_detail(result.raw_trace[duplicate.event][3]) == "c1->server 5.3.0"
    # The release (5.3.0) is one send and two arrivals at the server.
    (send,) = [i for i, e in enumerate(result.trace) if e[1] == "c1" and e[2] == "send" and "(5.3.0)" in e[3]]
    arrivals = [a for a in message_arrows(result.raw_trace) if a.sent == send]
    assert len(arrivals) == 2 and not any(a.lost for a in arrivals)
    assert [result.trace[a.received][1:3] for a in arrivals] == [("server", "recv")] * 2


def test_requests_and_responses_are_arrows_from_sender_to_receiver():
    result = _replayed(PAUSE_FINDING)
    arrows = message_arrows(result.raw_trace)
    trace = result.trace
    grant = next(i for i, e in enumerate(trace) if e[2] == "reply" and e[3].startswith("granted L1 "))
    (to_c1,) = [a for a in arrows if a.sent == grant]
    assert trace[to_c1.received][1:3] == ("c1", "recv") and trace[to_c1.received][0] > trace[grant][0]
    for arrow in arrows:  # every arrow goes forward in time and ends where its message's key is received
        assert trace[arrow.sent][0] <= trace[arrow.received][0]
        assert trace[arrow.sent][1] != trace[arrow.received][1]


def test_writes_to_the_resource_and_lost_messages_are_arrows_too():
    result = run(scenario(steps=[
        {"at": "0s", "actor": "c1", "action": "acquire", "work": "1s", "writes": 1},
        {"at": "0s", "actor": "net", "action": "lose", "message": "1.3.0"},  # c1's release
    ]), 1)
    trace, arrows = result.trace, message_arrows(result.raw_trace)
    (write,) = [i for i, e in enumerate(trace) if e[1] == "resource"]
    (into,) = [a for a in arrows if a.received == write]
    assert trace[into.sent][1:3] == ("c1", "send") and trace[into.sent][3].startswith("write db/0")
    (back,) = [a for a in arrows if a.sent == write]
    assert trace[back.received][1:3] == ("c1", "recv")
    (lost,) = [a for a in arrows if a.lost]
    assert trace[lost.sent][3].startswith("release L1") and trace[lost.received][1:3] == ("net", "lost")


def test_the_causal_slice_is_marked_and_the_rest_is_not():
    result = _replayed(PAUSE_FINDING)
    data = page_data(result, Source("009", "dst replay 009"), every_step=True)
    in_slice = [e for e in data["events"] if e[5]]
    assert len(in_slice) == data["slice_size"] == len(result.causal(every_step=True)) < len(data["events"])
    assert [e[4] for e in in_slice] == [e[3] for e in result.causal(every_step=True)]
    assert all(lease["slice"] for lease in data["leases"])
    assert data["violation"]["invariant"] == "exclusive-seats" and data["violation"]["time"] == 62_002
    assert data["lanes"] == ["c1", "c2", "server"]


def test_the_page_carries_its_data_and_is_the_same_bytes_for_the_same_run():
    source = Source(str(DUPLICATE_FINDING), "dst replay x")
    data = page_data(_replayed(DUPLICATE_FINDING), source, every_step=True)
    page = render_page(data)
    assert read_page_data(page) == data
    assert render_page(page_data(_replayed(DUPLICATE_FINDING), source, every_step=True)) == page
    assert GENERATOR in page[:300]
    assert "http://" not in page and "https://" not in page  # nothing to fetch: it opens offline


HOSTILE = "</script><script>alert(1)</script>\u2028<!-- & \u2029 <b>bold</b>"


def test_text_from_a_run_cannot_break_out_of_the_data_block():
    result = run(scenario({"name": HOSTILE}, steps=[{"at": "0s", "actor": "c1", "action": "acquire"}]), 1)
    page = render_page(page_data(result, Source(HOSTILE + ", seed 1", "dst run --seed 1")))
    assert "alert(1)" in page  # the text is there, escaped ...
    assert "<script>alert" not in page and "<b>" not in page and "<!--" not in page  # ... and never markup
    assert "\u2028" not in page and "\u2029" not in page
    assert page.count("</script>") == 2  # the template's own two blocks
    data = read_page_data(page)
    assert data["scenario"] == HOSTILE and data["title"] == HOSTILE + ", seed 1"
    assert embed_json("</script>") == '"\\u003c/script\\u003e"'


# --- the command --------------------------------------------------------------------------------

def _one_line_error(capsys: Any) -> str:
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    return err.strip()


def test_show_writes_the_page_named_with_o(tmp_path, capsys):
    out = tmp_path / "page.html"
    assert main(["show", str(PAUSE_FINDING), "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert printed.splitlines()[0] == f"wrote {out}"
    assert "exclusive-seats at t=62.002s" in printed and "reproduces" in printed
    assert read_page_data(out.read_text())["violation"]["invariant"] == "exclusive-seats"
    assert out.stat().st_mode & 0o777 == 0o644


def test_show_without_o_writes_a_named_page_here_and_replaces_only_its_own(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["show", "--seed", "5"]) == 0
    name = "dst-show-default-seed-5.html"
    assert capsys.readouterr().out.splitlines()[0] == f"wrote {name}"
    first = (tmp_path / name).read_bytes()
    assert main(["show", "--seed", "5"]) == 0  # a page dst show wrote is replaced, with the same bytes
    assert (tmp_path / name).read_bytes() == first
    capsys.readouterr()
    mine = tmp_path / "notes.html"
    mine.write_text("my own notes")
    assert main(["show", "--seed", "5", "-o", "notes.html"]) == 2
    assert "notes.html: already exists and is not a page dst show wrote" in _one_line_error(capsys)
    assert mine.read_text() == "my own notes"
    assert main(["show", "--seed", "5", "-o", "notes.html", "--force"]) == 0
    assert read_page_data(mine.read_text())["seed"] == 5
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary file left


def test_show_names_a_seeds_page_after_its_flags(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["show", "--seed", "2", "--bug", "fallback-release", "--swarm"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "wrote dst-show-default-seed-2-fallback-release-swarm.html"


@pytest.mark.parametrize("argv, says", [
    (["show"], "dst show: give a finding file to replay, or --seed N to run"),
    (["show", str(PAUSE_FINDING), "--seed", "3"], "dst show: give a finding file, or --seed N"),
    (["show", "--seed", "x"], "expected a non-negative integer seed"),
    (["show", "--seed", "1", "--bug", "no-such-bug"], "unknown bug slug 'no-such-bug'"),
    (["show", "missing.toml"], "missing.toml"),
    (["show", str(ROOT / "scenarios" / "default.toml")], "expected a [finding] table"),
    (["show", "--seed", "1", "-o", "no/such/folder/page.html"], "cannot write the page (no folder no/such/folder)"),
    (["show", "--seed", "1", "-o", "."], ".: is a folder"),
    (["show", "--seed", "1", "-o", "bad\0name.html"], "cannot write the page"),
])
def test_show_errors_are_one_line_and_exit_2(argv, says, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    assert says in _one_line_error(capsys)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("make, what", [
    (os.mkdir, "a folder"),
    (os.mkfifo, "a FIFO, socket or device"),  # nobody writes it: opening it to look for a page would block forever
])
@pytest.mark.parametrize("force", [[], ["--force"]], ids=["", "force"])
def test_show_never_writes_over_what_is_not_a_file_and_says_so_once(make, what, force, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    make("page.html")
    assert main(["show", "--seed", "1", "-o", "page.html", *force]) == 2
    assert _one_line_error(capsys) == f"dst show: page.html: is {what}: name a file for the page"
    assert [p.name for p in tmp_path.iterdir()] == ["page.html"] and not os.path.isfile("page.html")


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere")
def test_show_says_a_folder_it_cannot_write_in_one_line(tmp_path, capsys):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    assert main(["show", "--seed", "1", "-o", str(locked / "page.html")]) == 2
    assert "cannot write the page (Permission denied)" in _one_line_error(capsys)


# --- the page in a real browser -------------------------------------------------------------------

@pytest.mark.slow
def test_the_page_in_headless_chromium(tmp_path, capsys):
    sync_playwright, chromium = chromium_or_skip()
    page_file = tmp_path / "page.html"
    assert main(["show", str(DUPLICATE_FINDING), "-o", str(page_file)]) == 0
    claims_file = tmp_path / "claims.html"
    assert main(["show", str(TWICE_FINDING), "-o", str(claims_file)]) == 0
    hostile_file = tmp_path / "hostile.html"
    hostile = run(scenario({"name": HOSTILE}, steps=[{"at": "0s", "actor": "c1", "action": "acquire"}]), 1)
    hostile_file.write_text(render_page(page_data(hostile, Source(HOSTILE, "dst run --seed 1"))))
    import aio_models  # noqa: F401 - a service of its own ids and no tokens
    from test_aio_system import scripted

    tokenless_file = tmp_path / "tokenless.html"
    tokenless = run(scripted("uuid_leases", [{"at": "0s", "actor": "c1", "action": "acquire", "work": "1s"}]), 1)
    tokenless_file.write_text(render_page(page_data(tokenless, Source("uuid", "dst run --seed 1"))))
    actors = {event[1] for event in _replayed(DUPLICATE_FINDING).trace}
    assert actors == {"c1", "server", "net"}

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 720})
            errors: list[str] = []
            page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
            page.on("pageerror", lambda error: errors.append(str(error)))
            page.on("dialog", lambda dialog: errors.append(f"a dialog opened: {dialog.message}"))
            page.goto(page_file.as_uri())
            page.wait_for_function("window.dstShow !== undefined")

            violation = page.locator("[data-violation]")
            assert violation.is_visible() and "no-foreign-release" in violation.inner_text()
            opened = page.evaluate("dstShow.view()")  # fitted to the causal slice, not the whole run
            page.click("[data-action=fit-slice]")
            assert page.evaluate("dstShow.view()") == opened
            page.click("[data-action=fit-all]")
            assert page.evaluate("dstShow.view()")["end"] - page.evaluate("dstShow.view()")["start"] > \
                opened["end"] - opened["start"]
            assert "lease (id \u00b7 token)" in page.inner_text("#legend")
            for actor in actors:
                assert page.locator(f'[data-lane="{actor}"]').is_visible(), actor

            where = page.evaluate("dstShow.locate('lease', 'L1')")
            page.mouse.move(where["x"], where["y"])
            page.wait_for_function("document.querySelector('[data-detail]').getAttribute('data-detail') === 'lease'")
            detail = page.inner_text("[data-detail]")
            assert "lease L1" in detail and "token 1" in detail and "held by c1" in detail
            assert page.locator("#tooltip").is_visible()

            axis = page.locator("[data-axis]")
            ticks, end = page.locator("[data-axis-tick]").all_inner_texts(), axis.get_attribute("data-view-end")
            box = page.locator("#plot").bounding_box()
            assert box is not None
            page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
            page.mouse.wheel(0, -400)  # zoom in at the pointer
            page.wait_for_function(f"document.querySelector('[data-axis]').getAttribute('data-view-end') !== '{end}'")
            assert page.locator("[data-axis-tick]").all_inner_texts() != ticks
            page.uncheck("#show-rest")  # the events outside the slice hidden, then the slice fitted
            page.click("[data-action=fit-slice]")

            shot = tmp_path / "page.png"
            page.screenshot(path=str(shot))
            assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000

            page.goto(claims_file.as_uri())  # a worker's claim on a run is a bar too
            page.wait_for_function("window.dstShow !== undefined")
            where = page.evaluate("dstShow.locate('lease', 'run 11')")
            page.mouse.move(where["x"], where["y"])
            page.wait_for_function("document.querySelector('[data-detail]').getAttribute('data-detail') === 'lease'")
            detail = page.inner_text("[data-detail]")
            assert "claim on run 11" in detail and "token 1" in detail and "held by c2" in detail
            assert "the run was delivered again" in detail

            page.goto(tokenless_file.as_uri())  # a service without tokens: no token in the legend
            page.wait_for_function("window.dstShow !== undefined")
            assert "lease (id)" in page.inner_text("#legend") and "token" not in page.inner_text("#legend")
            assert "work" in page.inner_text("#legend")

            page.goto(hostile_file.as_uri())  # text from the run stays text
            page.wait_for_function("window.dstShow !== undefined")
            assert page.title() == "dst show: " + HOSTILE
            assert page.inner_text("#title") == HOSTILE
            assert page.locator("script").count() == 2 and page.locator("b").count() == 0
            assert errors == []
        finally:
            browser.close()


def test_show_writes_the_page_to_standard_output_with_o_dash(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["show", "--seed", "2", "-o", "-"]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("<!DOCTYPE html>") and captured.out.rstrip().endswith("</html>")
    assert "events" in captured.err and "wrote" not in captured.err  # what dst says goes to stderr
    assert list(tmp_path.iterdir()) == []  # no file called "-"
