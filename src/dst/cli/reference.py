"""docs/cli.md, the command line's reference, written from the parser: ``python -m dst.cli.reference > docs/cli.md``.

Every flag's row is read from :func:`.parser.build_parser` (its spelling, its metavar, its ``help=``), the exit
codes from the constants of :mod:`.command` with their words (``EXIT_MEANINGS``), and the bug slugs from the
reference model's catalogue; what each command is for, and how to read what it prints, is written here, in
``COMMANDS``. A flag without help, an exit code without a meaning or a command without words stops the
generator, naming it: write them in the code, not in the page. ``tests/test_docs.py`` fails when the page and
this generator differ, so a new flag cannot be missing from the page.
"""

from __future__ import annotations

import argparse
import re
import sys

from . import command
from .parser import build_parser

COMMAND = "python -m dst.cli.reference > docs/cli.md"


class Undocumented(Exception):
    """A flag, an exit code or a command the page would show without words."""


INTRO = f"""\
# The command line

*Written from dst's argument parser by `{COMMAND}`;
`tests/test_docs.py` fails when this page and the parser differ. A flag's words are its `help=` in
`src/dst/cli/parser.py`, the exit codes' are in `src/dst/cli/command.py`, and the paragraphs about each
command are in `src/dst/cli/reference.py`.*

`dst COMMAND --help` lists the same flags. Every command that runs a model takes `--model IMPL`, to run
another model than the one its scenario or finding names: your own service's adapter, an importable name
such as `my_service.dst_adapter:model` ([your-service.md](your-service.md), [asyncio.md](asyncio.md)).
"""

