"""What a campaign exercised: faults enabled and fired by kind, risky situations reached, invariants that met their
cases.

A campaign that never reaches the situation a bug needs looks, in its violation count, just like
one that searched hard and found nothing. Coverage tells them apart: each run reports the faults
that struck it, the situations it reached (:mod:`dst.invariants.situations`) and how often each
invariant it checked met a case it exists for; the campaign sums them, and its report names what
was never reached and which invariants therefore were never put to the test.

The report holds counts (every situation and invariant listed, zeros included), so shard reports
sum key by key into the report of the whole campaign, and each situation's own words (what it is, what
never reaching it means, which invariants it tests), so a report explains itself wherever it is read:
drawing one never imports the model it names.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Iterable

import attrs

from ..faults import FAULTS
from ..invariants import INVARIANT_IDS, INVARIANTS
from ..invariants.user import counted, never_met
from ..sut import Situation


@attrs.define
class Coverage:
    """Running totals over a campaign's runs."""

    faults: Counter[str] = attrs.Factory(Counter)  # kind -> times it struck
    reached: Counter[str] = attrs.Factory(Counter)  # situation -> times it came up
    runs: Counter[str] = attrs.Factory(Counter)  # situation -> runs it came up in
    cases: Counter[str] = attrs.Factory(Counter)  # invariant -> cases it met
    enabled: Counter[str] = attrs.Factory(Counter)  # fault kind -> runs whose scenario turned it on
    # The user's own assertions: name -> [times checked, true, false], and the runs that met each.
    assertions: dict[str, list[int]] = attrs.Factory(dict)
    assertion_runs: Counter[str] = attrs.Factory(Counter)

    def add(self, fired: tuple[tuple[str, int], ...], reached: tuple[tuple[str, int], ...],
            cases: tuple[tuple[str, int], ...], enabled: tuple[str, ...] = (),
            assertions: tuple[tuple[str, int, int, int], ...] = ()) -> None:
        self.enabled.update(enabled)
        for name, *counts in assertions:
            total = self.assertions.setdefault(name, [0, 0, 0])
            for i, n in enumerate(counts):
                total[i] += n
            self.assertion_runs[name] += 1
        self.faults.update(dict(fired))
        self.reached.update(dict(reached))
        self.runs.update(name for name, _ in reached)
        self.cases.update(dict(cases))

    def report(self, situations: tuple[Situation, ...], checked: set[str],
               catalogued: tuple[str, ...] = ()) -> dict[str, Any]:
        """The JSON of it: every situation that tests an invariant the campaign checked, and every such
        invariant, zeros included (a zero is the news); and every assertion of the user's that a run met or the
        model's source names (``catalogued``), if there is one."""
        parts = {part for unit in INVARIANTS if unit.id in checked and len(unit.parts) == 1 for part in unit.parts}
        relevant = [s for s in situations if set(s.tests) & checked and (not s.parts or s.parts & parts)]
        mine = counted({name: (c[0], c[1], c[2]) for name, c in self.assertions.items()}, catalogued,
                       self.assertion_runs)
        out: dict[str, Any] = {
            "faults": dict(sorted(self.faults.items())),
            "situations": {s.id: {"reached": self.reached[s.id], "runs": self.runs[s.id], "statement": s.statement,
                                  "never": s.never or f"{s.id} never came up", "tests": sorted(s.tests)}
                           for s in relevant},
            "invariants": {i: self.cases[i] for i in INVARIANT_IDS if i in checked},
            "enabled": {kind.name: self.enabled[kind.name] for kind in FAULTS},
        }
        if mine:  # a model with none has none in its report: its report is as it was
            out["assertions"] = mine
        return out


def never_reached(coverage: dict[str, Any], violated: Iterable[str] = ()) -> list[str]:
    """One line per situation a campaign never reached, naming the invariants it left untested there (from
    the report's own words: a situation a report does not explain is passed over). An invariant the campaign
    ``violated`` met its case, whatever the situations say: it is not named (nor a situation left with none)."""
    checked = set(coverage.get("invariants", {})) - set(violated)
    lines = []
    for counts in coverage.get("situations", {}).values():
        if counts.get("runs") or "never" not in counts:
            continue
        untested = [i for i in counts.get("tests", ()) if i in checked]
        if untested:
            lines.append(f"{counts['never']}: {', '.join(untested)} never tested against it")
    return lines + never_met(coverage.get("assertions", {}))


def never_enabled(coverage: dict[str, Any]) -> list[str]:
    """The fault kinds no run of a campaign turned on (none of its scenarios gave them a rate or a chance, or its
    swarm switched them off in every seed): what it cannot have found, said rather than left out. A report older
    than these counts says nothing."""
    return [kind for kind, runs in coverage.get("enabled", {}).items() if not runs]


def violated(report: Any) -> set[str]:
    """The invariants a campaign's report shows violated: its signatures', and their consequences'."""
    return {g["invariant"] for g in report["signatures"]} | {
        c["invariant"] for g in report["signatures"] for c in g.get("consequences", ())}
