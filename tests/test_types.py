"""The source type-checks (STYLE.md: typed code, mypy clean on src/)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_mypy_finds_nothing_in_src():
    done = subprocess.run([sys.executable, "-m", "mypy", "--no-error-summary"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def _checked(mypy: Any, tmp_path: Path, code: str, *flags: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "example.py").write_text(code)
    return mypy(tmp_path / "example.py", *flags)


@pytest.mark.slow
def test_mypy_sees_the_public_signatures(mypy, tmp_path):
    done = _checked(mypy, tmp_path, 'import dst\ndst.run(1, "x")\n')
    assert done.returncode == 1
    assert 'Argument 1 to "run" has incompatible type "int"; expected "Scenario"' in done.stdout
    assert 'Argument 2 to "run" has incompatible type "str"; expected "int"' in done.stdout


def test_a_typed_use_of_the_api_and_the_seam_passes(mypy, tmp_path):
    done = _checked(mypy, tmp_path, """\
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


@pytest.mark.slow
def test_an_adapter_that_subclasses_service_and_one_of_the_asyncio_mode_pass_mypy_strict(mypy, tmp_path):
    # A subclass of sut.Service that defines only its handlers is concrete (crash has a real body), and an
    # asyncio adapter types against dst.aio as written in docs/asyncio.md.
    done = _checked(mypy, tmp_path, """\
from typing import Any, Callable, Mapping

from dst import aio, sut


class Handlers(sut.Service):
    def handlers(self) -> Mapping[type, Callable[[Any], sut.Handler]]:
        return {}


async def job(client: str, incarnation: int, order: sut.Order) -> str:
    await sut.sleep(1)
    return "slept"


def build(env: sut.Env[None]) -> sut.System:
    return sut.System(service=Handlers(), job=job)


async def server() -> Mapping[type, Any]:
    await aio.round_trip()
    return {}


async def aio_job(client: str, incarnation: int, order: sut.Order) -> str:
    async with aio.http() as http:
        response = await http.post("/limits/db/leases", json={"holder": client})
    left: int = await aio.work(1, 1_000)
    return f"{response.status_code} {left}"


def build_aio(env: sut.Env[None]) -> aio.System:
    return aio.System(server=server, job=aio_job, bounds=sut.Bounds(reclaim_within=1_000))


model: sut.Model[None] = sut.Model(build)
aio_model: sut.Model[None] = sut.Model(build_aio)
""", "--strict")
    assert done.returncode == 0, done.stdout + done.stderr
