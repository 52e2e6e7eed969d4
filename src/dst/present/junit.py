"""A campaign's report as JUnit XML, for CI systems that show test results: one failing test case per
signature, one skipped per kind of run not judged in full, and one passing per invariant that held.

The XML holds no wall-clock figure, so the same report gives the same bytes.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from ..errors import UserError
from ..explore.coverage import violated
from ..explore.report import Report, Signature, Unjudged
from ..files import check_folder, not_regular, replace, where, why
from ..text import one_line


class JUnitError(UserError):
    """The JUnit file cannot be written there; ``str()`` is one line (exit 2)."""


def _seed_list(group: Signature | Unjudged) -> str:
    shown = ", ".join(str(s) for s in group["seeds"])
    more = group["count"] - len(group["seeds"])
    return f"{shown} (and {more:,} more)" if more > 0 else shown


def junit_xml(report: Report) -> bytes:
    """The report (``dst fuzz --json``'s, or ``dst merge``'s) as a JUnit XML document."""
    # Model text goes through one_line: it escapes the control characters XML 1.0 cannot carry at all.
    findings = {f["signature"]: f["path"] for f in report["findings"]}
    broken = violated(report)  # as a cause or a consequence
    held = [i for i in report["invariants"] if i not in broken]
    seeds = report["seeds"]
    tests = len(report["signatures"]) + len(report["unjudged"]) + len(held)
    counts = {"tests": str(tests), "failures": str(len(report["signatures"])), "errors": "0",
              "skipped": str(len(report["unjudged"]))}
    root = ET.Element("testsuites", {"name": "dst", **counts})
    suite = ET.SubElement(root, "testsuite", {"name": one_line(f"dst fuzz {report['scenario']}"), **counts})
    properties = ET.SubElement(suite, "properties")
    shown = {"scenario": report["scenario"], "source": report["source"], "model": report["model"],
             "bugs": ", ".join(report["bugs"]), "swarm": str(report["swarm"]).lower(),
             "seeds": f"{seeds['first']}:{'' if seeds['stop'] is None else seeds['stop']}",
             "shard": seeds["shard"] or "all", "seeds_run": str(report["seeds_run"]),
             "interrupted": str(report["interrupted"]).lower()}
    if seeds.get("shards_missing"):
        shown["shards_missing"] = ", ".join(str(k) for k in seeds["shards_missing"])
    for name, value in shown.items():
        ET.SubElement(properties, "property", name=name, value=one_line(value))
    for sig in report["signatures"]:
        case = ET.SubElement(suite, "testcase", classname=one_line(sig["invariant"]), name=one_line(sig["signature"]))
        failure = ET.SubElement(case, "failure", type=one_line(sig["invariant"]),
                                message=one_line(f"{sig['invariant']}: {sig['message']}"))
        lines = [f"reproduce: {sig['reproduce']}",
                 f"first seed: {sig['first_seed']}" + ("" if sig["time_ms"] is None else f", at t={sig['time_ms']}ms"),
                 f"seeds ({sig['count']:,}): {_seed_list(sig)}"]
        if sig.get("consequences"):
            lines.append("its consequences: " + ", ".join(f"{c['invariant']} at t={c['time_ms']}ms"
                                                          for c in sig.get("consequences", ())))
        if sig["signature"] in findings:
            lines.append(f"finding: {findings[sig['signature']]} (dst replay it)")
        failure.text = "\n".join(one_line(line) for line in lines) + "\n"
    for group in report["unjudged"]:
        case = ET.SubElement(suite, "testcase", classname="unjudged", name=one_line(group["kind"]))
        skipped = ET.SubElement(case, "skipped", message=one_line(f"{group['count']:,} seed(s) not judged in full: "
                                                                  f"{group['why']}"))
        skipped.text = "\n".join(one_line(line) for line in [f"reproduce: {group['reproduce']}",
                                                             f"seeds: {_seed_list(group)}"]) + "\n"
    for invariant in held:
        ET.SubElement(suite, "testcase", classname=one_line(invariant), name=one_line(invariant))
    ET.indent(root)
    document: bytes = ET.tostring(root, encoding="utf-8", xml_declaration=True)
    return document + b"\n"


def junit_ready(path: Path) -> Path:
    """Make sure the JUnit file can be written at ``path`` (its folder created if missing), or say why in one
    line: before a campaign, so an hour of fuzzing does not end in a report that cannot be saved."""
    try:
        what = not_regular(path)
        if what is None:
            check_folder(path.parent)
    except (OSError, ValueError) as e:
        raise JUnitError(f"{where(path)}: --junit: cannot write the file there ({why(e)})") from None
    if what is not None:
        raise JUnitError(f"{where(path)}: --junit: expected a file to write, but it is {what}")
    return path


def write_junit(path: Path, report: Report) -> None:
    """Write the report's JUnit XML at ``path`` atomically: a reader sees the old file or the whole new one,
    never half of it, and nothing but ``path`` is touched."""
    data = junit_xml(report)
    try:
        replace(path, data, prefix=f".{path.name[:100]}.")
    except (OSError, ValueError) as e:
        raise JUnitError(f"{where(path)}: --junit: cannot write the file ({why(e)})") from None
