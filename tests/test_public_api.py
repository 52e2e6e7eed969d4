"""The public API is small and explicit: a change to it is a deliberate one."""

from __future__ import annotations

import re
import subprocess
import sys
from importlib import import_module

import pytest

import dst


def _type_checked() -> dict[str, tuple[str, str | None]]:
    """What dst/__init__.py imports for type checkers: each name -> (its module, its name there; None: the module)."""
    import ast

    tree = ast.parse(INIT.read_text())
    (block,) = [node for node in tree.body if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"]
    names: dict[str, tuple[str, str | None]] = {}
    for node in block.body:
        if isinstance(node, ast.Assign):  # a public name for what was imported under a private one
            (target,) = node.targets
            assert isinstance(target, ast.Name) and isinstance(node.value, ast.Name), ast.unparse(node)
            names[target.id] = names.pop(node.value.id)
            continue
        assert isinstance(node, ast.ImportFrom) and node.level == 1, ast.unparse(node)
        for alias in node.names:
            # "as" its own name: mypy --strict takes only such an import for an export (dst's __all__ is hidden from it)
            assert alias.asname == alias.name or (alias.asname or "").startswith("_"), \
                f"{ast.unparse(node)}: import {alias.name} as {alias.name}"
            names[alias.asname] = (f"dst.{node.module}", alias.name) if node.module else (f"dst.{alias.name}", None)
    assert not [name for name in names if name.startswith("_")], "imported under a private name and not given a public one"
    return names


def _documented() -> list[str]:
    """The names docs/api.md's table of every public name gives."""
    page = (SRC.parent / "docs" / "api.md").read_text()
    table = page.split("\n## Every public name\n", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1] for line in table.splitlines() if line.startswith("| `")]
    return [name for row in rows for name in re.findall(r"`([^`]+)`", row)]


def test_the_type_checker_the_runtime_and_the_docs_know_the_same_public_names():
    # dst._PUBLIC is the one table; a name added to it and not to the imports type checkers read, or to the docs,
    # or the other way round, fails here.
    checked, documented = _type_checked(), _documented()
    assert sorted(checked) == sorted(dst._PUBLIC)
    assert sorted(dst.__all__) == sorted([*dst._PUBLIC, "__version__"])
    assert sorted(documented) == sorted(dst.__all__) and len(set(documented)) == len(documented)
    for name, (module, attr) in checked.items():  # and each is the one object, whichever way it is reached
        value = import_module(module) if attr is None else getattr(import_module(module), attr)
        assert getattr(dst, name) is value, name


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
INIT = SRC / "dst" / "__init__.py"


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


@pytest.mark.slow
def test_a_star_import_of_dst_type_checks_under_mypy_strict(mypy, tmp_path):
    # Type checkers read the "as" imports, not __all__ (a computed one would export nothing to them).
    (tmp_path / "star.py").write_text("from dst import *\n\nresult: RunResult = run(load_scenario(), 1)\n"
                                      "steps: tuple[Step, ...] = result.plan\n")
    done = mypy(tmp_path / "star.py", "--strict")
    assert done.returncode == 0, done.stdout + done.stderr
