"""The asyncio mode: a :class:`dst.aio.System`, a user's unmodified asyncio service on dst's deterministic loop
(:mod:`dst.aio.loop`), its server and clients as the loop's processes (:mod:`dst.aio.host`).

What differs from the coroutine seam is where a violation is noted. The service's code runs in callbacks, and a
violation found inside one (a fact reported mid-callback) is noted where that callback returns, as a violation
raised there once ended the run (asyncio would have caught it in a task): the model's facts and the processes'
hooks go through a held :class:`~dst.invariants.ghost.FactsGate`, which counts the calls under way, and the loop
stops the kernel for a moment (:class:`~dst.sim.kernel.Pause`) where the callback returns.
"""

from __future__ import annotations

import contextlib
from typing import Callable, Iterator, Mapping, cast

from ...aio import System
from ...aio.anyio_order import scopes_in_order
from ...aio.host import Client, Server
from ...aio.loop import Loop
from ...aio.observe import LeaseTable, Observer, RunObserver, RunTable
from ...aio import stores
from ...errors import Stalled
from ...frames import where_raised
from ...invariants.ghost import FactsGate
from ...models import ModelError
from ...sandbox import VIRTUAL_EPOCH_MS, Sandbox
from ...scenario import Scenario
from ...sim.kernel import Pause
from ...sim.process import ClientProcess, HostHooks, ServerProcess
from ..world import World
from . import Job


def _observing(runs: RunObserver, hooks: HostHooks) -> Callable[[], None]:
    def settle() -> None:
        runs.step()
        hooks.settle()
    return settle


class AioMode:
    kind = "asyncio"
    real_service = True
    refusal: tuple[int, int, str] | None = None  # a refusal ends the run at once (the loop raises it on return)

    def __init__(self, system: System, world: World, scenario: Scenario, seed: int) -> None:
        self.system = system
        self.world = world
        self.scenario = scenario
        kernel, trace = world.kernel, world.trace
        self.loop = loop = Loop(kernel, world.strategy, on_error=lambda process, text, error: trace.append(
            (kernel.now, process.name, "error", text if error is None else
             f"{text} {type(error).__name__}: {error} at {where_raised(error)}")))
        world.facts.hold()  # the model's facts: a violation among them waits for the callback's return
        # The same for the processes' hooks, through a gate of their own (typed as what it passes on).
        self.hooks = cast(HostHooks, FactsGate(world.ghost))
        cast(FactsGate, self.hooks).hold()
        sandbox = Sandbox(wall_ms=lambda: VIRTUAL_EPOCH_MS + kernel.now + getattr(loop.process, "wall_offset", 0),
                          monotonic_ms=lambda: kernel.now, seed=seed, folder=system.folder, refused=loop.refuse,
                          logs=lambda text: world.logged(str(loop.process.name), text))
        loop.patches = [sandbox, stores.installed(), scopes_in_order()]
        world.on_branch += [lambda _: loop.redraw(), sandbox.branch]
        world.on_fork.append(loop.forked)
        if system.inline_threads:
            from ...aio.inline import InlineThreads

            loop.inline = InlineThreads()
            loop.patches.append(loop.inline)

    @staticmethod
    def accepts(system: object) -> bool:
        return isinstance(system, System)

    def refuse(self, has_runs: bool) -> None:
        if has_runs and self.system.runs is None:
            raise ModelError(f"{self.scenario.model.impl} does not run work (its dst.aio.System has no runs view: a "
                             f"RunTable, or a RunView its service's facts keep): this scenario submits runs")

    def processes(self, clients: list[str], job: Job) -> tuple[ServerProcess, Mapping[str, ClientProcess]]:
        w, system, loop = self.world, self.system, self.loop
        server = Server(w.kernel, loop, w.network, w.trace, self.hooks, w.trips, system.server, system.reset)
        runs: RunObserver | None = None
        if system.observe:
            leases, table = system.leases, system.runs
            if leases is not None and hasattr(leases, "version"):
                server.observers.append(Observer(cast(LeaseTable, leases), w.facts, w.kernel, w.trace, system.recount))
            if table is not None and hasattr(table, "version") and hasattr(table, "runs"):
                runs = RunObserver(cast(RunTable, table), w.facts, w.kernel, w.trace)
                server.observers.append(runs)
            if not server.observers:
                raise ModelError("dst.aio.System(observe=True) needs leases or runs to observe: a LeaseTable (with "
                                 "version() and leases()) or a RunTable (with version() and runs())")
            server.settled = system.settled
        timeout = self.scenario.workload.request_timeout
        made = {name: Client(name, w.kernel, loop, w.network, w.trace, self.hooks, job, timeout) for name in clients}
        for client in made.values():
            client.serving_idle = system.idle
            if runs is not None:  # a worker's own writes move its queue's runs (an ack, a claim taken back)
                client.settle = _observing(runs, self.hooks)
        return server, made

    @contextlib.contextmanager
    def guarded(self) -> Iterator[None]:
        with self.loop.running():  # the loop is asyncio's running loop, and the sandbox is up
            try:
                yield
            finally:  # what is still pending is dropped with the sandbox up: a dead process's
                self.loop.close(collect=True)  # last words, if any, reach nothing real

    def who(self) -> str:
        return str(self.loop.process.name)

    def handling(self) -> int | None:
        return self.loop.server_key()

    def hold(self) -> bool:
        if not self.world.ghost.holding:
            return False
        self.loop.stop_with(Pause())  # the kernel stops where the callback returns, and the run notes it there
        return True

    def stop(self) -> Callable[[], None] | None:
        return lambda: self.loop.stop_with(Stalled())

    def close(self) -> None:
        self.loop.close()  # the tasks still pending are dropped before the build's files go


MODE = AioMode
