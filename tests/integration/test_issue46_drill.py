"""Issue 46's "Done when", as an on-call engineer tries it: the real installed binary,
`infertop demo --scenario diagnosis` in tmux at 160x45 and at 80x24, keys only. Within
10 s of the first screen every one of the five troubles is on that screen on the right
node (a node row or a hunt-list row), its cause one key away (`e` on the node's row opens
evidence naming the GPU, port, rank or setting), and no line names a healthy node beside
a verdict."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from infertop.demo.diagnosis import DRIFT_NODE, NODES, RESTART_NODE, SLOW_NODE, STORM_NODE, WAITING_NODE
from tests.support.paths import REPO, infertop_bin
from tests.support.waiting import until

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

# node → the verdict on its line; the words its evidence (`e`) must show
TROUBLES = {
    STORM_NODE: ("congested", ("eth0 prio 3 pause rx", "xmit_wait", "KV transfer")),
    SLOW_NODE: ("straggler", ("engine 5 (GPU 5)", "GPU 5")),
    WAITING_NODE: ("busy-waiting", ("GPU 6", "GPU 7")),
    DRIFT_NODE: ("config-drift", ("block_size",)),
    RESTART_NODE: ("restarted", ("engine restarted",)),
}
HEALTHY = [n for n in NODES if n not in TROUBLES]
VERDICT_WORDS = ("congested", "straggler", "throttled", "busy-waiting", "config-drift", "restarted", "warning",
                 "critical", "idle", "link-starved")
FIRST_SCREEN_S = 10.0


def _tmux(socket: str, *args: str) -> subprocess.CompletedProcess[str]:
    # a private server socket: never the developer's (or another test's) tmux
    return subprocess.run(["tmux", "-S", socket, *args], capture_output=True, text=True, timeout=30)


def _pane(socket: str) -> str:
    return _tmux(socket, "capture-pane", "-p", "-t", "drill").stdout


def _pane_with(socket: str, text: str) -> str | None:
    screen = _pane(socket)
    return screen if text in screen else None


def _named(line: str, node: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(node)}(?![\w-])", line) is not None


def troubles_shown(screen: str) -> set[str]:
    """The trouble nodes whose verdict is on a line of their own on `screen`."""
    return {node for node, (verdict, _) in TROUBLES.items()
            if any(_named(line, node) and verdict in line for line in screen.splitlines())}


def evidence_box(screen: str) -> str:
    """The evidence modal's cells (its frame ╭ … ╯, found from its heading), without the
    overview around it."""
    lines = screen.splitlines()
    at = next(i for i, line in enumerate(lines) if " evidence: " in line)
    left = lines[at].rindex("│", 0, lines[at].index(" evidence: "))
    top = next(i for i in range(at, -1, -1) if lines[i][left:left + 1] == "╭")
    right = lines[top].find("╮", left) % (len(lines[top]) + 1)  # else to the screen's edge
    bottom = next(i for i in range(at, len(lines)) if lines[i][left:left + 1] == "╰")
    return "\n".join(line[left:right + 1] for line in lines[top:bottom + 1])


def healthy_named(screen: str) -> list[str]:
    """Lines that name a healthy node beside a verdict word."""
    return [line for line in screen.splitlines()
            if any(_named(line, node) for node in HEALTHY) and any(w in line for w in VERDICT_WORDS)]


@pytest.mark.parametrize("size", [(160, 45), (80, 24)], ids=["160x45", "80x24"])
def test_every_trouble_on_the_first_screen_and_its_cause_one_key_away(tmp_path: Path,
                                                                       size: tuple[int, int]) -> None:
    socket = str(tmp_path / f"tmux-{uuid.uuid4().hex[:8]}.sock")
    exit_file = tmp_path / "exit-code"
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path), "TERM": "xterm-256color",
           "LANG": "C.UTF-8", "INFERTOP_STATE_DIR": str(tmp_path / ".infertop")}
    command = f"env -u COLUMNS -u LINES {infertop_bin()} demo --scenario diagnosis; echo $? > {exit_file}"
    args = ["new-session", "-d", "-s", "drill", "-x", str(size[0]), "-y", str(size[1]), "-c", str(REPO)]
    for key, value in env.items():
        args += ["-e", f"{key}={value}"]
    started = _tmux(socket, *args, command)
    assert started.returncode == 0, started.stderr
    try:
        # the first screen: the overview with the drill's nodes on it
        until(lambda: "NODE" in _pane(socket) and _named(_pane(socket), "dec-0"), 120,
              "the overview's first screen", every_s=0.2, gave_up=exit_file.exists, detail=lambda: _pane(socket))
        first = time.monotonic()
        seen: dict[str, str] = {}

        def all_shown() -> bool:
            screen = _pane(socket)
            assert not healthy_named(screen), (healthy_named(screen), screen)
            seen["screen"] = screen
            return troubles_shown(screen) == set(TROUBLES)

        until(all_shown, FIRST_SCREEN_S, f"all five troubles on the first screen within {FIRST_SCREEN_S:g} s",
              every_s=0.2, detail=lambda: f"shown {sorted(troubles_shown(_pane(socket)))}\n{_pane(socket)}")
        took_s = time.monotonic() - first
        assert "Traceback" not in seen["screen"] and "Warning" not in seen["screen"]
        # keys only: the node table holds the cursor, rows in the layout's order
        cursor = 0
        for node in (RESTART_NODE, WAITING_NODE, SLOW_NODE, DRIFT_NODE, STORM_NODE):
            row = NODES.index(node)
            _tmux(socket, "send-keys", "-t", "drill", *(["Down"] * (row - cursor)))
            cursor = row
            _tmux(socket, "send-keys", "-t", "drill", "e")
            verdict, words = TROUBLES[node]
            heading = f"{verdict} evidence: {node}"
            screen = until(lambda heading=heading: _pane_with(socket, heading), 10,
                           f"{node}'s evidence on `e`", every_s=0.2, detail=lambda: _pane(socket))
            box = evidence_box(screen)
            flat = " ".join(box.split())
            assert all(word in flat for word in words), (node, words, screen)
            assert not any(_named(box, h) for h in HEALTHY), screen
            _tmux(socket, "send-keys", "-t", "drill", "Escape")
            until(lambda heading=heading: heading not in _pane(socket), 10, "the evidence to close",
                  every_s=0.2, detail=lambda: _pane(socket))
        _tmux(socket, "send-keys", "-t", "drill", "q")
        until(lambda: exit_file.exists() and exit_file.read_text().strip() != "", 30, "the demo to exit on q",
              every_s=0.25, detail=lambda: _pane(socket))
        assert exit_file.read_text().strip() == "0"
        print(f"{size[0]}x{size[1]}: all five troubles on screen {took_s:.1f} s after the first screen")
    finally:
        _tmux(socket, "kill-server")
