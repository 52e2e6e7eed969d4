"""Which of a campaign's scenarios each seed runs: the broad ones first, then in turns and where coverage is thin.

A campaign over several scenarios (the default campaign runs every scenario shipped for the model)
spends its seeds in blocks. In the opening (the first two blocks), half the seeds go to the broad
scenarios in turns: the user's own and those shipped that switch no bug on. They exercise the
whole model, so the bugs any workload meets are found about as soon as a campaign of those
scenarios alone would find them. A quarter takes turns across the others (the scenarios made to
reach one bug's situation, and the aimed ones), and a quarter goes by weight. After the opening,
the broad ones keep a quarter, the others a quarter in turns (none is starved, whatever the
others reach), and half goes by weight: a scenario's weight is what its runs reach that the
campaign rarely reaches, summed over the features of coverage (the situations reached, the cases
each invariant met, the faults that struck), each counted by the share of the scenario's seeds
that reached it (smoothed, so a scenario tried less counts as more promising) and weighed by how
rarely any seed reached it. A situation no seed has reached yet draws seeds to every scenario that
checks the invariants it tests. In the first block, with nothing learned, the weighed quarter takes
turns too.

A real service (a model of the asyncio mode, whose seeds cost a hundred times the seam's) starts small: its
roster holds each scenario three times, in full and in a small and a medium world (fewer clients and jobs, a
shorter run with the faults the full one would meet: :func:`~dst.runner.swarm.world`), and a seed's world is a
function of its position. The first block
runs small worlds; the second small and medium ones, a round of each in turns; the third medium and full ones; from
then on a round in four is small, one medium and two are full. Most findings are told by one or two clients in a
few steps, and a small world's seed costs a tenth of a full one's, so the first findings come that much sooner,
while the full worlds still run more than half the seeds. The steering weighs a scenario's seeds in every world alike.

A campaign that branches (:mod:`dst.explore.branch`: a real service's, by default) also says how many branches the
first risky moment of each seed's run gets, by situation: one the campaign has rarely reached gets the most, one it
seldom reaches fewer, and one it reaches often none (a future of it is as near as the next seed's); while nothing is
learned, none. Its blocks of :data:`BRANCH_BLOCK` seeds are decided as the steering's are, on what the seeds (not
their branches) reached before the block before them.

A block is weighed on the outcomes of the blocks before the one before it, so a pool of workers
never waits for the seeds in flight; and since outcomes are consumed in seed order, the choice for
every seed is a pure function of the campaign (its first seed, its shard, its scenarios): the same
on one worker or twenty, in any process. A seed's scenario is in its outcome (``Outcome.arm``), so a
finding and ``dst run`` name the scenario the seed ran.
"""

from __future__ import annotations

from collections import Counter
from typing import Iterable, Sequence

import attrs

from ..errors import UserError
from ..models import ModelError, resolve
from ..runner import check, real_service
from ..runner.swarm import ENABLE, WORLDS, aimed, enable, enabled_kinds, world
from ..scenario import Scenario, ScenarioError, load_shipped, shipped_names
from ..sut import Situation
from .branch import MOST

_SCALE = 1 << 20  # weights are integers (strides of a deterministic schedule), at this resolution
CATALOGUE = "dst:scenarios"  # the reference model's scenarios: one per catalogue bug, each made to reach it
_OPENING = 2  # blocks in which half the seeds go to the broad scenarios; a quarter after them
RARE, SELDOM = 1 / 16, 1 / 8  # shares of the seeds that reached a situation: its moment gets the most branches, fewer
BRANCH_BLOCK = 32  # seeds per block of branch budgets (see the module's text)


@attrs.frozen
class Roster:
    """A campaign's scenarios, the broad ones first (see the module's text): ``broad`` of them. With ``worlds``
    of 3, the scenarios are laid out as the full ones, then each in its small world, then in its medium one."""

    scenarios: tuple[Scenario, ...]
    broad: int
    worlds: int = 1
    branches: int = 0  # the most branches a seed's risky moment gets (0: none; see Steering.branches)


WORLD_ORDER: tuple[str | None, ...] = (None, *WORLDS)  # a roster's worlds, in its layout: in full, then the others