# What each command is for: (examples, a shell block of command lines; words, markdown). In the parser's order.
COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("""\
dst run --seed 1                                 # the embedded default scenario
dst run --seed 7 --scenario scenarios/default.toml
dst run --seed 7 --json                          # one JSON object; same seed, same bytes
dst run --seed 7 --trace                         # also print every event of the run
dst run --seed 3 --check-determinism             # re-run here, and in a fresh process with another PYTHONHASHSEED
dst run --seed 2 --bug fallback-release          # switch a catalogue bug on in the model
""", """\
It prints the scenario, the seed, the virtual time simulated, the events, the faults injected by
kind, how the jobs ended, the invariants checked, the result and the wall time. On a violation it
prints the invariant's id, the virtual time, one line with the values that disagree, what else the
run broke after it (its consequences: [findings.md](findings.md#cause-and-consequences)), and the
events that led to it: its *causal slice*. The slice follows what the message names (leases, runs,
seats, clients) through the trace: the requests and responses about them, what the network did to
those messages, the faults that touched those clients and the server, the resource's writes on that
seat, and leaves out the rest (another client's polling, reads that came back empty). Then the
commands that print the whole run and minimize it. `--trace` prints every event; `--json` carries
the slice as `violation.slice`.

A run that could not be judged in full is neither a pass nor a violation, and says why in its
`result` row (and as `result` and `unjudged` in `--json`): `undrained` when clients were still busy
as `run.drain_limit` ran out (a job longer than the drain) or the server was down or paused through
the quiet period (what was still moving is not accused of being stranded), and `over-budget` when
the run passed `run.max_events`. It exits `0`. A campaign lists such seeds by kind, with the first
seed and its command.
"""),
    "fuzz": ("""\
dst fuzz --count 500                                        # seeds 1..500 of the default campaign
dst fuzz --scenario double-release --seeds 1:200 --stop-on-first   # a scenario shipped with dst, by name
dst fuzz --time-budget 90s --shard 2/4 --workers 2 --json   # CI job 2 of 4: seeds s with s % 4 == 1
dst fuzz --count 100000 --cluster tcp://HOST:8786           # the same campaign on a Dask cluster
""", """\
With no `--scenario`, the campaign is the default campaign: the embedded default and every
scenario shipped for the model (the `runs` scenario, and each catalogue bug's, run with its bug
switched off and yours on), each also with half its faults aimed at the model's sensitive moments
(`--aim`), so the first campaign covers the whole model and the moments each bug class needs.
A model of your own also runs the default with each fault kind no scenario of the campaign turns
on (a clock skew, a server pause, the slow store: `--enable KIND`) turned on, where the model's
bounds accept it; the report names every fault kind no seed turned on (`never enabled`, and the
zeros of `coverage.enabled` in `--json`): nothing they cause was looked for. And it starts
small: every scenario also runs in a small and a medium world (`--world`: at most 2 clients,
3 jobs and 150 s of activity, or 3, 4 and 300 s), which keeps the faults the full run would meet
(their rates up by as much as the run was cut, at most 4 times). The first block of seeds runs small worlds, the
second small and medium ones, the third medium and full ones; after that a quarter of the seeds
are small, a quarter medium and half in full. A real service's seed in a small world costs about a
tenth of a full one, and most of its findings need no more than two clients.
In the opening (8 seeds per scenario of the campaign), half the seeds go to the broad scenarios (the
default and `runs`, which switch no bug on and exercise the whole model), so a bug any workload
meets is found about as soon as by those alone; after it, a quarter. A quarter take turns across
the other scenarios, and the rest go to the scenarios whose runs reach what the campaign rarely
reaches (a risky situation, a case an invariant exists for, a fault). A seed's scenario is a pure
function of the campaign (first seed, shard), so the same campaign gives the same report, and each
signature's command names the scenario its seed ran (`--no-bugs` switches off the bugs a scenario
file names). The report counts the seeds each scenario ran (`coverage.scenarios` in `--json`).

A real service's campaign also branches: when a seed's run first reaches a risky situation (a holder
paused past its expiry, the server down with leases held, ...), it stops the millisecond after, and
up to `--branches N` (default 4) branches go on from there, each with every draw afresh (latencies,
losses, the order of ready steps, the service's own `random`); the seed's own run goes on as well.
A situation the campaign rarely reaches gets the most branches, one most seeds reach gets one. The
branches are forked from the seed's run at that moment where that is safe (its durable state is its
folder, which is put back after each, and no file lock or server connection is held), so the way
there is paid once; elsewhere each runs from the start. A branch is a run of its own: `dst run --seed
N --branch AT/DRAW` runs it without forking, byte for byte. The report counts branches apart from
seeds (`branches_run`), and the coverage counts both. `--branches 0` turns it off; a model of the
coroutine seam, whose seeds cost milliseconds, branches only when asked.

Seeds run in parallel processes and are reported in seed order, so any number of workers gives the
same results. By default each seed also picks which of the scenario's faults are on and how often,
and which server scheduler to use (`uniform`, or the priority-based `pct`): swarm testing, after
TigerBeetle's VOPR; `--no-swarm` runs the scenario as written. Violations are grouped by signature
(the invariant and the shape of its message), each with its first seed and the exact `dst run`
command that reproduces it. For each new signature the campaign minimizes the violating run and
writes it to `findings/` as it goes; a signature already in the folder is named, not written again.

The summary also says what the campaign exercised, because a campaign that never reaches the
situation a bug needs looks, in its violation count, just like one that searched hard: the faults
that fired by kind (the plan's, and the losses, duplicates and delays the network drew), the
risky situations reached and in how many runs (a holder paused past its lease's expiry, a client
cut off or dead while holding a lease, the server down with leases held, a lease reclaimed while
its holder worked, a write with a superseded token, a release repeated, runs redelivered,
cancelled or orphaned mid-run), and how many times each invariant met a case it exists for. What
was never reached is named, with the invariants it left untested (`no holder was ever paused past
its lease's expiry: single-executor, fenced-writes, ... never tested against it`). `--json`
carries the counts as `coverage`.

A live line on stderr shows seeds done, seeds per second, violations so far and time left (off a
terminal, such as in a CI log, a plain line every ten seconds). `--junit FILE` also writes the
report as JUnit XML: a failing test case per signature, a passing one per invariant that held.
Ctrl-C or SIGTERM (a CI job's timeout) stops at once, ends the worker processes, and prints the
summary so far; the workers also die with the campaign if it is killed outright. It exits `0` when
nothing was found, `1` for violations, `3` for a model error in some seed (whatever else was found),
`2` for bad flags or a bad scenario, and `130` (`143` for SIGTERM) when interrupted before finding
anything.

`--cluster tcp://HOST:8786` runs the same campaign on a Dask cluster instead of local processes:
the same chunks of seeds, consumed in seed order, so the report is the one `--workers 1` prints (in
`--json`, byte for byte but for `wall_seconds` and `seeds_per_second`). It needs the cluster extra
(`pip install "dst-harness[cluster]"`) and the same version of dst (and of a `--model` of your own)
on every worker. An address that cannot be used is one line and exit `2` within seconds; Ctrl-C
and SIGTERM stop it as they stop a local campaign. [cluster.md](cluster.md) says how to start a
cluster, what its workers need, and why Dask.
"""),
    "merge": ("""\
dst merge shard-*.json --junit report.xml       # what each CI job's dst fuzz --shard K/N --json printed
""", """\
Joins the reports of shard jobs into the report the unsharded campaign would have printed (the
same summary, or `--json` in the same schema): counts summed, signatures joined, one finding per
signature; it says which shards are missing. Reports of different scenarios, models, bugs or seed
ranges, or overlapping shards, are refused in one line (exit `2`). It exits `1` if any shard found
a violation (`3` a model error), else `0`. [ci.md](ci.md) has a ready GitHub Actions workflow (a
matrix of shard jobs, then the merge), the exit codes, and how to reproduce a CI failure locally.
"""),
    "shrink": ("""\
dst shrink --seed 3 --scenario scenarios/double-release.toml --swarm
""", """\
Deletes steps (in halving chunks, then one by one), whole clients, shortens durations and gaps,
lowers counts (clients, writes, slots, capacity) and strips the network's randomness, keeping each
change only if the run still violates the same invariant and is smaller in one fixed order. It is
deterministic, bounded (`--max-runs`, `--time-budget`), and prints the size before and after and
why it stopped. Steps keep their ids, which key their random draws, so deleting one step does not
reshuffle the rest of the run. [findings.md](findings.md) says what each pass does and what the
finding holds. It exits `1` when it wrote (or found already written) a finding (`3` for a model
error), `0` when the seed violates nothing.
"""),
    "replay": ("""\
dst replay findings/*.toml
dst replay findings/003-release-frees-another-holders-slot-with-a-duplicated-message.toml --quiet
dst replay findings/009-two-leases-on-one-seat-after-a-pause.toml --all --actor c1 --last 10
""", """\
Prints the run as a timeline (one line per event, a lane per actor, plan steps marked, the
violation last): by default the causal slice with every step of the finding. It says `reproduces`,
`no longer reproduces` (it passes now), or `diverged` (it still violates the invariant but the trace
differs from the recording; it names the first differing event). It exits `0` when every file
reproduces exactly, `1` otherwise, `2` for a file that is not a valid finding. To see a finding's
replay drawn rather than listed, `dst show FILE`.
"""),
    "show": ("""\
dst show findings/009-two-leases-on-one-seat-after-a-pause.toml -o page.html
dst show --seed 5                                 # writes dst-show-default-seed-5.html here
dst show --seed 3 --scenario scenarios/double-release.toml --swarm -o seed3.html
dst fuzz --count 50 --no-findings --json > report.json && dst show report.json -o campaign.html
""", """\
Replays a finding (or runs a seed, with the flags of `dst run`) and writes one self-contained page
that opens in any browser, offline: a lane per actor on a virtual time axis, each lease a bar in its
holder's lane from its grant to its removal (a release, the reaper, a restart that lost it) or
expiry (labelled with its id and fencing token, each renewal a tick with the expiry it set), the
client's protected work a dark strip along it, each claim a worker holds on a run a bar from its
delivery to its ack (or until the run is delivered again), faults as marks or shaded spans in their
timeline colours (with the duration their step gives: a clock skew `by 30s`), messages as arrows
from sender to receiver, the violation marked, and its causal slice highlighted (a checkbox hides
the rest). It opens fitted to the slice (the whole run without a violation); `fit run` shows all of
it, `fit slice` the slice again.
Hover or click shows an event's detail; the wheel zooms and dragging pans. It prints the page's path. An existing
file is replaced only if it is a page `dst show` wrote, or with `--force`, and only a regular file:
a folder, FIFO or device is never written over. The same run gives the same bytes. It exits `0`
once the page is written; `2` for a bad flag, a file that is not a valid finding, or a page that
cannot be written there (one line).

Given a campaign's report (a `.json` file: what `dst fuzz --json` or `dst merge --json` printed),
it draws the campaign instead: what was never reached, with the invariants it left untested, the
share of runs that reached each risky situation, the cases each invariant met, the faults that
fired by kind, and the violations with the commands that reproduce them.
"""),
    "bugs": ("""\
dst bugs                                         # the catalogue: each bug, what it breaks, its story
dst bugs --model my_service.dst_adapter:model    # the bugs your own model declares
""", """\
`--bug SLUG` (on `run`, `fuzz`, `shrink` and `show`) and a scenario's `bugs = [...]`
switch on one wrong behaviour each in the model. In the reference model each is one line marked
`# wrong:` with its source, and `scenarios/<slug>.toml` is its scenario. The slugs of the
reference model, and the invariants each breaks (the one it usually breaks first leading);
[catalogue.md](catalogue.md) tells each one's story, where it comes from, and its minimal
reproduction:
"""),
    "selftest": ("""\
dst selftest                                      # every slug of the bug catalogue
dst selftest --bug double-release --json
dst selftest --model my_service.dst_adapter:model  # every bug your own model declares
""", """\
For each bug of the model (the reference model's: [catalogue.md](catalogue.md)) it fuzzes that
bug's scenario (`scenarios/<slug>.toml`) from seed 1 until the first violation and prints the slug,
the invariants the catalogue expects, the one hit (the run's cause), the seeds and the wall seconds
it took; then it runs every scenario with its bug switched off (`--clean-seeds` each) and expects
no violation. It exits `1` if a bug is missed, hits an invariant the catalogue does not list for it,
or the correct model trips. With `--findings DIR` it also minimizes each bug's violation and writes
it as a finding: that is how the findings in `findings/` were made.
"""),
}

