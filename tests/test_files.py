"""dst.files: what dst reads of a user's files (regular files, within a cap) and how it writes them (whole or
not at all, never over something that is not a file). Reports, pages, findings and scenarios all go through it."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from dst.files import MAX_FILE_BYTES, FileError, read_text, replace, staged


def test_a_write_replaces_a_file_whole_readable_by_the_group_and_leaves_nothing_else(tmp_path: Path) -> None:
    target = tmp_path / "report.xml"
    target.write_text("the old report")
    replace(target, b"the new report", prefix=".report.")
    assert target.read_bytes() == b"the new report"
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    assert [p.name for p in tmp_path.iterdir()] == ["report.xml"]


@pytest.mark.parametrize("make, what", [(os.mkdir, "a folder"), (os.mkfifo, "a FIFO, socket or device")])
def test_a_write_never_replaces_what_is_not_a_regular_file(tmp_path: Path, make, what) -> None:
    target = tmp_path / "report.xml"
    make(target)
    with pytest.raises(OSError) as info:
        replace(target, b"data", prefix=".report.")
    assert info.value.strerror == f"it is {what}, not a regular file"
    assert not target.is_file() and [p.name for p in tmp_path.iterdir()] == ["report.xml"]


def test_a_write_that_fails_leaves_the_old_file_and_no_temporary_one(tmp_path: Path, monkeypatch) -> None:
    target = tmp_path / "page.html"
    target.write_text("the old page")

    def full_disk(*args: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", full_disk)
    with pytest.raises(OSError):
        replace(target, b"the new page", prefix=".page.")
    assert target.read_text() == "the old page" and [p.name for p in tmp_path.iterdir()] == ["page.html"]


def test_a_staged_file_is_whole_on_the_disk_and_gone_after_its_block(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError), staged(tmp_path, b"finding", prefix=".finding-") as temp:
        assert temp.parent == tmp_path and temp.read_bytes() == b"finding"
        raise RuntimeError("the read-back check failed")
    assert list(tmp_path.iterdir()) == []


def test_a_device_is_refused_at_once_rather_than_read_without_end() -> None:
    with pytest.raises(FileError) as info:
        read_text("/dev/zero")
    assert str(info.value) == "/dev/zero: cannot read the file (it is a FIFO, socket or device, not a regular file)"


def test_a_file_past_the_cap_is_refused_in_one_line(tmp_path: Path) -> None:
    huge = tmp_path / "huge.toml"
    with open(huge, "wb") as f:
        f.truncate(MAX_FILE_BYTES + 1)  # sparse: no disk spent
    with pytest.raises(FileError) as info:
        read_text(huge)
    assert str(info.value) == f"{huge}: cannot read the file (larger than {MAX_FILE_BYTES >> 20} MiB)"
    huge.write_bytes(b"x" * 10)
    assert read_text(huge) == "x" * 10
