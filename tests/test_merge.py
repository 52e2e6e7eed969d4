"""dst merge: the shards' reports of a campaign, merged, are the unsharded campaign's report; reports that
are not one campaign's, or not reports at all, are one line and exit 2."""

from __future__ import annotations

import copy
import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from dst.cli import main
from dst.explore.fuzz import SEEDS_SHOWN
from dst.explore.merge import merge_reports

WALL_CLOCK = ("wall_seconds", "seeds_per_second")
CAMPAIGN = ["--scenario", "immortal-lease", "--seeds", "1:41"]  # 3 signatures, one of more seeds than a report lists


def fuzz(capsys: pytest.CaptureFixture[str], argv: list[str]) -> dict[str, Any]:
    code = main(["fuzz", *argv, "--json", "--no-findings", "--workers", "1"])
    report = json.loads(capsys.readouterr().out)
    assert code == (1 if report["violations"] else 0)
    return report


def shards(capsys: pytest.CaptureFixture[str], argv: list[str], n: int, folder: Path) -> list[str]:
    """Run the campaign as N shard jobs; the paths of their reports."""
    paths = []
    for k in range(1, n + 1):
        path = folder / f"shard-{k}-of-{n}.json"
        path.write_text(json.dumps(fuzz(capsys, [*argv, "--shard", f"{k}/{n}"])))
        paths.append(str(path))
    return paths


def merge(capsys: pytest.CaptureFixture[str], files: list[str]) -> tuple[int, str]:
    code = main(["merge", *files, "--json"])
    return code, capsys.readouterr().out


def without_wall_clock(report: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in report.items() if k not in WALL_CLOCK}


@pytest.mark.parametrize("argv, counts", [
    (CAMPAIGN, (1, 2, 3, 5)),
    (["--scenario", "no-cancel-tombstone", "--seeds", "15:31"], (3,)),  # seed 21 ends undrained: unjudged joins
])
@pytest.mark.slow
def test_merging_the_shards_gives_the_unsharded_report(argv, counts, capsys, tmp_path):
    whole = fuzz(capsys, argv)
    assert len(whole["signatures"]) >= 1 and whole["invariants"]
    if argv is CAMPAIGN:
        assert len(whole["signatures"]) >= 3 and max(s["count"] for s in whole["signatures"]) > SEEDS_SHOWN
    else:
        assert whole["unjudged"]
    for n in counts:
        code, out = merge(capsys, shards(capsys, argv, n, tmp_path))
        merged = json.loads(out)
        assert code == 1
        assert list(merged) == list(whole), n
        assert without_wall_clock(merged) == without_wall_clock(whole), n


def test_the_merged_report_is_the_same_bytes_in_any_order_of_the_files(capsys, tmp_path):
    files = shards(capsys, ["--scenario", "double-release", "--seeds", "1:25"], 3, tmp_path)
    outputs = {merge(capsys, list(order))[1] for order in itertools.permutations(files)}
    assert len(outputs) == 1


def test_missing_shards_are_said_and_a_partial_merge_merges_again(capsys, tmp_path):
    one, two, three, four = shards(capsys, ["--scenario", "double-release", "--seeds", "1:25"], 4, tmp_path)
    code, out = merge(capsys, [four, one, three])
    partial = json.loads(out)
    assert code == 1
    assert partial["seeds"]["shard"] == "1,3,4/4" and partial["seeds"]["shards_missing"] == [2]
    assert main(["merge", one, three, four]) == 1
    assert "shard 1,3,4/4" in capsys.readouterr().out.replace("\n", " ")
    (tmp_path / "partial.json").write_text(out)
    again = json.loads(merge(capsys, [str(tmp_path / "partial.json"), two])[1])
    assert without_wall_clock(again) == without_wall_clock(json.loads(merge(capsys, [one, two, three, four])[1]))
    assert again["seeds"]["shard"] is None and "shards_missing" not in again["seeds"]


