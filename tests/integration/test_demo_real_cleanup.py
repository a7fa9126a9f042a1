"""`make demo-real` stops everything it started (issue 45): its monitor kept polling dead
endpoints and growing a record after `q`. Run for real in tmux (`scripts/demo_real.py`
with its stand-in engine: what it starts and stops is the same, vLLM aside), then ended
by `q`, by Ctrl+C as a terminal sends it (SIGINT to its process group), and by its
terminal closing (SIGHUP); afterwards no process of that run is left."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.support.paths import REPO
from tests.support.waiting import until

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
MARK = "INFERTOP_DEMO_REAL_RUN"


def _tmux(socket: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["tmux", "-S", socket, *args], capture_output=True, text=True, timeout=30)


def left_of_run(run: str) -> list[str]:
    """The processes whose environment carries this run's mark: all it started inherit it."""
    left = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes()
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if f"{MARK}={run}".encode() in environ.split(b"\0"):
            words = cmdline.replace(b"\0", b" ").decode(errors="replace")
            left.append(f"{pid}: {words[:160]}")
    return left


@pytest.mark.parametrize("ending", ["q", "ctrl-c", "terminal-closed"])
def test_demo_real_leaves_nothing_running(tmp_path: Path, ending: str) -> None:
    socket = str(tmp_path / f"tmux-{uuid.uuid4().hex[:8]}.sock")
    session, run = "demo-real", uuid.uuid4().hex
    exit_file = tmp_path / "exit-code"
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path),
        "TERM": "xterm-256color", "LANG": "C.UTF-8",
        "INFERTOP_STATE_DIR": str(tmp_path / ".infertop"), MARK: run,
    }
    command = (f"env -u COLUMNS -u LINES {sys.executable} scripts/demo_real.py --stand-in --nodes 2; "
               f"echo $? > {exit_file}")
    args = ["new-session", "-d", "-s", session, "-x", "180", "-y", "45", "-c", str(REPO)]
    for key, value in env.items():
        args += ["-e", f"{key}={value}"]
    started = _tmux(socket, *args, command)
    assert started.returncode == 0, started.stderr

    def pane() -> str:
        return _tmux(socket, "capture-pane", "-p", "-t", session).stdout

    try:
        until(lambda: "real-vllm" in pane(), 180, "the TUI to show the real engine's nodes",
              every_s=0.5, detail=pane)
        running = left_of_run(run)
        # the stand-in engine, the simulated cluster, the monitor, the TUI, the script
        assert any(" record " in p for p in running), running
        assert len(running) >= 5, running
        if ending == "q":
            _tmux(socket, "send-keys", "-t", session, "q")
        elif ending == "ctrl-c":
            pane_pid = int(_tmux(socket, "display", "-p", "-t", session, "#{pane_pid}").stdout)
            os.killpg(pane_pid, signal.SIGINT)
        else:
            _tmux(socket, "kill-session", "-t", session)
        until(lambda: not left_of_run(run), 60, "every process of the run to end", every_s=0.5,
              detail=lambda: "\n".join(left_of_run(run)) + "\n" + pane())
        if ending != "terminal-closed":
            until(lambda: exit_file.exists() and exit_file.read_text().strip(), 10, "its exit code")
            assert exit_file.read_text().strip() in ("0", "130"), pane()
            assert "Traceback" not in pane()
        # nothing recorded: no session record grows after it
        assert not list((tmp_path / ".infertop").rglob("*.sqlite"))
    finally:
        _tmux(socket, "kill-server")
        for line in left_of_run(run):  # a failed run's leftovers: ended here, by their pid
            os.kill(int(line.split(":")[0]), signal.SIGKILL)
