"""The first frames of a fresh demo (issue 47 item 4), the real binary in tmux at 80x24:
before the first verdicts can exist the screen says "judging", never "all clear", and no
node reads "stale" before it is late (a first frame at 80x24 under load once said
"decode-09 stale 0s")."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from tests.support.paths import REPO, infertop_bin
from tests.support.waiting import until

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

# a node is late after stale_intervals (2) of the demo's 1 s interval
STALE_AGE = re.compile(r"stale (\d+)s")


def _tmux(socket: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["tmux", "-S", socket, *args], capture_output=True, text=True, timeout=30)


def test_the_first_frames_judge_before_they_clear(tmp_path: Path) -> None:
    socket = str(tmp_path / f"tmux-{uuid.uuid4().hex[:8]}.sock")
    session = "first"
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path), "TERM": "xterm-256color",
        "LANG": "C.UTF-8", "INFERTOP_STATE_DIR": str(tmp_path / ".infertop"),
    }
    args = ["new-session", "-d", "-s", session, "-x", "80", "-y", "24", "-c", str(REPO)]
    for key, value in env.items():
        args += ["-e", f"{key}={value}"]
    started = _tmux(socket, *args, f"env -u COLUMNS -u LINES {infertop_bin()} demo --nodes 16")
    assert started.returncode == 0, started.stderr
    screens: list[str] = []

    def pane() -> str:
        text = _tmux(socket, "capture-pane", "-p", "-t", session).stdout
        if "infertop ▸" in text:  # a frame drawn (before it: "waiting for the first samples…")
            screens.append(text)
        return text

    try:
        until(lambda: "infertop ▸" in pane(), 120, "the first frame", every_s=0.1)
        # every frame until the first verdict is on screen (the demo's trouble, held 10 s)
        until(lambda: re.search(r"\d+ verdicts?", pane()) is not None, 120, "the first verdicts",
              every_s=0.2, detail=lambda: screens[-1] if screens else "")
        for _ in range(10):  # and a few seconds past them
            pane()
            time.sleep(0.3)  # frames to sample, not a wait for an event
    finally:
        _tmux(socket, "send-keys", "-t", session, "q")
        until(lambda: "infertop" not in _tmux(socket, "capture-pane", "-p", "-t", session).stdout, 30,
              "the demo to quit", every_s=0.25, ignore=(subprocess.SubprocessError,))
        _tmux(socket, "kill-server")
    assert screens, "no frame captured"
    assert "judging" in screens[0], screens[0]
    for screen in screens:
        assert "all clear" not in screen, screen
        for age in STALE_AGE.findall(screen):
            assert int(age) >= 2, screen  # stale only once late