OUTPUT = """\
## Output and errors

Every error is one line on stderr, never a traceback: a bad flag, or a bad scenario file, names the
file, the key and what was expected (`dst: bad.toml: model.ttl: expected a duration above zero, got
'0s'`; [scenarios.md](scenarios.md) has more). Output that cannot be written (a full disk, standard
output closed) is one line too, and exit `2`. A reader that goes away (`dst run --seed 1 --trace |
head -5`) ends the output quietly with `141`, as a shell reports a tool that a closed pipe stopped.
Names and messages are printed as text: rich markup in them is not interpreted, and control
characters are shown as escapes (`\\x1b`).
"""

# A code span the help text marks: 'quoted' words, and --flags.
_CODE = re.compile(r"(?<![\w`])'([^'\n]+?)'(?!\w)|(?<![\w`-])(--[a-z][a-z-]*)")


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("*", "\\*")


def cell(text: str) -> str:
    """Help text as a table cell: its quoted words and flags as code, the rest escaped, pipes too."""
    out, at = [], 0
    for m in _CODE.finditer(text):
        out += [_escape(text[at:m.start()]), f"`{m.group(1) or m.group(2)}`"]
        at = m.end()
    out.append(_escape(text[at:]))
    return "".join(out).replace("|", "\\|")


def subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, str, argparse.ArgumentParser]]:
    """Each command: its name, its one-line help, its parser; in the order the parser adds them."""
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    helps = {a.dest: a.help or "" for a in sub._choices_actions}
    return [(name, helps.get(name, ""), p) for name, p in sub.choices.items()]


