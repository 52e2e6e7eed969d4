"""The public API is small and explicit: a change to it is a deliberate one."""

from __future__ import annotations

import subprocess
import sys

import dst


def test_the_public_names_are_pinned():
    assert sorted(dst.__all__) == sorted([
        "Bounds", "Bug", "Env", "Finding", "FindingError", "FuzzResult", "Group", "Model", "ModelError", "Replay", "RunResult", "Scenario",
        "ScenarioError", "Outcome", "Shrunk", "Step", "System", "UserError", "ViolationReport", "__version__", "fuzz", "load_scenario", "parse_scenario",
        "read_finding", "replay", "run", "save_finding", "shrink", "strategies",
    ])
    for name in dst.__all__:
        assert hasattr(dst, name)


def test_the_simulator_core_does_not_import_rich_or_the_cli():
    code = ("import sys, dst, dst.runner, dst.explore.fuzz, dst.findings; "
            "print(sorted(m for m in sys.modules if m == 'rich' or m.startswith('rich.') or m == 'dst.cli'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_pytest_plugin_is_light_to_import():
    code = "import sys, dst.pytest_plugin; print(sorted(m for m in sys.modules if m.startswith('dst')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['dst', 'dst.pytest_plugin', 'dst.version']"


def test_the_library_runs_a_seed():
    result = dst.run(dst.load_scenario(), 1)
    assert result.ok and result.events > 0 and len(result.digest) == 32


def _dst_imports(path) -> set[str]:
    """The dst modules a source file imports, resolved to absolute names."""
    import ast

    tree = ast.parse(path.read_text())
    package = ".".join(path.relative_to(path.parents[len(path.relative_to(SRC).parts) - 1]).with_suffix("").parts[:-1])
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                found.add(f"{base}.{node.module}" if node.module else base)
            elif node.module and node.module.split(".")[0] == "dst":
                found.add(node.module)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "dst"}
    return found


from pathlib import Path  # noqa: E402

SRC = Path(dst.__file__).resolve().parent.parent


def test_the_seam_imports_nothing_of_dst():
    assert _dst_imports(SRC / "dst" / "sut.py") == set()


def test_the_reference_model_uses_only_the_seam():
    for path in sorted((SRC / "dst" / "reference").glob("*.py")):
        outside = {m for m in _dst_imports(path) if not m.startswith("dst.reference") and m != "dst.sut"}
        assert outside == set(), f"{path.name} imports {sorted(outside)}"


def test_the_runtime_dependencies_are_what_src_imports():
    import tomllib

    deps = tomllib.loads((SRC.parent / "pyproject.toml").read_text())["project"]["dependencies"]
    names = {d.split(">")[0].split("=")[0].strip().lower() for d in deps}
    imported = set()
    for path in (SRC / "dst").rglob("*.py"):
        for line in path.read_text().splitlines():
            words = line.split()
            if len(words) > 1 and words[0] in ("import", "from"):
                imported.add(words[1].split(".")[0].lower())
    assert names == imported & {"attrs", "rich", "sortedcontainers", "hypothesis", "pytest", "mypy"} - {"pytest"}


def test_dst_bugs_lists_every_slug_with_its_story(capsys):
    from dst.cli import main
    from dst.reference.bugs import CATALOGUE

    assert main(["bugs"]) == 0
    out = capsys.readouterr().out
    for bug in CATALOGUE:
        assert bug.slug in out and bug.story and bug.story[:40] in out.replace("\n", " "), bug.slug
