"""The one lock of the state directory (monitor/state.py), as the record and the monitor take it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from infertop.monitor.channel.paths import MonitorBusy, MonitorLock
from infertop.monitor.record.codec import RecordError
from infertop.monitor.record.store import lock_record
from infertop.monitor.state import LockBusy, StateLock


def _holder_text(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, text.encode(), 0)
    finally:
        os.close(fd)


@pytest.mark.parametrize(
    ("written", "named"),
    [
        ("4242 infertop record a.toml\n", "pid 4242 (infertop record a.toml)"),
        # the monitor lock's own form before there was one lock class
        ("pid 4242 (infertop record a.toml)\n", "pid 4242 (infertop record a.toml)"),
        ("4242 \x1b[31mred\x1b[0m\n", "pid 4242 (?[31mred?[0m)"),
        ("garbage\n", "another process"),
    ],
)
def test_a_second_holder_is_told_who_holds_it(tmp_path: Path, written: str, named: str) -> None:
    path = tmp_path / "x.lock"
    held = StateLock.hold(path, "first")
    try:
        _holder_text(path, written)
        with pytest.raises(LockBusy) as busy:
            StateLock.hold(path, "second")
        assert str(busy.value) == named
    finally:
        held.release()
    StateLock.hold(path, "third").release()  # released: free again


def test_record_and_monitor_take_the_same_lock_kind(tmp_path: Path) -> None:
    record = tmp_path / "c.sqlite"
    socket = tmp_path / "c.sock"
    writer = lock_record(record)
    monitor = MonitorLock.take(socket, "infertop record c.toml")
    try:
        assert isinstance(writer, StateLock) and isinstance(monitor, StateLock)
        with pytest.raises(RecordError, match=f"being written by pid {os.getpid()}"):
            lock_record(record)
        with pytest.raises(MonitorBusy, match=rf"pid {os.getpid()} \(infertop record c.toml\)"):
            MonitorLock.take(socket, "second")
    finally:
        writer.release()
        monitor.release()
