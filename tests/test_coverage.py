"""Campaign coverage: the faults that fired, the risky situations reached, the cases each invariant met.

A situation is counted where it happens (the shipped findings are each a minimal story of one), a
campaign's totals are the sum of its runs', and the summary names what was never reached — on a
scenario that cannot reach it — and says it was reached on one that can.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dst.cli import main
from dst.runner.swarm import swarm
from dst.findings import read, replay
from dst.invariants.situations import SITUATIONS, catalogue, cases_met
from dst.models import resolve
from dst.runner import run
from dst.scenario import load_scenario
from dst.sut import Situation

REPO = Path(__file__).resolve().parents[1]

# Each finding is the story of one situation (and more may come up on the way).
STORIES = {
    "002-count-disagrees-with-live-leases-after-a-server-restart.toml": "server-down-with-leases",
    "003-release-frees-another-holders-slot-with-a-duplicated-message.toml": "release-repeated",
    "005-stale-write-accepted-with-a-delayed-message.toml": "stale-write",
    "009-two-leases-on-one-seat-after-a-pause.toml": "paused-past-expiry",
    "011-works-without-a-recognised-lease-during-a-partition.toml": "cut-off-holding",
    "015-run-stuck-in-cancelling-after-a-client-restart.toml": "cancelled-while-running",
    "016-run-stuck-in-cancelling-after-a-server-restart.toml": "worker-died-with-run",
    "018-run-executed-twice-during-a-partition.toml": "redelivered-while-working",
    "019-cancelled-run-starts.toml": "cancelled-before-start",
    "024-works-without-a-recognised-lease-after-a-pause.toml": "reclaimed-while-working",
}


@pytest.mark.parametrize("finding, situation", sorted(STORIES.items()))
def test_each_finding_reaches_the_situation_its_story_is_about(finding: str, situation: str) -> None:
    result = replay(read(REPO / "findings" / finding)).result
    assert result.situations.get(situation, 0) >= 1, result.situations


def test_every_situation_is_told_by_a_finding_or_the_campaign_test() -> None:
    told = set(STORIES.values()) | {"died-holding-leases"}  # the campaign test below reaches it
    assert {s.id for s in catalogue(resolve("dst.reference:model").situations)} == told


def test_a_situation_names_only_invariants_that_exist() -> None:
    from dst.invariants import INVARIANT_IDS

    for s in catalogue(resolve("dst.reference:model").situations):
        assert s.tests and set(s.tests) <= set(INVARIANT_IDS), s.id
        assert s.never and s.statement


def test_cases_are_the_situations_that_test_each_checked_invariant() -> None:
    situations = (Situation("a", "", ("x", "y")), Situation("b", "", ("y", "z")))
    assert cases_met({"a": 2, "b": 3}, situations, ("x", "y")) == {"x": 2, "y": 5}  # z was not checked
    assert cases_met({}, situations, ("x",)) == {"x": 0}


# --- a campaign ------------------------------------------------------------------------------------

NO_PAUSES = """
name = "no-pauses"
[faults]
crash = { rate = 0.0 }
restart = { rate = 2.0 }
pause = { rate = 0.0 }
partition = { rate = 0.0 }
"""

PAUSES = NO_PAUSES.replace('name = "no-pauses"', 'name = "pauses"').replace(
    "pause = { rate = 0.0 }", "pause = { rate = 4.0 }") + '[workload]\nwork = ["20s", "90s"]\n'  # long holds


def fuzz_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    code = main(["fuzz", *argv, "--json", "--no-findings"])
    assert code in (0, 1)
    return json.loads(capsys.readouterr().out)


def test_never_reached_on_a_scenario_that_cannot_reach_it_and_reached_on_one_that_can(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    calm, paused = tmp_path / "no-pauses.toml", tmp_path / "pauses.toml"
    calm.write_text(NO_PAUSES)
    paused.write_text(PAUSES)
    args = ("--seeds", "1:21", "--workers", "1", "--no-swarm")
    never = fuzz_json(capsys, "--scenario", str(calm), *args)["coverage"]
    paused_past = never["situations"]["paused-past-expiry"]
    assert (paused_past["reached"], paused_past["runs"]) == (0, 0)
    assert paused_past["never"] == "no holder was ever paused past its lease's expiry"  # the report's own words
    assert "single-executor" in paused_past["tests"] and paused_past["statement"]
    assert never["faults"].get("pause", 0) == 0 and never["faults"]["restart"] > 0
    assert never["situations"]["died-holding-leases"]["runs"] > 0  # restarts while holding: the other case
    reached = fuzz_json(capsys, "--scenario", str(paused), *args)["coverage"]
    assert reached["situations"]["paused-past-expiry"]["runs"] > 0
    assert reached["invariants"]["single-executor"] > never["invariants"]["single-executor"]

    # The summary says it in words: what was never reached, and which invariants went untested there.
    assert main(["fuzz", "--scenario", str(calm), *args, "--no-findings"]) == 0
    out = capsys.readouterr().out
    assert "never reached" in out and "no holder was ever paused past its lease's expiry" in out
    assert main(["fuzz", "--scenario", str(paused), *args, "--no-findings"]) == 0
    assert "no holder was ever paused past its lease's expiry" not in capsys.readouterr().out


def test_a_campaign_sums_its_runs_and_does_not_depend_on_workers(capsys: pytest.CaptureFixture[str]) -> None:
    scenario = load_scenario("default")
    one = fuzz_json(capsys, "--scenario", "default", "--seeds", "1:25", "--workers", "1")["coverage"]
    two = fuzz_json(capsys, "--scenario", "default", "--seeds", "1:25", "--workers", "2")["coverage"]
    assert one == two
    reached: dict[str, int] = {}
    runs: dict[str, int] = {}
    for seed in range(1, 25):
        for name, n in run(swarm(scenario, seed), seed).situations.items():
            reached[name] = reached.get(name, 0) + n
            runs[name] = runs.get(name, 0) + 1
    assert {k: v["reached"] for k, v in one["situations"].items() if v["reached"]} == reached
    assert {k: v["runs"] for k, v in one["situations"].items() if v["runs"]} == runs
    assert sum(one["faults"].values()) > 0


def test_dst_knows_situations_of_its_own_and_the_model_adds_its_own() -> None:
    ours = {unit.id for unit in SITUATIONS}
    model = {s.id for s in resolve("dst.reference:model").situations}
    assert "paused-past-expiry" in ours and model == {"release-repeated"}


# --- the campaign's page ---------------------------------------------------------------------------

@pytest.mark.slow
def test_show_draws_a_campaign_report_with_what_it_never_reached(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    from conftest import chromium_or_skip

    calm = tmp_path / "no-pauses.toml"
    calm.write_text(NO_PAUSES.replace('name = "no-pauses"', 'name = "<b>bold</b> </script>"'))
    report = tmp_path / "report.json"
    report.write_text(json.dumps(fuzz_json(capsys, "--scenario", str(calm), "--seeds", "1:11", "--workers", "1",
                                           "--no-swarm")))
    page = tmp_path / "campaign.html"
    assert main(["show", str(report), "-o", str(page)]) == 0
    html = page.read_text()
    assert "no holder was ever paused past its lease&#x27;s expiry" in html
    assert "<b>bold</b>" not in html and "&lt;b&gt;bold&lt;/b&gt;" in html  # the name is text, not markup
    assert main(["show", str(report), "-o", str(page)]) == 0  # its own page is replaced

    sync_playwright, chromium = chromium_or_skip()
    errors: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        try:
            tab = browser.new_page()
            tab.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            tab.on("pageerror", lambda e: errors.append(str(e)))
            tab.goto(page.as_uri())
            never = tab.locator('[data-role="never"]').all_inner_texts()
            assert any("paused past its lease's expiry" in line for line in never)
            reached = tab.locator('[data-role="situation"][data-name="died-holding-leases"]')
            assert int(reached.get_attribute("data-count") or 0) > 0
            assert tab.locator('[data-role="invariant"]').count() > 5
            assert tab.title().startswith("dst campaign: <b>bold</b>")
            tab.screenshot(path=str(tmp_path / "campaign.png"), full_page=True)
        finally:
            browser.close()
    assert not errors, errors
    assert (tmp_path / "campaign.png").stat().st_size > 10_000


def test_a_report_is_drawn_from_its_own_data_and_runs_no_code(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A report someone sent names a model: drawing it (the page, and the summary dst merge prints) must not
    import that model, whatever sits on the import path under its name."""
    calm = tmp_path / "no-pauses.toml"
    calm.write_text(NO_PAUSES)
    report = fuzz_json(capsys, "--scenario", str(calm), "--seeds", "1:6", "--workers", "1", "--no-swarm")
    trap = tmp_path / "trap"
    trap.mkdir()
    (trap / "sent_model.py").write_text(f"open({str(tmp_path / 'ran')!r}, 'w').close()\nraise SystemExit(0)\n")
    monkeypatch.syspath_prepend(str(trap))
    monkeypatch.chdir(trap)
    (trap / "report.json").write_text(json.dumps({**report, "model": "sent_model:model"}))
    assert main(["show", "report.json", "-o", "page.html"]) == 0
    html = (trap / "page.html").read_text()
    assert "no holder was ever paused past its lease&#x27;s expiry" in html  # explained without the model
    assert main(["merge", "report.json"]) == 0
    assert "never reached" in capsys.readouterr().out
    assert not (tmp_path / "ran").exists()


