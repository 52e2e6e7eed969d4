"""Extension points are declared once: what docs/extending.md promises, checked against the source."""

from __future__ import annotations

import re
from pathlib import Path

import dst
from dst.faults import FAULTS
from dst.invariants import INVARIANTS, SITUATIONS
from dst.reference.bugs import KNOWN_BUGS

SRC = Path(dst.__file__).resolve().parent
DOC = SRC.parents[1] / "docs" / "extending.md"


def _files_naming(pattern: str) -> set[str]:
    return {str(p.relative_to(SRC)) for p in SRC.rglob("*.py") if re.search(pattern, p.read_text())}


def test_a_fault_kind_is_named_only_by_its_record_and_the_hosts_that_carry_it_out():
    for kind in FAULTS:
        for word in {kind.name, kind.action}:
            assert _files_naming(rf"[\"']{word}[\"']") <= {"faults.py", "sim/hosts.py", "sim/network.py",
                                                             "sim/store.py", "sim/process.py", "aio/host.py"}, word


def test_an_invariant_id_is_named_only_by_its_unit_the_bugs_that_break_it_and_the_cases_that_test_it():
    for unit in INVARIANTS:
        assert _files_naming(rf"[\"']{unit.id}[\"']") <= {"invariants/leases.py", "invariants/runs.py",
                                                           "invariants/fencing.py", "reference/bugs.py",
                                                           "invariants/situations.py", "reference/service.py"}, unit.id


def test_a_situation_id_is_named_only_by_its_unit():
    for unit in SITUATIONS:
        assert _files_naming(rf"[\"']{unit.id}[\"']") == {"invariants/situations.py"}, unit.id


def test_a_bug_is_its_record_one_model_file_with_its_wrong_line_and_its_scenario():
    for slug in KNOWN_BUGS:
        flag = slug.replace("-", "_")
        readers = _files_naming(rf"\.{flag}\b") - {"reference/bugs.py"}
        assert len(readers) == 1, (slug, readers)
        text = (SRC / readers.pop()).read_text()
        assert re.search(rf"# wrong|wrong \({slug}\)", text), slug
        assert (SRC / "scenarios" / f"{slug}.toml").is_file()


def test_the_counts_in_extending_md_are_the_ones_above():
    text = DOC.read_text()
    for what, files in (("a fault kind", 1), ("an invariant", 1), ("a risky situation", 1), ("a catalogue bug", 3),
                        ("your own service", 0)):
        assert re.search(rf"\| {what} \| {files} \|", text), what
