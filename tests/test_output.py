"""What dst prints is safe to print, and output that cannot be written ends quietly.

User text (a scenario's name, a path, a model's messages) is printed as text: never read as rich
markup, its control characters shown as escapes. A closed pipe, a full disk, a closed standard
output or an ASCII-only terminal end with one line (or none, for a reader that went away) and a
fixed exit code, never a traceback. The environment cases run ``dst`` as a real process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dst.cli import EXIT_BROKEN_PIPE, EXIT_USAGE, main

DST = [sys.executable, "-m", "dst"]
HOSTILE_NAME = "[/] [bold]x[/bold] :bug: \x1b[31mred\x1b[0m \u202eevil 😀"
ESC = "\x1b"


def scenario_named(tmp_path: Path, name: str) -> Path:
    path = tmp_path / "named.toml"
    text = f'name = {json.dumps(name, ensure_ascii=False)}\n[run]\nduration = "60s"\nquiet = "200s"\n'
    path.write_text(text, encoding="utf-8")
    return path


def one_dst_line(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got {err!r}"
    assert lines[0].startswith("dst") and "Traceback" not in err
    return lines[0]


# --- user text is text ------------------------------------------------------------------------

def test_markup_and_escapes_in_a_name_are_printed_as_text(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = scenario_named(tmp_path, HOSTILE_NAME)
    assert main(["run", "--scenario", str(path), "--seed", "1"]) == 0
    out = capsys.readouterr().out
    assert "[/] [bold]x[/bold] :bug:" in out  # rich would have read it as markup (and failed on "[/]")
    assert "\\x1b[31mred\\x1b[0m" in out and "\\u202eevil" in out  # escapes shown, not obeyed
    assert ESC not in out and "\u202e" not in out
    assert "😀" in out  # printable text stays as written


def test_a_control_character_in_a_bad_value_stays_on_one_line(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.toml"
    path.write_text('[workload]\nclients = "\\u001b[2J\\nmore\\r"\n', encoding="utf-8")
    assert main(["run", "--scenario", str(path)]) == EXIT_USAGE
    line = one_dst_line(capsys.readouterr().err)
    assert "workload.clients" in line and ESC not in line and "\r" not in line


def test_a_hostile_file_name_is_escaped_in_the_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "a\x1b[2Jb\nc.toml"
    path.write_text("x = ", encoding="utf-8")
    assert main(["run", "--scenario", str(path)]) == EXIT_USAGE
    line = one_dst_line(capsys.readouterr().err)
    assert "\\x1b[2Jb\\nc.toml" in line and "not valid TOML" in line


def test_a_very_long_path_is_shortened_in_the_middle(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--scenario", "d/" * 5000 + "missing.toml"]) == EXIT_USAGE
    line = one_dst_line(capsys.readouterr().err)
    assert len(line) < 1000 and line.count("missing.toml") == 1 and "characters" in line


# --- inputs the TOML reader or int() cannot take ------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("x = " + "[" * 2000 + "]" * 2000, "nested too deep"),
    ("x = " + "{a = " * 2000 + "1" + "}" * 2000, "nested too deep"),
    ("[workload]\nclients = " + "9" * 5000, "4300 digits"),
    ("name = 'x'\n\x00", "not valid TOML"),
    (b"\xff\xfe name = 1", "not UTF-8"),
])
def test_input_the_reader_cannot_take_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                  text: str | bytes, expected: str) -> None:
    path = tmp_path / "hostile.toml"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    assert main(["run", "--scenario", str(path)]) == EXIT_USAGE
    assert expected in one_dst_line(capsys.readouterr().err)


def test_a_byte_order_mark_is_not_an_error(tmp_path: Path) -> None:
    path = tmp_path / "bom.toml"
    path.write_bytes(b"\xef\xbb\xbfname = 'with a BOM'\n")
    assert main(["run", "--scenario", str(path), "--json"]) == 0


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_is_refused_rather_than_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fifo = tmp_path / "pipe.toml"
    os.mkfifo(fifo)  # nobody writes it: reading it would block forever
    assert main(["run", "--scenario", str(fifo)]) == EXIT_USAGE
    assert "not a regular file" in one_dst_line(capsys.readouterr().err)
    assert main(["replay", str(fifo)]) == EXIT_USAGE
    assert "not a regular file" in one_dst_line(capsys.readouterr().err)


@pytest.mark.parametrize("argv, expected", [
    (["run", "--seed", "9" * 5000], "non-negative integer seed"),
    (["fuzz", "--count", "9" * 5000], "positive integer"),
    (["fuzz", "--seeds", "1:" + "9" * 5000], "A:B"),
    (["fuzz", "--shard", "1/" + "9" * 5000], "K/N"),
    (["fuzz", "--workers", "100000"], "from 1 to"),
    (["fuzz", "--workers", "0"], "from 1 to"),
    (["run", "--seed", "\x1b[2J"], "non-negative integer seed"),
])
def test_hostile_flags_are_one_line(capsys: pytest.CaptureFixture[str], argv: list[str], expected: str) -> None:
    assert main(argv) == EXIT_USAGE
    line = one_dst_line(capsys.readouterr().err)
    assert expected in line and ESC not in line and len(line) < 1000


# --- output that cannot be written --------------------------------------------------------------

def test_a_reader_that_goes_away_ends_the_output_quietly() -> None:
    # `dst run --trace | head -1`: head exits after one line, the pipe closes under dst.
    proc = subprocess.Popen([*DST, "run", "--seed", "1", "--trace"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == EXIT_BROKEN_PIPE
    assert err == b""  # no traceback, no "Exception ignored ... BrokenPipeError"


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize("args", [["run", "--seed", "1"], ["run", "--seed", "1", "--json"], ["bugs"]])
def test_a_full_disk_is_one_line(args: list[str]) -> None:
    with open("/dev/full", "w") as full:
        done = subprocess.run([*DST, *args], stdout=full, stderr=subprocess.PIPE, timeout=120)
    assert done.returncode == EXIT_USAGE
    assert one_dst_line(done.stderr.decode()) == "dst: cannot write output: No space left on device"


def test_a_closed_standard_output_is_one_line() -> None:
    done = subprocess.run([*DST, "run", "--seed", "1"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          preexec_fn=lambda: os.close(1), timeout=120)
    assert done.returncode == EXIT_USAGE
    assert "standard output is closed" in one_dst_line(done.stderr.decode())


def test_a_closed_standard_error_still_gives_the_exit_code() -> None:
    done = subprocess.run([*DST, "run", "--seed", "x"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                          preexec_fn=lambda: os.close(2), timeout=120)
    assert done.returncode == EXIT_USAGE and done.stdout == b""


def test_an_ascii_only_terminal_gets_escapes(tmp_path: Path) -> None:
    path = scenario_named(tmp_path, "caf\u00e9 😀")
    env = {**os.environ, "PYTHONIOENCODING": "ascii"}
    done = subprocess.run([*DST, "run", "--scenario", str(path), "--seed", "1"], capture_output=True, env=env,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert b"caf\\xe9 \\U0001f600" in done.stdout and done.stderr == b""
    done = subprocess.run([*DST, "bugs"], capture_output=True, env=env, timeout=120)  # box and arrow characters
    assert done.returncode == 0 and done.stderr == b""


@pytest.mark.slow
def test_piped_output_is_not_padded_and_follows_columns() -> None:
    """Piped, a table's rows end where their text does (rich pads them to the console's width), and
    COLUMNS, when set, is the width long lines wrap at."""
    out = subprocess.run([*DST, "fuzz", "--count", "3", "--no-findings", "--workers", "1"], capture_output=True,
                         text=True, env={k: v for k, v in os.environ.items() if k != "COLUMNS"}).stdout
    lines = out.splitlines()
    assert len(lines) > 5 and not [line for line in lines if line != line.rstrip()]
    narrow = subprocess.run([*DST, "run", "--seed", "1"], capture_output=True, text=True,
                            env=dict(os.environ, COLUMNS="80")).stdout
    assert max(map(len, narrow.splitlines())) <= 80
    wide = subprocess.run([*DST, "run", "--seed", "1"], capture_output=True, text=True,
                          env={k: v for k, v in os.environ.items() if k != "COLUMNS"}).stdout
    assert max(map(len, wide.splitlines())) > 80  # one event, one line, unless COLUMNS says otherwise
