"""A model outside dst plugs in with one name and no dst edits, and every command works on it.

Two models, neither in ``src/dst``: the minimal adapter of ``docs/your-service.md``, copied out of
the doc as a reader would, and a small package written here (options, generator-style handlers,
its own bug scenarios). Both live in a temporary folder put on ``sys.path``.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import dst as dst_package
from dst.cli import main

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "your-service.md"


def adapter_source() -> str:
    text = DOC.read_text()
    m = re.search(r"<!-- adapter: my_limiter\.py -->\n```python\n(.*?)```", text, re.S)
    assert m, "docs/your-service.md has no adapter block"
    return m.group(1)


ACME = {
    "__init__.py": "",
    "model.py": '''
        """A lock service written with generators, with options and a bug scenario of its own."""
        import attrs
        from dst import sut
        from dst.reference import FencedResource, lease_job
        from dst.reference.protocol import Acquire, Denied, Done, Exit, Granted, Refused, Release, Renew, Renewed


        @attrs.frozen
        class Options:
            ttl: int = sut.option(30_000, "positive-duration")
            reaper_interval: int = sut.option(5_000, "positive-duration")
            tag: str = sut.option("acme", "choice", choices=("acme", "other"))

            def __attrs_post_init__(self):
                if self.reaper_interval >= self.ttl:
                    raise sut.OptionError("reaper_interval", f"less than ttl ({self.ttl}ms)")


        class Locks(sut.Service):
            def __init__(self, env):
                self.env, self.o = env, env.options
                self.counts, self.leases, self.ids = dict.fromkeys(env.limits, 0), {}, 0

            def handlers(self):
                return {Acquire: self.acquire, Renew: self.renew, Release: self.release, Exit: self.exit}

            def loops(self):
                return [] if "no-reaper" in self.env.bugs else [("reaper", self.o.reaper_interval)]

            def tick(self, loop, now):
                return [self.reap(i) for i, l in sorted(self.leases.items()) if l[3] <= now]

            def acquire(self, req):
                yield
                now = self.env.clock.now
                held = [l for l in self.leases.values() if l[1] == req.limit and l[3] > now]
                if sum(l[2] for l in held) + req.slots > self.env.limits[req.limit]:
                    return Denied(1_000)
                seat = min(set(range(len(held) + 1)) - {l[4] for l in held})
                self.ids += 1
                self.leases[self.ids] = [req.holder, req.limit, req.slots, now + self.o.ttl, seat]
                self.counts[req.limit] += req.slots
                self.env.facts.slots_taken(self.ids, req.limit, req.slots)
                self.env.facts.lease_stored(self.ids, req.holder, req.limit)
                return Granted(self.ids, now + self.o.ttl, self.ids, seat)

            def renew(self, req):
                yield
                lease = self.leases.get(req.lease)
                if lease is None or lease[0] != req.holder or lease[3] <= self.env.clock.now:
                    return Refused("no such lease")
                lease[3] = self.env.clock.now + self.o.ttl
                self.env.facts.lease_renewed(req.lease, lease[1])
                return Renewed(lease[3])

            def release(self, req):
                yield
                lease = self.leases.get(req.lease)
                if lease is None or lease[0] != req.holder:
                    return Refused("no such lease")
                self.drop(req.lease)
                return Done("released")

            def exit(self, req):
                yield
                return Done("held nothing")

            def reap(self, lease_id):
                yield
                lease = self.leases.get(lease_id)
                if lease is not None and lease[3] <= self.env.clock.now:
                    self.drop(lease_id)

            def drop(self, lease_id):
                lease = self.leases.pop(lease_id)
                self.env.facts.lease_removed(lease_id)
                self.counts[lease[1]] -= lease[2]
                self.env.facts.slots_returned(lease_id, lease[1], lease[2])

            def count(self, limit):
                return self.counts[limit]

            def expiry(self, lease_id):
                return self.leases[lease_id][3] if lease_id in self.leases else None

            def lease_ids(self):
                return sorted(self.leases)


        def build(env):
            locks = Locks(env)
            return sut.System(service=locks, job=lease_job(env, ttl=env.options.ttl),
                              resource=FencedResource(env.facts), leases=locks,
                              bounds=sut.Bounds(reclaim_within=env.options.ttl + env.options.reaper_interval))


        model = sut.Model(build, options=Options, scenarios="acme:scenarios",
                          bugs=(sut.Bug("no-reaper", ("stranded-slot",), 2, "expired leases are never reaped"),))
    ''',
    "scenarios/no-reaper.toml": '''
        name = "no-reaper"
        bugs = ["no-reaper"]

        [model]
        impl = "acme.model:model"
        ttl = "20s"
        reaper_interval = "4s"

        [run]
        quiet = "60s"

        [faults]
        crash = { rate = 0.5 }
    ''',
}


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project folder with both models importable from it, as the working directory."""
    (tmp_path / "my_limiter.py").write_text(adapter_source())
    for name, text in ACME.items():
        path = tmp_path / "acme" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip())
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def dst(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def pytest_in(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    this_dst = str(Path(dst_package.__file__).parents[1])  # the dst this test runs, not another installed one
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(folder), this_dst]))
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args], cwd=folder,
                          env=env, capture_output=True, text=True)


