"""Every install line the docs show names this project as the package index knows it, and extras it has."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), *sorted((REPO / "examples").glob("*/README.md")),
        *sorted((REPO / ".github" / "workflows").glob("*.yml"))]
# pip install [-e] then a requirement: ".[a,b]", '.[a]', "name[a]==1.0", name, "name[a] @ git+URL", "/path/to/dst[a]"
_INSTALL = re.compile(r"pip install (?:--?[\w-]+ )*(-e )?(?P<q>[\"']?)(?P<req>[^\"'\s`]+)(?: @ [^\"'\s`]+)?(?P=q)")


def _requirements() -> list[tuple[Path, str, str]]:
    found = []
    for doc in DOCS:
        for match in _INSTALL.finditer(doc.read_text()):
            found.append((doc, match.group("req"), match.group(0)))
    return found


def test_install_lines_name_the_distribution_and_extras_it_has() -> None:
    extras = set(PROJECT["optional-dependencies"])
    ours = 0
    for doc, req, line in _requirements():
        name, _, rest = re.match(r"([^\[=<>@]*)(\[([^\]]*)\])?", req).group(1, 2, 3)  # type: ignore[union-attr]
        if name.endswith("/dst"):
            name = "."  # a checkout of dst elsewhere: /path/to/dst[aio]
        if name not in (".", PROJECT["name"]) and not name.startswith("dst"):
            continue  # another package (ray, distributed, prefect, ...)
        ours += 1
        assert name in (".", PROJECT["name"]), f"{doc.name}: {line!r} names {name!r}, not {PROJECT['name']!r}"
        for extra in filter(None, (rest or "").split(",")):
            assert extra in extras, f"{doc.name}: {line!r}: no extra {extra!r} in pyproject.toml ({sorted(extras)})"
    assert ours >= 5


def test_the_name_is_not_the_package_index_s_other_dst() -> None:
    assert PROJECT["name"] == "dst-harness" and PROJECT["scripts"]["dst"] == "dst._console:entry"