def spelling(action: argparse.Action) -> str:
    """How a flag is written: ``--seed SEED``, ``-o, --output FILE``, ``FILE ...``."""
    metavar = action.metavar if isinstance(action.metavar, str) else action.dest.upper()
    if not action.option_strings:
        return {"+": f"{metavar} ...", "?": f"[{metavar}]", "*": f"[{metavar} ...]"}.get(str(action.nargs), metavar)
    flags = ", ".join(action.option_strings)
    return flags if action.nargs == 0 else f"{flags} {metavar}"


def meaning(name: str, parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    """A flag's help, as ``--help`` prints it, and what the parser says beside it: required, or not with another."""
    if not action.help:
        raise Undocumented(f"{' '.join(filter(None, ('dst', name, spelling(action))))}: a flag without help")
    words = action.help % dict(vars(action), prog=parser.prog) if "%" in action.help else action.help
    if action.required and action.option_strings:
        words += " (required)"
    for group in parser._mutually_exclusive_groups:
        if action in group._group_actions:
            others = [" ".join(a.option_strings) for a in group._group_actions if a is not action]
            words += f"; not with {' or '.join(others)}"
    return cell(words)


def flag_table(name: str, parser: argparse.ArgumentParser, skip: type = argparse._HelpAction) -> list[str]:
    """A row per flag, in the parser's order (``--help`` left out: every command has it)."""
    rows = ["| flag | meaning |", "|---|---|"]
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, skip)):
            continue
        rows.append(f"| `{spelling(action)}` | {meaning(name, parser, action)} |")
    return rows


