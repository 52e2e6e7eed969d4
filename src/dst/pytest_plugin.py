"""Findings as pytest items: every ``findings/*.toml`` is a regression test.

Registered through the ``pytest11`` entry point; it imports nothing of dst until a
finding is collected, so it costs nothing in projects without findings.

A finding that documents a known bug of a model variant (its scenario switches a
catalogue bug on) passes while it still reproduces exactly: the harness still finds
that bug. Any other finding records a bug in the model as it is, and passes only once
it no longer reproduces: it guards the fix.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest

_NAMED = re.compile(r"^\d{3,}-[^/]+\.toml$")


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    # Only files named as dst names findings (NNN-what-happened.toml), so other TOML files a project
    # keeps in a folder called findings are left alone.
    if file_path.suffix == ".toml" and file_path.parent.name == "findings" and _NAMED.match(file_path.name):
        return FindingFile.from_parent(parent, path=file_path)
    return None


class FindingFile(pytest.File):
    def collect(self) -> Any:
        yield FindingItem.from_parent(self, name=self.path.stem)


class FindingFailed(Exception):
    pass


class FindingItem(pytest.Item):
    def runtest(self) -> None:
        from dst.findings import REPRODUCES, FindingError, read, replay

        try:
            finding = read(self.path)
        except FindingError as e:
            raise FindingFailed(f"{e}\n") from None
        outcome = replay(finding)
        expected = "to reproduce exactly" if finding.known_bug else "no longer to reproduce (it guards a fix)"
        if (outcome.status == REPRODUCES) != finding.known_bug:
            raise FindingFailed(self._report(outcome, expected))

    def _report(self, outcome: Any, expected: str) -> str:
        from io import StringIO

        from rich.console import Console

        from dst.files import from_here
        from dst.present.terminal import render_timeline

        buffer = StringIO()
        console = Console(file=buffer, width=160, highlight=False, color_system=None)
        result = outcome.result
        render_timeline(console, result, result.causal(every_step=True) if result.violation is not None else None)
        return (f"expected {expected}, but it {outcome.explain()}\n"
                f"replay it with:  dst replay {shlex.quote(from_here(self.path))}\n\n{buffer.getvalue()}")

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if isinstance(excinfo.value, FindingFailed):
            return str(excinfo.value)
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, 0, f"finding {self.path.name}"
