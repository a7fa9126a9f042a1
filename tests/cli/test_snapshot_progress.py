"""`infertop snapshot` while it collects and when nothing answers (issue 47, item 9): a
progress line on a terminal, nothing on a pipe, exit 1 with one line when no node could
be read at all. The real command against real HTTP (the demo's exporters) and closed ports."""

from __future__ import annotations

import json
import os
import pty
import select
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from tests.support.demo_server import serving_demo
from tests.support.paths import infertop_bin

EXIT_FAIL = 1


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _dead_layout(path: Path, nodes: int = 3) -> Path:
    text = '[cluster]\nname = "all-dead"\ninterval_s = 1.0\n\n[pricing]\ngpu_hour_usd = 1.0\n'
    for i in range(nodes):
        text += (f'\n[[nodes]]\nname = "dead-{i:02d}"\nrole = "decode"\ngpus = 8\n'
                 f'metrics = ["http://127.0.0.1:{_closed_port()}/metrics"]\n')
    path.write_text(text)
    return path


def test_every_node_unreachable_exits_1_with_one_line(tmp_path: Path) -> None:
    layout = _dead_layout(tmp_path / "dead.toml")
    for extra in ([], ["--json"]):
        proc = subprocess.run(
            [infertop_bin(), "snapshot", "--layout", str(layout), "--window", "2", *extra],
            capture_output=True, text=True, timeout=120,
        )
        assert proc.returncode == EXIT_FAIL, (proc.returncode, proc.stdout, proc.stderr)
        assert proc.stdout == ""  # no document of nothing
        lines = proc.stderr.splitlines()
        assert len(lines) == 1, proc.stderr
        assert lines[0].startswith("infertop: no node could be read in the window: 3 nodes, dead-0"), lines
        assert "Traceback" not in proc.stderr


def _run_with_terminal_stderr(args: list[str], timeout_s: float = 120.0) -> tuple[int, str, str]:
    """Run with stderr on a pseudo-terminal (stdout piped): the exit code, stdout, and
    everything the terminal received."""
    master, slave = pty.openpty()
    # stdout into a file, not a pipe: a JSON document past the pipe's 64 KiB would block the
    # command while this loop reads only the terminal (the test then waited out its 120 s)
    stdout_file = tempfile.TemporaryFile(mode="w+")
    proc = subprocess.Popen(args, stdout=stdout_file, stderr=slave, text=True)
    os.close(slave)
    seen = bytearray()
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(master, 4096)
                except OSError:  # the child closed the terminal (EIO)
                    break
                if not chunk:
                    break
                seen += chunk
            elif proc.poll() is not None:
                break
        proc.wait(timeout=30)
        stdout_file.seek(0)
        out = stdout_file.read()
    finally:
        os.close(master)
        stdout_file.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, out, seen.decode(errors="replace")


def test_progress_on_a_terminal_json_only_on_a_pipe(tmp_path: Path) -> None:
    layout = tmp_path / "demo.toml"
    with serving_demo(layout, "--nodes", "4"):
        args = [infertop_bin(), "snapshot", "--layout", str(layout), "--window", "3", "--json"]
        code, out, terminal = _run_with_terminal_stderr(args)
        piped = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert code == 0, terminal
    assert json.loads(out)["schema"] == "infertop.snapshot/1"
    # the line counts the window ("reading 4 nodes — 2 of 3 s") and is erased at the end
    assert "reading 4 nodes — " in terminal and " of 3 s" in terminal, terminal
    assert terminal.endswith("\r\x1b[K"), repr(terminal[-40:])
    # piped: stdout is the JSON document alone, stderr empty
    assert piped.returncode == 0, piped.stderr
    assert piped.stderr == ""
    assert json.loads(piped.stdout)["schema"] == "infertop.snapshot/1"
