"""A campaign's report has one schema (dst.explore.report): what dst fuzz --json writes is what it declares, and
every command that reads a report (dst merge, dst show report.json) refuses one that breaks it in one line naming
the file and the key, instead of failing later in what draws it."""

from __future__ import annotations

import contextlib
import io
import json
import typing
from pathlib import Path
from typing import Any

import pytest

from dst.cli import main
from dst.explore import report


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A real campaign's report, with a finding in it."""
    findings = tmp_path_factory.mktemp("campaign") / "findings"
    argv = ["fuzz", "--scenario", "double-release", "--seeds", "1:9", "--workers", "1", "--json",
            "--findings", str(findings)]
    with contextlib.redirect_stdout(io.StringIO()) as out:  # module-wide: capsys is one test's
        assert main(argv) == 1
    parsed: dict[str, Any] = json.loads(out.getvalue())
    return parsed


def _declared(shape: type) -> list[str]:
    return list(typing.get_type_hints(shape))


def test_what_dst_fuzz_writes_is_what_the_schema_declares_in_its_order(written: dict[str, Any]) -> None:
    assert list(written) == _declared(report.Report)
    assert list(written["seeds"]) == [k for k in _declared(report.SeedRange) if k != "shards_missing"]
    assert written["signatures"] and all(list(s) == _declared(report.Signature) for s in written["signatures"])
    assert written["findings"] and all(list(f) == _declared(report.FindingEntry) for f in written["findings"])
    assert report.check(written, "report.json") is written  # checked, and handed back as it is: its bytes kept
    assert report.dumps(report.check(written, "r")) == json.dumps(written, indent=2)


def _refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], bad: dict[str, Any]) -> list[str]:
    """The one line each reader says of ``bad`` (dst merge, dst show), exit 2 and no traceback."""
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(bad))
    lines = []
    for argv in (["merge", str(path)], ["show", str(path), "-o", str(tmp_path / "page.html")]):
        assert main(argv) == 2
        captured = capsys.readouterr()
        assert captured.out == "" and "Traceback" not in captured.err
        (line,) = captured.err.strip().splitlines()
        lines.append(line)
    assert not (tmp_path / "page.html").exists()
    return lines


@pytest.mark.parametrize("change, expected", [
    # A finding entry that lacks what the summary prints of it (the text summary failed on it with a KeyError).
    (lambda r: r["findings"][0].pop("new"), "findings[0].new: expected true or false, but the key is missing"),
    (lambda r: r["findings"][0].update(steps_after="2"), "findings[0].steps_after: expected a non-negative integer"),
    # Coverage of another shape (the page and the summary failed on it).
    (lambda r: r.update(coverage=[]), "coverage: expected an object with faults, situations and invariants"),
    (lambda r: r["coverage"]["faults"].update(lose="many"), "coverage: expected an object with faults"),
    (lambda r: r["coverage"]["situations"].update(x={"runs": 1}), "coverage: expected an object with faults"),
    (lambda r: r["signatures"][0].update(first_seed=-1), "signatures[0].first_seed: expected a non-negative integer"),
    (lambda r: r["seeds"].update(shards_missing="2"), "seeds.shards_missing: expected a list of non-negative integers"),
    (lambda r: r.update(version=2), "version: expected 1 (or none), got 2: a report of another dst version"),
])
def test_a_report_that_breaks_the_schema_is_one_line_naming_the_file_and_the_key(
        change: Any, expected: str, written: dict[str, Any], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    bad = json.loads(json.dumps(written))
    change(bad)
    for line in _refused(tmp_path, capsys, bad):
        assert line.startswith(f"dst: {tmp_path / 'bad.json'}: {expected}"), line


def test_a_report_without_coverage_or_with_version_1_is_read(written: dict[str, Any]) -> None:
    older = {k: v for k, v in written.items() if k != "coverage"}  # reports from before coverage
    assert report.check(older, "old.json") == older
    assert report.check(dict(written, version=report.VERSION), "v1.json")["seeds_run"] == written["seeds_run"]
