"""docs/protocol.md is what the code says: the generator writes it again, word for word, from the classes."""

from __future__ import annotations

import difflib
import importlib.util
import re
from pathlib import Path
from types import ModuleType

import attrs
import pytest

from dst.reference import protocol
from dst.sut import message

ROOT = Path(__file__).resolve().parents[1]


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("protocol_page", ROOT / "docs" / "protocol.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GENERATOR = _generator()


def test_the_page_is_what_the_code_says():
    written, generated = GENERATOR.PAGE.read_text(), GENERATOR.render()
    if written != generated:
        diff = "".join(list(difflib.unified_diff(written.splitlines(True), generated.splitlines(True),
                                                 "docs/protocol.md", "the code"))[:40])
        pytest.fail(f"docs/protocol.md differs from the code: run {GENERATOR.COMMAND}\n{diff}")


def test_every_message_and_field_of_the_reference_protocol_is_on_the_page():
    page = GENERATOR.PAGE.read_text()
    for cls in [c for c in vars(protocol).values() if isinstance(c, type) and c.__module__ == protocol.__name__]:
        assert f"### `{cls.__name__}`" in page
        section = page.split(f"### `{cls.__name__}`")[1].split("\n### ")[0]
        for field in attrs.fields(cls):
            assert f"| `{field.name}` |" in section, (cls.__name__, field.name)


def test_every_link_within_the_page_leads_to_a_heading_of_it():
    page = GENERATOR.PAGE.read_text()
    # GitHub's anchors: a heading in lower case, without its punctuation, its spaces as hyphens (repeats not linked).
    anchors = {re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
               for heading in re.findall(r"^#+ (.+)$", page, re.M)}
    for target in re.findall(r"\]\(#([^)]+)\)", page):
        assert target in anchors, target


def test_a_field_without_words_stops_the_generator_naming_it():
    @message
    class Lent:
        """A message someone added."""

        lease: int  # the lease
        until: int

    with pytest.raises(GENERATOR.Undocumented, match=r"Lent\.until: a field without a comment"):
        GENERATOR.section(Lent)
