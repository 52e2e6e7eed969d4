"""docs/api.md is true: every example in it runs, prints what the page says, and type-checks under mypy --strict."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "api.md"


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", PAGE.read_text(), re.S)


@pytest.mark.slow
def test_every_example_runs_in_order_and_prints_what_the_page_shows(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # whatever an example writes lands here
    namespace: dict[str, object] = {"__name__": "api_md"}
    for block in _blocks("python"):
        exec(compile(block, str(PAGE), "exec"), namespace)
    printed = capsys.readouterr().out
    (shown,) = [b for b in _blocks("text") if "VIOLATION of" in b]  # the explained run, as the page prints it
    for line in shown.splitlines():
        if line.strip() != "...":
            assert line in printed.splitlines(), line
    # The one-line errors and results the examples' comments quote.
    for quoted in re.findall(r"print\(.*?\)\s+# (.+)", PAGE.read_text()):
        head = quoted.split("...")[0].strip()
        if ":" in head and not head.startswith("one line"):
            assert any(line.startswith(head) for line in printed.splitlines()), head


@pytest.mark.slow
def test_the_examples_type_check_under_mypy_strict(mypy, tmp_path):
    """A typed use of run, fuzz, shrink, replay and plans, as a user's strict mypy sees it."""
    (tmp_path / "examples.py").write_text("\n".join(_blocks("python")))
    done = mypy(tmp_path / "examples.py", "--strict")
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.slow
def test_the_readme_python_example_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    readme = (ROOT / "README.md").read_text()
    (block,) = [b for b in re.findall(r"```python\n(.*?)```", readme, re.S) if "dst.fuzz(" in b]
    exec(compile(block, "README.md", "exec"), {"__name__": "readme"})
    assert "run it again: dst run --seed 0 --scenario double-release" in capsys.readouterr().out