def test_a_clean_campaign_merges_to_exit_0(capsys, tmp_path):
    files = shards(capsys, ["--seeds", "1:5"], 2, tmp_path)
    assert main(["merge", *files]) == 0
    assert "0 violation(s)" in capsys.readouterr().out


# --- pure merging: findings and coverage -----------------------------------------------------------

def _report(shard: str, signatures: list[tuple[str, int, list[int]]], **extra: Any) -> dict[str, Any]:
    """A small report of a campaign over seeds 1..9 with these (signature, first seed, seeds)."""
    return {
        "scenario": "s", "source": "s.toml", "model": "m:model", "bugs": [], "swarm": True,
        "seeds": {"first": 1, "stop": 10, "shard": shard, "last_run": 9}, "seeds_run": 4, "events": 100,
        "violations": sum(len(seeds) for _, _, seeds in signatures), "interrupted": False, "wall_seconds": 1.0,
        "seeds_per_second": 4.0, "invariants": ["capacity"],
        "signatures": [{"invariant": "capacity", "signature": sig, "count": len(seeds), "seeds": seeds,
                        "first_seed": first, "message": f"{sig} at {first}", "time_ms": 5,
                        "reproduce": f"dst run --seed {first}"} for sig, first, seeds in signatures],
        "unjudged": [], "findings": [], **extra,
    }


def test_findings_keep_the_one_of_the_smallest_first_seed_with_its_path_as_written():
    a = _report("1/2", [("capacity: x", 3, [3, 5])])
    b = _report("2/2", [("capacity: x", 2, [2]), ("capacity: y", 4, [4])])
    a["findings"] = [{"signature": "capacity: x", "path": "findings-1/001-x.toml", "new": True}]
    b["findings"] = [{"signature": "capacity: x", "path": "findings-2/001-x.toml", "new": True},
                     {"signature": "capacity: y", "path": "findings-2/002-y.toml", "new": True}]
    merged = merge_reports([("a.json", a), ("b.json", b)])
    assert [f["path"] for f in merged["findings"]] == ["findings-2/001-x.toml", "findings-2/002-y.toml"]
    x = merged["signatures"][0]
    assert (x["signature"], x["count"], x["seeds"], x["first_seed"], x["message"]) == \
        ("capacity: x", 3, [2, 3, 5], 2, "capacity: x at 2")


def test_coverage_is_summed_without_knowing_its_keys():
    a = _report("1/2", [], coverage={"checks": {"capacity": 3, "by_fault": {"crash": 1}}, "actions": ["lose", "crash"]})
    b = _report("2/2", [], coverage={"checks": {"capacity": 4, "fenced-writes": 2, "by_fault": {"crash": 2, "pause": 1}},
                                     "actions": ["pause", "crash"]})
    merged = merge_reports([("b.json", b), ("a.json", a)])
    assert merged["coverage"] == {"checks": {"capacity": 7, "by_fault": {"crash": 3, "pause": 1}, "fenced-writes": 2},
                                  "actions": ["crash", "lose", "pause"]}


# --- refusals: one line naming the file and the key, exit 2 ---------------------------------------

def one_line_error(capsys: pytest.CaptureFixture[str], files: list[str]) -> str:
    assert main(["merge", *files]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in captured.err and captured.out == "", captured.err
    return lines[0]


@pytest.fixture
def two_shards(tmp_path: Path) -> tuple[Path, Path]:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(_report("1/2", [("capacity: x", 1, [1])])))
    b.write_text(json.dumps(_report("2/2", [("capacity: x", 2, [2])])))
    return a, b