# --- the adapter of docs/your-service.md ----------------------------------------------------------------

def test_the_documented_adapter_is_under_80_lines():
    assert len(adapter_source().splitlines()) < 80


@pytest.mark.slow
def test_the_adapter_runs_and_its_correct_form_is_never_accused(home, capsys):
    code, out, _ = dst(capsys, "run", "--model", "my_limiter:model", "--seed", "1", "--json")
    data = json.loads(out)
    assert code == 0 and data["model"] == "my_limiter:model" and data["result"] == "ok"
    assert data["invariants"] == ["slot-accounting", "capacity", "no-foreign-release", "fenced-writes",
                                  "single-executor", "stranded-slot", "expiry-only-forward", "removed-before-expiry",
                                  "unique-tokens", "exclusive-seats", "write-progress", "fence-only-up",
                                  "refused-changes-nothing"]
    code, out, _ = dst(capsys, "fuzz", "--model", "my_limiter:model", "--count", "300", "--workers", "2", "--json")
    assert code == 0 and json.loads(out)["violations"] == 0


@pytest.mark.slow
def test_the_adapters_bug_is_found_shrunk_replayed_and_guarded_by_pytest(home, capsys):
    code, out, _ = dst(capsys, "fuzz", "--model", "my_limiter:model", "--bug", "split-release", "--count", "60",
                       "--workers", "2", "--stop-on-first", "--json")
    report = json.loads(out)
    assert code == 1 and report["signatures"][0]["invariant"] == "no-foreign-release"
    assert "--model my_limiter:model" in report["signatures"][0]["reproduce"]
    [finding] = sorted((home / "findings").glob("*.toml"))
    assert 'impl = "my_limiter:model"' in finding.read_text()

    code, out, _ = dst(capsys, "replay", str(finding), "--json")
    assert code == 0 and json.loads(out)[0]["status"] == "reproduces"

    again = shlex.split(report["signatures"][0]["reproduce"])  # the seed's flags: its scenario of the campaign
    code, out, _ = dst(capsys, "shrink", *again[2:], "--json")
    assert code == 1 and json.loads(out)["path"] == f"findings/{finding.name}"  # the same finding: not written again

    done = pytest_in(home, "findings")
    assert done.returncode == 0 and "1 passed" in done.stdout, done.stdout + done.stderr


def test_selftest_hunts_the_adapters_bugs(home, capsys):
    code, out, _ = dst(capsys, "selftest", "--model", "my_limiter:model", "--clean-seeds", "30", "--workers", "1",
                       "--json")
    report = json.loads(out)
    assert code == 0 and report["ok"] and report["model"] == "my_limiter:model"
    assert [(b["slug"], b["hit"]) for b in report["bugs"]] == [("split-release", "no-foreign-release")]


def test_the_adapter_is_deterministic_across_processes(home, capsys):
    code, out, _ = dst(capsys, "run", "--model", "my_limiter:model", "--seed", "4", "--check-determinism", "--json")
    assert code == 0 and json.loads(out)["determinism"] == "identical"


# --- a package of one's own: options, generators, bug scenarios --------------------------------------

@pytest.mark.slow
def test_a_scenario_names_the_package_and_sets_its_options(home, capsys):
    (home / "locks.toml").write_text('[model]\nimpl = "acme.model:model"\nttl = "40s"\ntag = "other"\n')
    code, out, _ = dst(capsys, "run", "--scenario", "locks.toml", "--seed", "2", "--json")
    assert code == 0 and json.loads(out)["model"] == "acme.model:model"
    code, out, _ = dst(capsys, "fuzz", "--scenario", "locks.toml", "--count", "150", "--json")
    assert code == 0 and json.loads(out)["violations"] == 0


@pytest.mark.slow
def test_the_packages_bug_scenario_is_found_by_selftest_and_its_finding_replays(home, capsys):
    code, out, _ = dst(capsys, "selftest", "--model", "acme.model:model", "--clean-seeds", "30", "--workers", "2",
                       "--findings", "findings", "--json")
    report = json.loads(out)
    assert code == 0 and report["ok"], report
    [bug] = report["bugs"]
    assert bug["hit"] == "stranded-slot" and bug["finding"]["steps_after"] <= 3
    [finding] = sorted((home / "findings").glob("*.toml"))
    text = finding.read_text()
    assert 'impl = "acme.model:model"' in text and 'ttl = "20s"' in text  # its own options, from its scenario
    code, out, _ = dst(capsys, "replay", str(finding), "--quiet")
    assert code == 0 and "reproduces" in out
    assert pytest_in(home, "findings").returncode == 0


