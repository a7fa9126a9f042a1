"""The monitor in a process of its own, with real processes: `infertop record` serving its
socket, TUIs (in pseudo-terminals) and SocketFeed viewers attaching and being killed,
`infertop phase`, `ps`, `stop`, a SIGKILLed monitor's stale socket, another user refused.
The cluster is the demo's, served by `infertop demo --serve-only`."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import os
import pty
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from infertop.layouts import load_layout
from infertop.monitor.channel.client import Connection, MonitorUnavailable, SocketFeed
from infertop.monitor.channel.paths import socket_path
from infertop.monitor.channel.protocol import Info
from infertop.monitor.snapshot import Snapshot
from tests.support.demo_server import serving_demo
from tests.support.paths import REPO, is_root
from tests.support.process_output import OutputReader
from tests.support.waiting import until, until_async

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def demo_layout(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    layout = tmp_path_factory.mktemp("cluster") / "demo.toml"
    with serving_demo(layout, "--nodes", "4"):
        yield layout


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    where = tmp_path / "state"
    monkeypatch.setenv("INFERTOP_STATE_DIR", str(where))
    return where


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1", "TERM": "xterm-256color",
            "COLUMNS": "160", "LINES": "45"}


def infertop(*args: str, timeout_s: float = 60.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "infertop", *args], capture_output=True, text=True,
                          env=env(), stdin=subprocess.DEVNULL, timeout=timeout_s)


def wait_for_monitor(layout: Path, proc: subprocess.Popen[str] | None = None, timeout_s: float = 60.0) -> Info:
    path = socket_path(load_layout(layout))

    def info() -> Info:
        with Connection(path, timeout_s=2.0) as conn:
            return conn.info

    return until(info, timeout_s, "the monitor to answer", every_s=0.1, ignore=(MonitorUnavailable,),
                 gave_up=lambda: proc is not None and proc.poll() is not None)


@contextlib.contextmanager
def recording(layout: Path, *args: str) -> Iterator[subprocess.Popen[str]]:
    """`infertop record` on the layout, serving its socket until the block ends."""
    proc = subprocess.Popen([sys.executable, "-m", "infertop", "record", "--layout", str(layout), "--quiet", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env(),
                            stdin=subprocess.DEVNULL)
    try:
        wait_for_monitor(layout, proc)
        yield proc
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


class Terminal:
    """`python -m infertop ARGS` in a pseudo-terminal, its screen output collected."""

    def __init__(self, *args: str):
        master, slave = pty.openpty()
        self.proc = subprocess.Popen([sys.executable, "-m", "infertop", *args], stdin=slave, stdout=slave,
                                     stderr=slave, env=env(), start_new_session=True)
        os.close(slave)
        self._fd = master
        self._reader = OutputReader(self.proc, master)

    @property
    def output(self) -> bytes:
        return self._reader.output

    def wait_for(self, text: bytes, timeout_s: float = 60.0) -> None:
        self._reader.wait_for(text, timeout_s)

    def press(self, keys: bytes) -> None:
        os.write(self._fd, keys)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._reader.join(5)
        with contextlib.suppress(OSError):
            os.close(self._fd)


async def frames(layout: Path, count: int, timeout_s: float = 20.0) -> list[Snapshot]:
    """`count` frames through a real SocketFeed on the layout's monitor."""
    got: list[Snapshot] = []
    feed = SocketFeed(load_layout(layout), socket_path(load_layout(layout)))
    await feed.connect(got.append)
    try:
        await until_async(lambda: len(got) >= count, timeout_s, f"{count} frames")
    finally:
        await feed.stop()
    return got


def spend_in_record(record: str, taken_at: str) -> float:
    """The record's spend at the tick `taken_at` (its row is committed by the record's own
    writer thread, a moment after the frame went out: waited for)."""
    at = dt.datetime.fromisoformat(taken_at).timestamp()

    def row() -> tuple[float] | None:
        with contextlib.closing(sqlite3.connect(record)) as conn:
            found: tuple[float] | None = conn.execute(
                "SELECT spend_usd FROM ticks WHERE abs(at - ?) < 1e-3", (at,)).fetchone()
            return found

    return float(until(row, 5.0, f"the tick at {taken_at} in {record}", every_s=0.1)[0])


