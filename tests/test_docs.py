"""What README.md and docs/ show is true."""

from __future__ import annotations

import difflib
import re
import tomllib
from pathlib import Path

import attrs
import pytest

from dst.cli import build_parser, main, reference
from dst.runner import run
from dst.scenario import ScenarioError, load_scenario, parse_scenario

ROOT = Path(__file__).resolve().parents[1]


def _blocks(path: Path, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", path.read_text(), re.S)


def test_the_script_example_of_the_scenario_docs_loads_and_runs_exactly_its_steps():
    (block,) = [b for b in _blocks(ROOT / "docs" / "scenarios.md", "toml") if "steps" in b and "[model]" in b]
    scenario = parse_scenario(tomllib.loads(block), "script.toml")
    assert scenario.steps is not None and len(scenario.steps) == 4
    result = run(scenario, 1)
    assert result.plan == scenario.steps and result.ok
    assert "jobs ended    done 1, renewal failed 1" in (ROOT / "docs" / "scenarios.md").read_text()
    assert sorted(result.jobs.items()) == [("done", 1), ("renewal failed", 1)]  # what the page says it printed
    wrong = run(attrs.evolve(scenario, bugs=("continue-after-lost-renewal",)), 1)
    assert wrong.violation is not None and (wrong.violation.invariant, wrong.violation.time) == ("single-executor", 99_069)


@pytest.mark.parametrize("doc", ["README.md", "docs/cli.md"])
def test_every_flag_a_command_line_of_the_readme_or_the_cli_page_shows_exists(doc):
    lines = [line for block in _blocks(ROOT / doc, "sh") for line in block.splitlines() if line.startswith("dst ")]
    assert lines
    for line in lines:
        for part in line.split("#")[0].split("&&"):  # dst fuzz ... > report.json && dst show report.json
            argv = part.split(">")[0].split()[1:]
            assert main(argv + ["--help"]) == 0, line  # --help proves the parser knows every flag on the line


def test_the_cli_page_is_what_the_parser_says():
    written, generated = (ROOT / "docs" / "cli.md").read_text(), reference.render()
    if written != generated:
        diff = "".join(list(difflib.unified_diff(written.splitlines(True), generated.splitlines(True),
                                                 "docs/cli.md", "the parser"))[:40])
        pytest.fail(f"docs/cli.md differs from the parser: run {reference.COMMAND}\n{diff}")


def test_the_cli_page_has_a_row_for_every_flag_of_every_command():
    page = (ROOT / "docs" / "cli.md").read_text()
    for name, _, parser in reference.subcommands(build_parser()):
        section = page.split(f"\n## `dst {name}`\n")[1].split("\n## ")[0]
        for action in parser._actions:
            if action.option_strings == ["-h", "--help"]:
                continue
            assert f"| `{reference.spelling(action)}` |" in section, (name, action.dest)
            for flag in action.option_strings:  # as --help spells it
                assert flag in section, (name, flag)


def test_every_exit_code_is_on_the_cli_page_with_its_meaning():
    from dst.cli import command

    page = (ROOT / "docs" / "cli.md").read_text()
    codes = [value for key, value in vars(command).items() if key.startswith("EXIT_") and isinstance(value, int)]
    assert sorted(codes) == sorted(command.EXIT_MEANINGS) and len(codes) == 7
    for code in codes:
        assert f"| `{code}` | {reference.cell(command.EXIT_MEANINGS[code])} |" in page, code


def test_a_flag_without_help_or_a_command_without_words_stops_the_cli_generator(monkeypatch):
    parser = build_parser()
    (_, _, run_parser), *_ = reference.subcommands(parser)
    run_parser.add_argument("--sooner", action="store_true")
    with pytest.raises(reference.Undocumented, match=r"dst run --sooner: a flag without help"):
        reference.flag_table("run", run_parser)
    monkeypatch.delitem(reference.COMMANDS, "merge")
    with pytest.raises(reference.Undocumented, match=r"dst merge: a command without its words"):
        reference.render()


@pytest.mark.parametrize("line, toml", [
    ("dst: bad.toml: model.ttl: expected a duration above zero, got '0s'", '[model]\nttl = "0s"\n'),
    ("dst: bad.toml: faults.pause.rate: expected a number of faults per virtual minute from 0 to 1,000, got -1",
     "[faults]\npause = { rate = -1 }\n"),
    ("dst: bad.toml: steps[1].action: expected one of acquire, branch, cancel, clock-skew, crash, delay, duplicate, lose, partition, pause, proxy-retry, reset, restart, serve, slow, store-reset, submit, got 'jump'",
     'steps = [{ at = "0s", actor = "c1", action = "acquire" }, { at = "1s", actor = "c1", action = "jump" }]\n'),
])
def test_the_error_lines_in_docs_are_what_dst_prints(line, toml, tmp_path, monkeypatch, capsys):
    assert line in (ROOT / "docs" / "scenarios.md").read_text()
    monkeypatch.chdir(tmp_path)
    Path("bad.toml").write_text(toml)
    assert main(["run", "--scenario", "bad.toml"]) == 2
    assert capsys.readouterr().err.strip() == line


def test_the_default_scenario_documents_every_key_it_sets():
    doc = (ROOT / "docs" / "scenarios.md").read_text()
    data = tomllib.loads((ROOT / "scenarios" / "default.toml").read_text())
    for section, values in data.items():
        keys = values if isinstance(values, dict) else {section: values}
        for key in keys:
            assert f"`{key}`" in doc, f"{section}.{key} is not documented"
    load_scenario(ROOT / "scenarios" / "default.toml")


def test_the_cli_page_lists_every_bug_slug():
    from dst.reference.bugs import KNOWN_BUGS

    page = (ROOT / "docs" / "cli.md").read_text()
    assert [slug for slug in KNOWN_BUGS if f"| [`{slug}`](catalogue.md#{slug}) |" not in page] == []


def test_every_fault_kind_invariant_and_bug_is_documented():
    from dst.faults import FAULTS
    from dst.invariants import INVARIANT_IDS
    from dst.reference.bugs import KNOWN_BUGS

    scenarios = (ROOT / "docs" / "scenarios.md").read_text()
    assert [k.name for k in FAULTS if f"| `{k.name}` |" not in scenarios] == []
    catalogue = (ROOT / "docs" / "catalogue.md").read_text()
    assert [i for i in INVARIANT_IDS if f"\n| `{i}` |" not in catalogue] == []  # a row in its invariant table
    assert [slug for slug in KNOWN_BUGS if slug not in catalogue] == []


def test_the_docs_link_only_to_files_that_exist():
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", doc.read_text()):
            assert (doc.parent / target).exists(), f"{doc.name} links to {target}"


def test_the_fault_table_in_the_docs_gives_the_codes_defaults():
    from dst.scenario import FaultsConfig, load_scenario, scenario_to_doc

    doc = (ROOT / "docs" / "scenarios.md").read_text()
    written = scenario_to_doc(load_scenario().__class__())["faults"]  # a scenario that sets no fault
    for kind, rate in FaultsConfig().kinds():
        row = re.search(rf"^\| `{kind}` \| `(.*?)` \|", doc, re.M)
        assert row, kind
        shown = tomllib.loads(f"x = {row.group(1)}")["x"]
        assert shown == {k: v for k, v in written[kind].items() if k in shown}, kind
        assert shown["rate"] == rate.rate == 0 and (rate.duration == (0, 0) or "duration" in shown), kind


def test_no_file_holds_a_merge_conflict_marker() -> None:
    root = Path(__file__).resolve().parents[1]
    tracked = [p for folder in ("src", "docs", "tests", "examples", "bench", "findings", "scenarios")
               for p in (root / folder).rglob("*") if p.is_file() and p.suffix in (".py", ".md", ".toml", ".yml", ".html")]
    tracked += [root / "README.md", root / "BENCHMARKS.md", root / "pyproject.toml"]
    marked = [str(p.relative_to(root)) for p in tracked
              if any(line.startswith(("<<<<<<< ", ">>>>>>> ")) for line in p.read_text(errors="replace").splitlines())]
    assert marked == []


def _marked(path: Path, mark: str) -> str:
    """The python block that follows ``<!-- mark -->`` in ``path``."""
    match = re.search(rf"<!-- {re.escape(mark)} -->\n```python\n(.*?)```", path.read_text(), re.S)
    assert match is not None, f"{path.name} has no python block marked {mark!r}"
    return match.group(1)


def test_the_asyncio_pages_measured_rounding_is_what_the_loop_does():
    exec(compile(_marked(ROOT / "docs" / "asyncio.md", "rounding: measured"), "asyncio.md", "exec"), {})


def test_the_asyncio_pages_adapter_is_complete_and_runs(tmp_path, monkeypatch):
    import sys

    (tmp_path / "doc_adapter.py").write_text(_marked(ROOT / "docs" / "asyncio.md", "adapter: asyncio"))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "doc_adapter", raising=False)
    scenario = attrs.evolve(load_scenario(None, model="doc_adapter:model"), steps=None)
    result = run(scenario, 1)
    assert result.ok, result.violation
    assert result.jobs.get("done", 0) > 0 and result.checks > 0
