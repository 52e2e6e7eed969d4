"""Write docs/protocol.md, the adapter's protocol on one page, from the code: ``python docs/protocol.py``.

Each class the page shows is read from its source: its docstring; each field with its type, its default and
the comment on its line (or the comment lines just above it); and, for a protocol (not a record), each public
method's signature and docstring.
A class, field or method without words stops the generator, naming it: write them in the code, not here.
"""

from __future__ import annotations

import ast
import inspect
import io
import re
import sys
import textwrap
import tokenize
from pathlib import Path

import attrs

from dst import aio, sut
from dst.aio import observe
from dst.reference import protocol

PAGE = Path(__file__).with_name("protocol.md")
COMMAND = "python docs/protocol.py"

INTRO = f"""\
# The adapter's protocol

*Written from the code by `{COMMAND}` (`tests/test_protocol_doc.py` fails when this page and the code
differ): to change a word here, change the docstring or the field's comment in the code.*

An *adapter* is a module of yours that puts your service behind `dst`'s seam, `dst.sut`: the scenario key
`[model] impl` names it, and its `build(env)` returns a [`System`](#system). [your-service.md](your-service.md)
walks through a whole adapter, and [asyncio.md](asyncio.md) brings an unmodified asyncio service. This page is
the reference for both: every message, fact, view and bound, and every piece a model builds, with their fields
and what they mean. Times are integer milliseconds of virtual time, from 0 at the start of a run.

**What a service answers.** A service that speaks the reference protocol reuses the reference client program
(`dst.reference.lease_job`) and the fenced resource (`dst.reference.FencedResource`) as they are. Its
`handlers()` map four requests to coroutines: `Acquire`, `Renew`, `Release` and `Exit`; the resource answers
`Write`. `Owner` and `Evict` are sent only by the reference model's client with one of its bugs, so a service
for `lease_job` needs no handler for them. A request the service has no handler for stops the run with a
`TypeError` naming it. `Granted` needs a `seat` and a `token`: a service that has neither makes them up, as
[`Granted`](#granted) says. A service that runs work also handles `Submit` and `Cancel`, which the harness sends.

**What a service reports.** The harness keeps its own books from the [`Facts`](#facts) the service reports as it
acts, and checks every invariant against them and the views ([`LeaseView`](#leaseview), [`RunView`](#runview),
and the resource's own, [`ResourceView`](#resourceview), when it has one) after every step; the [`Bounds`](#bounds)
give the liveness invariants their windows.
"""

# (heading, words, classes); every class of the reference protocol's module is shown, in its order.
MESSAGES = [cls for cls in vars(protocol).values() if inspect.isclass(cls) and cls.__module__ == protocol.__name__]
SECTIONS: list[tuple[str, str, list[type]]] = [
    ("The reference protocol", "`dst.reference.protocol`: requests (they have a `kind`, which keys their random "
     "draws) and the responses that answer them.", MESSAGES),
    ("The harness's own messages", "`dst.sut`: what people outside the system send (plan steps `submit` and "
     "`cancel`), and the handle a worker works under on a run.", [sut.Submit, sut.Cancel, sut.RunClaim]),
    ("What the invariants read", "`dst.sut`: the facts a service reports (`env.facts`), the views of the "
     "authority's state it gives (`System.leases`, `System.runs`; the resource's, `System.resource`) and the bounds "
     "it promises (`System.bounds`).",
     [sut.Facts, sut.LeaseView, sut.RunView, sut.ClaimView, sut.ResourceView, sut.Bounds]),
    ("What a model builds", "`dst.sut`: what `build(env)` receives and returns, and what it is asked to do.",
     [sut.System, sut.Service, sut.Resource, sut.Order, sut.Env, sut.Workload, sut.Clock]),
    ("The asyncio mode", "`dst.aio`, where it differs: an asyncio adapter's `build(env)` returns a "
     "`dst.aio.System`, and a service that reports no facts gives a `LeaseTable` to have them derived.",
     [aio.System, observe.LeaseRow, observe.LeaseTable]),
]


Field = tuple[str, str, str, str]  # name, type, default ("" for none), meaning


class Undocumented(Exception):
    """A class, field or method the page would show without words."""


def markdown(text: str) -> str:
    """A docstring's reStructuredText spans as Markdown: ``x`` and :class:`~a.X` become `x` and `X`."""
    text = re.sub(r":\w+:`~[\w.]*?(\w+)`", r"`\1`", text)
    text = re.sub(r":\w+:`([^`]+)`", r"`\1`", text)
    return text.replace("``", "`")


def cell(text: str) -> str:
    return " ".join(markdown(text).split()).replace("|", "\\|")


def first_sentence(text: str) -> str:
    return re.split(r"(?<=\.)\s", " ".join(text.split()), maxsplit=1)[0].rstrip(".")


def is_request(tree: ast.ClassDef) -> bool:
    """A request sets its ``kind``; a response takes one from its name."""
    return any(isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "kind" for node in tree.body)


