"""The coroutine seam's mode: a :class:`dst.sut.System`, whose handlers and jobs dst drives itself
(:mod:`dst.sim.hosts`). A guest model runs in the sandbox (its clocks virtual, its draws seeded, threads and sockets
refused); dst's own reference model reads nothing real, so it runs without one."""

from __future__ import annotations

import contextlib
import os
from typing import Any, Callable, ContextManager, Mapping

from ...models import ModelError
from ...scenario import Scenario
from ...sim.hosts import ClientHost, ServerHost
from ...sim.process import ClientProcess, ServerProcess
from ...sut import Cancel, Submit, System
from ..world import World
from . import Job


class CoroutineMode:
    kind = "coroutine-seam"
    real_service = False
    refusal: tuple[int, int, str] | None = None  # the sandbox's first refusal: time, trace index, line

    def __init__(self, system: System, world: World, scenario: Scenario, seed: int) -> None:
        self.system = system
        self.world = world
        self.scenario = scenario
        self.seed = seed

    @staticmethod
    def accepts(system: object) -> bool:
        return isinstance(system, System)

    def refuse(self, has_runs: bool) -> None:
        routes = self.system.service.handlers()
        if has_runs and (self.system.runs is None or Submit not in routes or Cancel not in routes):
            raise ModelError(f"{self.scenario.model.impl} does not run work (it needs handlers for Submit and Cancel "
                             f"and a runs view): this scenario submits runs")

    def processes(self, clients: list[str], job: Job) -> tuple[ServerProcess, Mapping[str, ClientProcess]]:
        w, timeout = self.world, self.scenario.workload.request_timeout
        server = ServerHost(w.kernel, self.system.service, w.network, w.trace, w.ghost, w.running, w.trips)
        return server, {name: ClientHost(name, w.kernel, w.network, w.trace, w.ghost, w.running, job, timeout)
                        for name in clients}

    def guarded(self) -> ContextManager[Any]:
        if self.scenario.model.impl.startswith("dst."):
            return contextlib.nullcontext()  # dst's own model reads nothing real: no sandbox to pay for
        from ...sandbox import VIRTUAL_EPOCH_MS, Sandbox

        kernel, running, trace = self.world.kernel, self.world.running, self.world.trace

        def refused(refusal: BaseException) -> None:
            if self.refusal is None:  # the first one: the run ends with it, even if the model swallows it
                self.refusal = (kernel.now, len(trace), f"{running.actor}: {refusal}")

        # Files may be written anywhere: a model keeps its store where its build put it (and its close removes it).
        return Sandbox(wall_ms=lambda: VIRTUAL_EPOCH_MS + kernel.now, monotonic_ms=lambda: kernel.now,
                       seed=self.seed, folder=os.sep, refused=refused,
                       logs=lambda text: self.world.logged(running.actor, text))

    def who(self) -> str:
        return self.world.running.who()[0]

    def handling(self) -> int | None:
        return self.world.running.who()[1]

    def hold(self) -> bool:
        return False

    def stop(self) -> Callable[[], None] | None:
        return None

    def close(self) -> None:
        pass


MODE = CoroutineMode