FINDINGS = sorted((Path(__file__).resolve().parents[1] / "findings").glob("[0-9]*.toml"))


def test_the_shipped_findings_violate_every_invariant_a_catalogue_bug_breaks_first() -> None:
    # So the test below feeds a report with a violation of each of them.
    from dst.reference.bugs import CATALOGUE

    violated = {read(path).invariant for path in FINDINGS}
    assert {bug.breaks[0] for bug in CATALOGUE} <= violated


@pytest.mark.parametrize("path", FINDINGS, ids=lambda p: p.name[:3])
def test_no_summary_line_contradicts_the_violation_it_reports(path: Path) -> None:
    # Each shipped finding violates one invariant (they cover every one the catalogue's bugs break): the report
    # of a campaign of that one run, printed or drawn, must not say the invariant never met its case, nor list
    # it as untested against a situation.
    from dst.explore import report
    from dst.explore.fuzz import Tally, run_seed, tallied
    from dst.present.campaign_page import campaign_page
    from dst.present.terminal import render_fuzz
    from rich.console import Console

    finding = read(path)
    tally = Tally()
    tally.add(run_seed(finding.scenario, finding.seed, use_swarm=False))
    result = tallied(tally, (finding.scenario,), False, "seeds", 0.0)
    doc = report.build(result, (finding.scenario,), first=finding.seed, stop=finding.seed + 1, shard=None,
                       interrupted=False, findings=[])
    [violated] = [g["invariant"] for g in doc["signatures"]]
    assert doc["coverage"]["invariants"][violated] >= 1
    console = Console(width=1000, record=True)
    render_fuzz(console, doc)
    page = campaign_page(doc)
    said = [line for line in console.export_text().splitlines() + page.splitlines()
            if "never tested" in line or "never met a case" in line]
    assert not [line for line in said if violated in line]
    assert not [line for line in result.never_reached if violated in line]