def parameters(args: ast.arguments) -> str:
    """A method's parameters after ``self``, spaced as PEP 8 spaces them (``token: int | None = None``)."""
    plain = args.posonlyargs + args.args
    defaults: list[ast.expr | None] = [None] * (len(plain) - len(args.defaults)) + list(args.defaults)
    if args.vararg or args.kwonlyargs or args.kwarg:
        raise NotImplementedError("show *args, keyword-only parameters and **kwargs")
    return ", ".join(ast.unparse(arg) + (" = " + ast.unparse(default) if default else "")
                     for arg, default in list(zip(plain, defaults))[1:])


def source(cls: type) -> tuple[ast.ClassDef, dict[int, str], list[str]]:
    """The class's syntax tree, its comments by line, and its lines."""
    text = textwrap.dedent(inspect.getsource(cls))
    comments = {tok.start[0]: tok.string.lstrip("# ") for tok in tokenize.generate_tokens(io.StringIO(text).readline)
                if tok.type == tokenize.COMMENT}
    tree = ast.parse(text).body[0]
    assert isinstance(tree, ast.ClassDef)
    return tree, comments, text.splitlines()


def docstring(cls: type) -> str:
    doc = ast.get_docstring(source(cls)[0])
    if not doc:
        raise Undocumented(f"{cls.__module__}.{cls.__name__}: a class without a docstring")
    return markdown(doc)


def fields(cls: type) -> list[Field]:
    """Each annotated field, in order; its meaning is the comment on its line, else the comment lines above it."""
    tree, comments, lines = source(cls)
    rows = []
    for node in tree.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            above = node.lineno - 1
            while above in comments and lines[above - 1].lstrip().startswith("#"):
                above -= 1
            meaning = comments.get(node.lineno) or " ".join(comments[n] for n in range(above + 1, node.lineno))
            default = ast.unparse(node.value) if node.value is not None else ""
            rows.append((node.target.id, ast.unparse(node.annotation), default, meaning))
    return rows


def methods(cls: type) -> list[tuple[str, str]]:
    """(signature, docstring) of each public method; a property shows as ``name: type``."""
    rows = []
    for node in source(cls)[0].body:
        if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
            doc = ast.get_docstring(node)
            if not doc:
                raise Undocumented(f"{cls.__module__}.{cls.__name__}.{node.name}: a method without a docstring")
            returns = ast.unparse(node.returns) if node.returns else ""
            if any(isinstance(d, ast.Name) and d.id == "property" for d in node.decorator_list):
                signature = f"{node.name}: {returns}"
            else:
                signature = f"{node.name}({parameters(node.args)})" + (f" -> {returns}" if returns else "")
            rows.append((signature, doc))
    return rows


def table(cls: type, rows: list[Field]) -> list[str]:
    defaults = any(row[2] for row in rows)
    out = ["| field | type | " + ("default | " if defaults else "") + "meaning |",
           "|---|---|" + ("---|" if defaults else "") + "---|"]
    for name, kind, default, meaning in rows:
        if not meaning:
            raise Undocumented(f"{cls.__module__}.{cls.__name__}.{name}: a field without a comment")
        given = (f"`{default}` | " if default else "required | ") if defaults else ""
        out.append(f"| `{name}` | `{cell(kind)}` | {given}{cell(meaning)} |")
    return out + [""]


def summary(classes: list[type]) -> list[str]:
    """One line per message, requests first: its fields and the first sentence of its docstring."""
    rows: dict[bool, list[str]] = {True: [], False: []}
    for cls in classes:
        names = ", ".join(f"`{row[0]}`" for row in fields(cls))
        rows[is_request(source(cls)[0])].append(
            f"| [`{cls.__name__}`](#{cls.__name__.lower()}) | {names} | {cell(first_sentence(docstring(cls)))} |")
    return (["| request | fields | meaning |", "|---|---|---|"] + rows[True] + [""]
            + ["| response | fields | meaning |", "|---|---|---|"] + rows[False] + [""])


def section(cls: type) -> list[str]:
    name = "dst.aio.System" if cls is aio.System else cls.__name__
    out = [f"### `{name}`", "", docstring(cls), ""]
    rows = fields(cls)
    if cls is aio.System:  # only where it differs from dst.sut.System
        base = {(row[0], row[1]) for row in fields(sut.System)}
        same = ", ".join(f"`{row[0]}`" for row in rows if (row[0], row[1]) in base)
        out += table(cls, [row for row in rows if (row[0], row[1]) not in base])
        out += [f"As in [`System`](#system): {same}.", ""]
    elif rows:
        out += table(cls, rows)
    if not attrs.has(cls):  # a protocol's methods; a record's are its own business
        out += [f"- `{signature}`: {' '.join(markdown(text).split())}" for signature, text in methods(cls)] + [""]
    return out


def render() -> str:
    out = [INTRO]
    for heading, intro, classes in SECTIONS:
        out += [f"## {heading}", "", intro, ""]
        if classes is MESSAGES:
            out += summary(classes)
        for cls in classes:
            out += section(cls)
    return "\n".join(out).rstrip("\n") + "\n"


if __name__ == "__main__":
    try:
        PAGE.write_text(render())
    except Undocumented as e:
        sys.exit(f"{COMMAND}: {e}: write its words in the code")
    print(f"wrote {PAGE}")