@pytest.mark.parametrize("change, expected", [
    (lambda r: r.update(scenario="other"), "b.json: scenario: expected 's' as in"),
    (lambda r: r.update(model="x:model"), "b.json: model: expected 'm:model' as in"),
    (lambda r: r.update(bugs=["double-release"]), "b.json: bugs: expected [] as in"),
    (lambda r: r.update(swarm=False), "b.json: swarm: expected True as in"),
    (lambda r: r["seeds"].update(stop=20), "b.json: seeds.stop: expected 10 as in"),
    (lambda r: r["seeds"].update(shard="2/3"), "b.json: seeds.shard: expected a shard of N = 2"),
    (lambda r: r["seeds"].update(shard="1/2"), "b.json: seeds.shard: shard 1/2 is also in"),
    (lambda r: r["seeds"].update(shard=None), "seeds.shard: ran every seed of the range (null), so it overlaps"),
])
def test_reports_of_different_campaigns_or_overlapping_shards_are_refused(change, expected, two_shards, capsys):
    a, b = two_shards
    report = json.loads(b.read_text())
    change(report)
    b.write_text(json.dumps(report))
    for files in ([str(a), str(b)], [str(b), str(a)]):
        line = one_line_error(capsys, files)
        assert expected in line and line.startswith("dst: ")


def test_the_same_file_twice_overlaps(two_shards, capsys):
    a, _ = two_shards
    assert "seeds.shard: shard 1/2 is also in" in one_line_error(capsys, [str(a), str(a)])


def _set(path: str, value: Any) -> Any:
    def change(report: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        target: Any = report
        for key in parents:
            target = target[int(key)] if key.isdigit() else target[key]
        index = int(last) if last.isdigit() else last
        if value is KeyError:
            del target[index]
        else:
            target[index] = value
    return change


@pytest.mark.parametrize("text, expected", [
    ("", "b.json: empty file"),
    ("{", "b.json: not valid JSON"),
    ("[1, 2]", "b.json: the report: expected an object, got [1, 2]"),
    ("[" * 100_000 + "]" * 100_000, "b.json: not valid JSON for dst: nested too deep"),
    ('{"seeds_run": NaN}', "b.json: not valid JSON for dst: NaN is not a number"),
    ('{"seeds_run": ' + "9" * 5000 + "}", "b.json: not valid JSON for dst: Exceeds the limit"),
    (_set("seeds_run", KeyError), "b.json: seeds_run: expected a non-negative integer, but the key is missing"),
    (_set("violations", "3"), "b.json: violations: expected a non-negative integer, got '3'"),
    (_set("swarm", 1), "b.json: swarm: expected true or false, got 1"),
    (_set("seeds.shard", "3/2"), "b.json: seeds.shard: expected null or 'K/N' with 1 <= K <= N"),
    (_set("signatures.0.count", True), "b.json: signatures[0].count: expected a non-negative integer, got True"),
    (_set("signatures.0.seeds", [1, "2"]), "b.json: signatures[0].seeds: expected a list of non-negative integers"),
    (_set("signatures.0", "x"), "b.json: signatures[0]: expected an object, got 'x'"),
    (_set("findings", {}), "b.json: findings: expected a list, got {}"),
])
def test_a_file_that_is_not_a_report_is_one_line_naming_the_file_and_the_key(text, expected, two_shards, capsys):
    a, b = two_shards
    if callable(text):
        report = json.loads(b.read_text())
        text(report)
        text = json.dumps(report)
    b.write_text(text)
    assert expected in one_line_error(capsys, [str(a), str(b)])


def test_a_missing_file_or_a_folder_is_one_line(two_shards, capsys, tmp_path):
    a, _ = two_shards
    assert "no-such.json: no such file" in one_line_error(capsys, [str(a), str(tmp_path / "no-such.json")])
    assert "it is a folder" in one_line_error(capsys, [str(a), str(tmp_path)])


def test_merging_leaves_its_inputs_as_they_were():
    a = _report("1/2", [("capacity: x", 3, [3])])
    b = _report("2/2", [("capacity: x", 2, [2])])
    before = copy.deepcopy([a, b])
    merge_reports([("a", a), ("b", b)])
    assert [a, b] == before
