"""The real `infertop` binary on this machine, inside tmux: the overview shows
`localhost`, and `q` quits it."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid

import pytest

from tests.support.paths import REPO, infertop_bin
from tests.support.waiting import until

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


def _tmux(socket: str, *args: str) -> subprocess.CompletedProcess[str]:
    # a private server socket in the test's own directory: never touches the developer's
    # (or another test's) tmux, and leaves nothing behind in /tmp/tmux-UID
    return subprocess.run(["tmux", "-S", socket, *args], capture_output=True, text=True, timeout=30)


def _pane(socket: str, session: str) -> str:
    return _tmux(socket, "capture-pane", "-p", "-t", session).stdout


def test_real_binary_shows_localhost_and_quits(tmp_path) -> None:  # type: ignore[no-untyped-def]
    socket = str(tmp_path / f"tmux-{uuid.uuid4().hex[:8]}.sock")
    session = "smoke"
    exit_file = tmp_path / "exit-code"
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "TERM": "xterm-256color",
        "LANG": "C.UTF-8",
        "INFERTOP_STATE_DIR": str(tmp_path / ".infertop"),
        # every warning shown once: a library's (cryptography's under asyncssh) must still not
        # reach the terminal, before the first frame or after the last
        "PYTHONWARNINGS": "default",
    }
    # The shell records the exit status, so "it exited cleanly" is checked, not assumed.
    # COLUMNS/LINES (pytest's plugins export 80x24) would override the pane's real size.
    command = f"env -u COLUMNS -u LINES {infertop_bin()} ; echo $? > {exit_file}"
    args = ["new-session", "-d", "-s", session, "-x", "180", "-y", "40", "-c", str(REPO)]
    for key, value in env.items():
        args += ["-e", f"{key}={value}"]
    started = _tmux(socket, *args, command)
    assert started.returncode == 0, started.stderr
    try:
        until(
            lambda: "localhost" in _pane(socket, session), 60, "the overview to show localhost",
            every_s=0.25,
            detail=lambda: _tmux(socket, "display", "-p", "-t", session,
                                 "#{window_width}x#{window_height}").stdout.strip()
            + "\n" + _pane(socket, session),
        )
        screen = _pane(socket, session)
        assert "infertop" in screen and "NODE" in screen
        assert "Traceback" not in screen and "Warning" not in screen
        _tmux(socket, "send-keys", "-t", session, "q")
        until(exit_file.exists, 30, "infertop to exit on q", every_s=0.25,
              detail=lambda: _pane(socket, session))
        until(lambda: exit_file.read_text().strip() != "", 5, "its exit code", every_s=0.25)
        assert exit_file.read_text().strip() == "0"
        after = _pane(socket, session)
        assert "Warning" not in after and "warnings.warn" not in after, after
        # the monitor it started went on recording after q, until stopped
        stopped = subprocess.run([infertop_bin(), "stop"], capture_output=True, text=True, timeout=60,
                                 env={**os.environ, **env})
        assert stopped.returncode == 0, stopped.stderr
        assert "stopped the monitor" in stopped.stdout
    finally:
        _tmux(socket, "kill-server")
        subprocess.run([infertop_bin(), "stop"], capture_output=True, timeout=60, env={**os.environ, **env})