def test_a_tui_attaches_to_a_running_record_and_a_killed_one_leaves_it_recording(
    demo_layout: Path, state: Path
) -> None:
    with recording(demo_layout) as monitor:
        first = Terminal("attach", "--layout", str(demo_layout))
        try:
            first.wait_for(b"decode-01")  # the node table is on screen, from the monitor
            info = wait_for_monitor(demo_layout)
            assert info.pid == monitor.pid and info.viewers == 1
            first.kill()  # SIGKILL: no goodbye
        finally:
            first.kill()
        # the monitor sees its viewer gone, and the record goes on
        info = until(lambda: wait_for_monitor(demo_layout).viewers == 0 and wait_for_monitor(demo_layout), 30,
                     "the monitor to count no viewer", every_s=0.1)
        assert monitor.poll() is None
        assert info.viewers == 0
        assert info.record is not None
        # a new viewer sees the same session: its frames are the ledger the record holds
        got = asyncio.run(frames(demo_layout, 2))
        last = got[-1]
        assert last.session.record_path == info.record
        assert last.session.spend_usd == pytest.approx(spend_in_record(info.record, last.taken_at), abs=1e-6)
        second = Terminal("attach", "--layout", str(demo_layout))
        try:
            second.wait_for(b"decode-01")
            second.press(b"q")
            assert second.proc.wait(10) == 0
            second._reader.join(5)  # its last words through the pseudo-terminal, to the end
        finally:
            second.kill()
        assert b"goes on" in second.output and b"infertop stop --layout" in second.output
        assert monitor.poll() is None


def test_the_tui_starts_a_monitor_that_outlives_it(demo_layout: Path, state: Path) -> None:
    assert infertop("attach", "--layout", str(demo_layout)).returncode == 1  # none runs yet
    tui = Terminal("--layout", str(demo_layout))
    try:
        tui.wait_for(b"decode-01")
        info = wait_for_monitor(demo_layout)
        assert info.pid != tui.proc.pid
        tui.kill()
        # the monitor sees its viewer gone (and goes on)
        after = until(lambda: wait_for_monitor(demo_layout).viewers == 0 and wait_for_monitor(demo_layout), 30,
                      "the monitor to count no viewer", every_s=0.1)
        assert after.pid == info.pid  # the TUI's death did not stop its monitor
        listed = infertop("ps")
        assert listed.returncode == 0
        assert str(info.pid) in listed.stdout and str(demo_layout) in listed.stdout
        assert "monitor.log" in " ".join(p.name for p in state.iterdir())
    finally:
        tui.kill()
        stopped = infertop("stop", "--layout", str(demo_layout))
    assert stopped.returncode == 0, stopped.stderr
    assert f"stopped the monitor (pid {info.pid})" in stopped.stdout
    assert info.record is not None
    with contextlib.closing(sqlite3.connect(info.record)) as conn:
        assert conn.execute("SELECT value FROM meta WHERE key = 'ended_at'").fetchone() is not None
    assert not socket_path(load_layout(demo_layout)).exists()
    assert "no monitors running" in infertop("ps").stdout


def test_two_viewers_see_the_same_phase_after_a_mark(demo_layout: Path, state: Path) -> None:
    async def two_viewers() -> tuple[list[Snapshot], list[Snapshot]]:
        layout = load_layout(demo_layout)
        a: list[Snapshot] = []
        b: list[Snapshot] = []
        feed_a, feed_b = SocketFeed(layout, socket_path(layout)), SocketFeed(layout, socket_path(layout))
        await feed_a.connect(a.append)
        await feed_b.connect(b.append)
        try:
            feed_a.mark_phase("warmup")  # from one viewer
            await until_async(lambda: a and b and a[-1].session.phase == b[-1].session.phase == "warmup", 20,
                              "both viewers in phase warmup")
            marked = await asyncio.to_thread(infertop, "phase", "load", "--layout", str(demo_layout))
            assert marked.returncode == 0, marked.stderr
            assert "marked by the running monitor" in marked.stdout
            await until_async(lambda: a[-1].session.phase == b[-1].session.phase == "load", 20,
                              "both viewers in phase load")
        finally:
            await feed_a.stop()
            await feed_b.stop()
        return a, b

    with recording(demo_layout):
        tui = Terminal("attach", "--layout", str(demo_layout))
        try:
            tui.wait_for(b"decode-01")
            a, b = asyncio.run(two_viewers())
            assert b[-1].session.phase == "load"
            tui.wait_for(b"phase load")  # the third viewer, the TUI, too
        finally:
            tui.kill()
    phases = {p.phase for p in a[-1].session.spend_by_phase}
    assert {"warmup", "load"} <= phases


def test_a_stale_socket_after_a_killed_monitor_is_replaced(demo_layout: Path, state: Path) -> None:
    with recording(demo_layout) as first:
        before = asyncio.run(frames(demo_layout, 1))[-1]
        first.kill()
        first.wait()
    sock = socket_path(load_layout(demo_layout))
    assert sock.exists()  # left behind by the SIGKILL
    attach = infertop("attach", "--layout", str(demo_layout))
    assert attach.returncode == 1 and "no monitor runs" in attach.stderr
    assert "stale" in infertop("ps").stdout
    with pytest.raises(MonitorUnavailable) as caught:
        Connection(sock)
    assert caught.value.stale
    with recording(demo_layout) as second:
        info = wait_for_monitor(demo_layout)
        assert info.pid == second.pid
        after = asyncio.run(frames(demo_layout, 1))[-1]
        assert after.session.started_at == before.session.started_at  # the session resumed
        assert after.session.spend_usd >= before.session.spend_usd
    assert "replaced the stale socket" in second.stderr.read()  # type: ignore[union-attr]