def exit_codes() -> list[str]:
    """The table of exit codes: every ``EXIT_`` constant of :mod:`.command`, with its meaning."""
    codes = {value: key for key, value in vars(command).items() if key.startswith("EXIT_") and isinstance(value, int)}
    rows = ["## Exit codes", "", "The same codes for every command; what a command's own verdict adds is in its "
            "section.", "", "| code | meaning |", "|---|---|"]
    for code in sorted(codes):
        words = command.EXIT_MEANINGS.get(code)
        if not words:
            raise Undocumented(f"{codes[code]} = {code}: an exit code without its meaning in EXIT_MEANINGS")
        rows.append(f"| `{code}` | {cell(words)} |")
    return rows + [""]


def bug_table() -> list[str]:
    from ..reference.bugs import CATALOGUE

    rows = ["| slug | what is wrong | breaks |", "|---|---|---|"]
    for bug in CATALOGUE:
        breaks = ", ".join(f"`{i}`" for i in bug.breaks)
        rows.append(f"| [`{bug.slug}`](catalogue.md#{bug.slug}) | {cell(bug.summary)} | {breaks} |")
    return rows + [""]


def render() -> str:
    parser = build_parser()
    commands = subcommands(parser)
    missing = [name for name, _, _ in commands if name not in COMMANDS]
    if missing:
        raise Undocumented(f"dst {missing[0]}: a command without its words in COMMANDS")
    out = [INTRO]
    out += [f"- [`dst {name}`](#dst-{name}): {cell(words)}" for name, words, _ in commands] + [""]
    out += ["`dst` itself takes:", ""] + flag_table("", parser, skip=argparse._SubParsersAction) + [""]
    out += exit_codes()
    out.append(OUTPUT)
    for name, words, sub in commands:
        examples, prose = COMMANDS[name]
        out += [f"## `dst {name}`", "", f"{cell(words[:1].upper() + words[1:])}.", "", "```sh", examples.rstrip("\n"),
                "```", "", prose]
        if name == "bugs":
            out += bug_table()
        out += flag_table(name, sub) + [""]
    return "\n".join(out).rstrip("\n") + "\n"


if __name__ == "__main__":
    try:
        page = render()
    except Undocumented as e:
        sys.exit(f"{COMMAND}: {e}: write its words in the code")
    sys.stdout.write(page)