class Steering:
    """The arm (an index into the campaign's scenarios) of each seed, by its position in the campaign. The first
    ``broad`` arms are the broad ones (none or all: every arm is)."""

    def __init__(self, arms: int, situations: Sequence[Situation] = (), broad: int = 0, worlds: int = 1,
                 branches: int = 0) -> None:
        if worlds not in (1, len(WORLD_ORDER)) or arms % worlds:
            raise ValueError(f"expected the scenarios of {worlds} world(s), got {arms}")
        self.worlds = worlds
        arms //= worlds  # the steering is of the scenarios; the world is the seed's position's (see _world)
        self.arms = arms
        self.broad = broad if 0 < broad < arms else arms
        self.block = 4 * arms  # seeds per block: a round of four lanes per arm
        self.situations = tuple(situations)
        self.learned = 0  # outcomes learned so far (positions 0 .. learned-1)
        self.seeds = [0] * arms  # seeds each arm ran
        self.hits: list[Counter[str]] = [Counter() for _ in range(arms)]  # feature -> the arm's seeds that reached it
        self.reach: Counter[str] = Counter()  # feature -> seeds (of any arm) that reached it
        self.checks: list[frozenset[str]] = [frozenset()] * arms  # the invariants each arm's runs check
        self.plans: dict[int, list[int]] = {}  # block -> the arm of each of its weighed positions
        if arms > 1:
            self.plans[1] = self._schedule(self._weighed(1))  # on nothing learned: all alike
        self.most = branches  # the most branches a moment gets (0: the campaign does not branch)
        self.moments: Counter[str] = Counter()  # situation -> seeds whose run reached it
        self.budgets: dict[int, tuple[tuple[str, int], ...]] = {}  # branch block -> each situation's branches

    def ready(self, position: int) -> bool:
        """Whether the arm and the branches of the seed at ``position`` can be told now (its blocks are learned)."""
        block, branching = position // self.block, position // BRANCH_BLOCK
        return ((self.arms == 1 or block < 2 or self.learned >= (block - 1) * self.block)
                and (not self.most or branching < 2 or self.learned >= (branching - 1) * BRANCH_BLOCK))

    def branches(self, position: int) -> tuple[tuple[str, int], ...]:
        """How many branches the first risky moment of the seed at ``position`` gets, by situation (none for a
        campaign that does not branch); :meth:`ready` must say so."""
        if not self.most:
            return ()
        block = position // BRANCH_BLOCK
        return self.budgets[block] if block >= 2 else ()  # nothing learned before

    def _budget(self) -> tuple[tuple[str, int], ...]:
        """Each situation's branches, by the share of the seeds learned so far that reached it."""
        budget = []
        for s in self.situations:
            share = (self.moments[s.id] + 1) / (self.learned + 2)
            branches = self.most if share < RARE else max(1, self.most // 2) if share < SELDOM else 0
            if branches:
                budget.append((s.id, branches))
        return tuple(budget)

    def arm(self, position: int) -> int:
        """The arm of the seed at ``position`` (0-based, in campaign order), in its world; :meth:`ready` must say
        so."""
        return self._scenario(position) + self.arms * self._world(position)

    def _world(self, position: int) -> int:
        """The world of the seed at ``position``: an index into :data:`WORLD_ORDER` (see the module's text)."""
        if self.worlds == 1:
            return 0
        block, round_ = position // self.block, position // 4
        if block == 0:
            return 1
        if block < 3:
            return (1, 2)[round_ % 2] if block == 1 else (2, 0)[round_ % 2]
        return (1, 2, 0, 0)[round_ % 4]

    def _scenario(self, position: int) -> int:
        if self.arms == 1:
            return 0
        block, offset = divmod(position, self.block)
        round_, lane = divmod(offset, 4)  # a block is ``arms`` rounds of four lanes
        opening = block < _OPENING
        if lane == 0 or (lane == 2 and opening):  # the broad ones: two lanes in the opening, one after
            before = 2 * self.arms * min(block, _OPENING) + self.arms * max(0, block - _OPENING)
            return (before + (2 * round_ + lane // 2 if opening else round_)) % self.broad
        if lane == 1 or block == 0:  # in turns (the first block has nothing learned to weigh on)
            turn = 2 * round_ + lane // 3 if block == 0 else self.arms * (block + 1) + round_
            others = self.arms - self.broad
            return self.broad + turn % others if others else turn % self.arms
        assert self.ready(position), "a block is weighed once the block before the last is learned"
        return self.plans[block][round_ if opening else 2 * round_ + lane // 3]

    def learn(self, arm: int, checked: Iterable[str], fired: Iterable[tuple[str, int]],
              reached: Iterable[tuple[str, int]], cases: Iterable[tuple[str, int]]) -> None:
        """One seed's outcome, in campaign order (a branch's teaches it nothing: it went where its seed went)."""
        self.learned += 1
        if self.most:
            self.moments.update(name for name, n in reached if n)
            if self.learned % BRANCH_BLOCK == 0:  # the block after next, on what came before it
                self.budgets[self.learned // BRANCH_BLOCK + 1] = self._budget()
                self.budgets.pop(self.learned // BRANCH_BLOCK - 2, None)
        if self.arms == 1:
            return
        arm %= self.arms  # its scenario's, in whichever world
        self.seeds[arm] += 1
        if not self.checks[arm]:
            self.checks[arm] = frozenset(checked)
        features = [f"fault {name}" for name, n in fired if n] + [f"situation {name}" for name, n in reached if n]
        features += [f"case {name}" for name, n in cases if n]
        self.hits[arm].update(features)
        self.reach.update(features)
        if self.learned % self.block == 0:  # a block learned: weigh the block after next, on what came before it
            block = self.learned // self.block + 1
            self.plans.pop(block - 3, None)
            self.plans[block] = self._schedule(self._weighed(block))

    def weights(self) -> list[int]:
        """Each arm's weight now: what it reaches that the campaign rarely does (integers, each at least 1)."""
        features = set(self.reach) | {f"situation {s.id}" for s in self.situations}
        scores = []
        for arm in range(self.arms):
            score = 0.0
            tried, hits = self.seeds[arm], self.hits[arm]
            for feature in sorted(features):  # sorted: a float sum in one order, whatever the set's
                if feature.startswith("situation ") and not self._could_reach(arm, feature):
                    continue
                share = (hits[feature] + 1) / (tried + 2)  # Laplace: an arm tried less counts as more promising
                score += share / (1 + self.reach[feature])
            scores.append(score)
        top = max(scores) or 1.0
        return [1 + int(_SCALE * s / top) for s in scores]

    def _weighed(self, block: int) -> int:
        """How many of ``block``'s seeds go by weight: a lane of each round in the opening, two after it."""
        return self.arms if block < _OPENING else 2 * self.arms

    def _could_reach(self, arm: int, feature: str) -> bool:
        """A situation counts for an arm whose runs check an invariant it tests (or that reached it)."""
        if self.hits[arm][feature]:
            return True
        name = feature.removeprefix("situation ")
        tests = next((s.tests for s in self.situations if s.id == name), ())
        return bool(set(tests) & self.checks[arm])

    def _schedule(self, count: int) -> list[int]:
        """``count`` arms by weight, spread out (stride scheduling: each arm's next turn comes ``1/weight``
        after its last; ties to the lower arm)."""
        weights = self.weights()
        passes = [_SCALE * _SCALE // w for w in weights]
        at = list(passes)
        plan = []
        for _ in range(count):
            arm = min(range(self.arms), key=lambda a: (at[a], a))
            plan.append(arm)
            at[arm] += passes[arm]
        return plan


def default_campaign(first: Scenario) -> Roster:
    """What a campaign runs when no scenario is given: ``first`` (the embedded default on the model), then every
    scenario shipped for the model that loads and checks on it, with its own bugs switched off and ``first``'s
    on (a user's ``--bug``): the broad ones (those that switch no bug on) first, then those made to reach one
    bug's situation; then each of them again with half its faults aimed at the model's sensitive moments
    (:func:`~dst.runner.swarm.aimed`). A campaign that makes its own luck, where one scenario would leave the
    rare situations to chance. A shipped scenario that does not load on the model is passed over (a user's
    model may lack the options it sets).

    A model of the user's (one whose scenarios are not dst's catalogue) also runs ``first`` with each fault kind of
    :data:`~dst.runner.swarm.ENABLE` that no scenario of the campaign turns on (a clock skew, a server pause, the
    slow store) turned on (:func:`~dst.runner.swarm.enable`), among the broad ones, where the model's bounds accept
    it: a service's first campaign meets every kind of fault, not only those the embedded default has. A real
    service (the asyncio mode) runs them in small worlds first (see the module's text)."""
    impl = first.model.impl
    broad: list[Scenario] = [first]
    narrow: list[Scenario] = []
    for name in shipped_names(impl):
        try:
            shipped = load_shipped(name, impl)
            scenario = attrs.evolve(shipped, bugs=first.bugs)
            check(scenario)
        except (ScenarioError, ModelError, UserError):
            continue
        if all(scenario != other for other in broad + narrow):
            (narrow if shipped.bugs else broad).append(scenario)
    if resolve(impl).scenarios != CATALOGUE:  # a model of the user's: its scenarios (if any) are no catalogue
        on = {kind for scenario in broad + narrow for kind in enabled_kinds(scenario)}
        for kind in ENABLE:
            if kind in on:
                continue
            try:
                shape = enable(first, kind)
                check(shape)
            except (ScenarioError, ModelError, UserError):
                continue  # beyond the model's bounds: the report names the kind as never enabled
            broad.append(shape)
    roster = broad + narrow
    full = tuple(roster) + tuple(dict.fromkeys(a for a in map(aimed, roster) if a not in roster))
    if not _starts_small(first):
        return Roster(full, len(broad))
    # A smaller world changes the workload's size and the active phase's length, nothing the model's bounds or options
    # hold a scenario to: the full scenario's check holds for it, and it is not built again (a real service's build
    # can cost a tenth of a second: Prefect's example has 70 such scenarios).
    return Roster(full + tuple(world(s, size) for size in WORLDS for s in full), len(broad), len(WORLD_ORDER), MOST)


def one_scenario(scenario: Scenario) -> Roster:
    """A campaign of ``scenario`` alone: a real service's seeds branch at their risky moments (forked there, they
    cost what comes after it), the coroutine seam's do not (their seeds cost milliseconds)."""
    return Roster((scenario,), 1, branches=MOST if _starts_small(scenario) else 0)


def _starts_small(first: Scenario) -> bool:
    """A campaign on a real service (a model of the asyncio mode) starts in small worlds and branches; the seam's
    do not (their seeds cost milliseconds, and a small world meets fewer of the messages a seam's bug needs)."""
    try:
        return real_service(first)
    except (ScenarioError, ModelError, UserError):
        return False