@pytest.mark.parametrize("toml, expected", [
    ('[model]\nimpl = "acme.model:model"\nttl = "0s"\n', "model.ttl: expected a duration above zero, got '0s'"),
    ('[model]\nimpl = "acme.model:model"\nreaper_interval = "40s"\n',
     "model.reaper_interval: expected less than ttl (30000ms), got '40s'"),
    ('[model]\nimpl = "acme.model:model"\ntag = "x"\n', "model.tag: expected one of 'acme', 'other', got 'x'"),
    ('[model]\nimpl = "acme.model:model"\nreaper = "1s"\n',
     "model.reaper: expected one of the keys impl, limits, store_latency, store_slow, store_slow_by, store_reset, ttl, reaper_interval, tag (unknown key)"),
    ('[model]\nimpl = "acme.model:model"\nttl = "60s"\n\n[runs]\nsubmissions = 3\n',
     "acme.model:model does not run work"),
    ('bugs = ["double-release"]\n[model]\nimpl = "acme.model:model"\n',
     "bugs: expected bug slugs of acme.model:model from: no-reaper; got unknown 'double-release'"),
    ('[model]\nimpl = "nowhere.at.all:model"\n',
     "model.impl: cannot import 'nowhere.at.all' (ModuleNotFoundError: No module named 'nowhere')"),
    ('[model]\nimpl = "acme.model:nothing"\n', "model.impl: module 'acme.model' has no 'nothing'"),
    ('[model]\nimpl = "acme/model.py"\n', "model.impl: expected an importable name such as 'package.module:model'"),
])
def test_a_bad_model_or_option_is_one_line_and_exit_2(home, capsys, toml, expected):
    (home / "bad.toml").write_text(toml)
    code, out, err = dst(capsys, "run", "--scenario", "bad.toml")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and expected in err, err


def test_a_catalogue_scenario_runs_on_your_model_without_the_bugs_it_does_not_have(home, capsys):
    code, out, err = dst(capsys, "run", "--scenario", "double-release", "--model", "acme.model:model",
                         "--seed", "1")
    assert code in (0, 1) and "model         acme.model:model" in out, err
    assert err.strip() == ("dst: note: acme.model:model has no bug double-release, option acquire_wait: the "
                           "scenario runs without them (a bug's scenario then tests whether your model has that bug)")
    code, _, err = dst(capsys, "run", "--scenario", "double-release", "--seed", "1")  # its own model: no note
    assert code == 1 and err == ""


def test_a_model_module_that_exits_as_it_is_imported_is_refused_not_obeyed(home, capsys):
    (home / "quitter.py").write_text("import sys\nsys.exit(0)\n")  # would end dst with 0: "no violation"
    for argv in (["run", "--model", "quitter:model"], ["fuzz", "--model", "quitter:model", "--count", "1"]):
        code, out, err = dst(capsys, *argv)
        assert code == 2 and err.count("\n") == 1, (argv, err)
        assert "cannot import 'quitter': importing it called sys.exit(0)" in err


def test_a_bad_model_flag_is_one_line_and_exit_2(home, capsys):
    for argv in (["run", "--model", "nowhere:model"], ["fuzz", "--model", "x y", "--count", "1"],
                 ["selftest", "--model", "nowhere:model"], ["run", "--model", "my_limiter:model", "--bug", "nope"]):
        code, _, err = dst(capsys, *argv)
        assert code == 2 and err.count("\n") == 1, (argv, err)


def test_a_finding_naming_a_module_that_is_gone_is_one_line_and_exit_2(home, capsys):
    dst(capsys, "fuzz", "--model", "my_limiter:model", "--bug", "split-release", "--count", "60", "--stop-on-first",
        "--workers", "1")
    [finding] = sorted(Path("findings").glob("*.toml"))
    finding.write_text(finding.read_text().replace("my_limiter:model", "my_limiter_gone:model"))
    code, out, err = dst(capsys, "replay", str(finding))
    assert code == 2 and err.strip() == (f"dst: findings/{finding.name}: model.impl: cannot import 'my_limiter_gone' "
                                         f"(ModuleNotFoundError: No module named 'my_limiter_gone')")
    # ... and with the model named on the command line, it replays on that one.
    code, out, err = dst(capsys, "replay", str(finding), "--model", "my_limiter:model", "--quiet")
    assert code == 0, out + err


def test_the_library_runs_a_model_object_and_names_it(home):
    import dst as api
    from my_limiter import model  # type: ignore[import-not-found]

    result = api.run(api.load_scenario(), 3, model=model)
    assert result.model == "my_limiter:model" and result.ok
    assert api.run(api.load_scenario(), 3, model="my_limiter:model").digest == result.digest
