"""The source type-checks (STYLE.md: typed code, mypy clean on src/)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_mypy_finds_nothing_in_src():
    done = subprocess.run([sys.executable, "-m", "mypy", "--no-error-summary"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def _mypy(tmp_path: Path, code: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "example.py").write_text(code)
    return subprocess.run([sys.executable, "-m", "mypy", "--no-error-summary", "--no-incremental",
                           "--cache-dir", str(tmp_path / ".mypy"), str(tmp_path / "example.py")],
                          cwd=ROOT, capture_output=True, text=True)


def test_mypy_sees_the_public_signatures(tmp_path):
    done = _mypy(tmp_path, 'import dst\ndst.run(1, "x")\n')
    assert done.returncode == 1
    assert 'Argument 1 to "run" has incompatible type "int"; expected "Scenario"' in done.stdout
    assert 'Argument 2 to "run" has incompatible type "str"; expected "int"' in done.stdout


def test_a_typed_use_of_the_api_and_the_seam_passes(tmp_path):
    done = _mypy(tmp_path, """\
from typing import Any, Callable

import dst
from dst import sut

result: dst.RunResult = dst.run(dst.load_scenario(), 1, model="dst.reference:model")
ok: bool = result.ok
digest: str = result.digest


class Quiet:
    def handlers(self) -> dict[type, Callable[[Any], sut.Handler]]:
        return {}

    def loops(self) -> list[tuple[str, int]]:
        return []

    def tick(self, loop: str, now: int) -> list[sut.Handler]:
        return []

    def crash(self) -> None:
        pass

    def boot(self) -> list[sut.Handler]:
        return []


async def job(client: str, incarnation: int, order: sut.Order) -> str:
    await sut.sleep(1)
    return "slept"


def build(env: sut.Env[None]) -> sut.System:
    return sut.System(service=Quiet(), job=job)


model: sut.Model[None] = sut.Model(build)
""")
    assert done.returncode == 0, done.stdout + done.stderr