NOBODY_CLIENT = """
import socket, sys
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(sys.argv[1])
except OSError as exc:
    print("connect failed:", type(exc).__name__)
    sys.exit(0)
s.settimeout(10)
data = b""
while True:
    chunk = s.recv(65536)
    if not chunk:
        break
    data += chunk
print("received:", data.decode(errors="replace").strip())
"""


def as_nobody(path: Path) -> str:
    import pwd

    nobody = pwd.getpwnam("nobody")

    def drop() -> None:
        os.setgid(nobody.pw_gid)
        os.setuid(nobody.pw_uid)

    out = subprocess.run(["/usr/bin/python3", "-c", NOBODY_CLIENT, str(path)], capture_output=True, text=True,
                         timeout=30, preexec_fn=drop, cwd="/")
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


@pytest.mark.hostile
@pytest.mark.skipif(not is_root(), reason="needs root to run a client as another user")
def test_another_users_connection_is_refused(demo_layout: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if not Path("/usr/bin/python3").exists():
        pytest.skip("no system python for the other user")
    base = Path(tempfile.mkdtemp(prefix="infertop-peer-"))
    try:
        base.chmod(0o755)  # the other user may come this far, not into the state directory
        monkeypatch.setenv("INFERTOP_STATE_DIR", str(base / "state"))
        with recording(demo_layout):
            sock = socket_path(load_layout(demo_layout))
            assert (base / "state").stat().st_mode & 0o777 == 0o700
            assert sock.stat().st_mode & 0o777 == 0o600
            # the permissions alone keep the other user out
            assert as_nobody(sock) == "connect failed: PermissionError"
            # and with them opened up (a careless chmod), the monitor checks who connects
            (base / "state").chmod(0o711)
            sock.chmod(0o666)
            said = as_nobody(sock)
            assert said.startswith("received:") and "another user" in said, said
            assert "snapshot" not in said and '"pid"' not in said  # nothing about the session
            assert isinstance(wait_for_monitor(demo_layout), Info)  # and it serves its own user on
    finally:
        import shutil

        shutil.rmtree(base, ignore_errors=True)


def test_stop_and_attach_without_a_monitor_say_so(demo_layout: Path, state: Path) -> None:
    stopped = infertop("stop", "--layout", str(demo_layout))
    assert stopped.returncode == 1 and "no monitor is running" in stopped.stderr
    assert len(stopped.stderr.strip().splitlines()) == 1
    with recording(demo_layout, "--duration", "600") as monitor:
        second = infertop("record", "--layout", str(demo_layout), "--record", str(state / "other.sqlite"))
        assert second.returncode == 2
        assert f"a monitor already runs for this layout: pid {monitor.pid}" in second.stderr
        assert "attach or stop it" in second.stderr
        stopped = infertop("stop", "--layout", str(demo_layout))
        assert stopped.returncode == 0, stopped.stderr
        assert monitor.wait(15) == 0


@pytest.mark.parametrize("how", ["q", "SIGKILL"])
def test_the_demo_is_three_processes_that_end_with_the_viewer(state: Path, how: str) -> None:
    import psutil

    tui = Terminal("demo", "--nodes", "4")
    try:
        tui.wait_for(b"decode-01")
        children = psutil.Process(tui.proc.pid).children()
        commands = [" ".join(child.cmdline()) for child in children]
        assert len(children) == 2, commands
        assert any("demo --serve-only" in c for c in commands), commands  # the served cluster
        assert any("record --quiet --no-record" in c for c in commands), commands  # the monitor
        if how == "q":
            tui.press(b"q")
            assert tui.proc.wait(15) == 0
        else:
            tui.proc.kill()
        _gone, alive = psutil.wait_procs(children, timeout=10)
        assert not alive, [" ".join(p.cmdline()) for p in alive]
    finally:
        tui.kill()
    if how == "q":  # a layout of this run only: nothing of its monitor stays in the state directory
        assert not list(state.glob("*.monitor.*")) and not list(state.glob("*.sock"))


def test_a_monitor_that_cannot_start_is_reported_by_the_tui(demo_layout: Path, state: Path) -> None:
    run = infertop("--layout", str(demo_layout), "--record", "/proc/no-such/x.sqlite")
    assert run.returncode == 2, run.stderr
    last = run.stderr.strip().splitlines()[-1]
    assert last.startswith("infertop: the monitor did not start (log ")
    assert "/proc/no-such: cannot create the state directory" in last
    assert "Traceback" not in run.stderr
