"""`infertop snapshot` for scripts and short windows (issue 18, "Headless").

The demo serves its simulated exporters over real HTTP in a subprocess; the real
`infertop snapshot` reads them. A window shorter than the hold times (default 10 s,
idle 30 s) used to print no verdict at all: conditions seen but not yet held are now
reported as pending with the time held. `--fail-on` gives scripts an exit code; the
public JSON has ISO times, money to the cent and whole counts.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
from pathlib import Path

from infertop.demo.scenario import trouble_nodes
from tests.support.demo_server import serving_demo
from tests.support.paths import infertop_bin

NODES = 6
EXIT_VERDICT = 3


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _dead_node(port: int) -> str:
    return (
        "\n[[nodes]]\nname = \"dead-01\"\nrole = \"decode\"\ngpus = 8\n"
        f"metrics = [\"http://127.0.0.1:{port}/metrics\"]\n"
    )


def _snapshot(layout: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [infertop_bin(), "snapshot", "--layout", str(layout), "--window", "3", *args],
        capture_output=True, text=True, timeout=120,
    )


def test_short_window_reports_pending_verdicts_iso_times_and_cents(tmp_path: Path) -> None:
    layout = tmp_path / "demo.toml"
    with serving_demo(layout, "--nodes", str(NODES)):
        proc = _snapshot(layout, "--json")
    assert proc.returncode == 0, proc.stderr
    snap = json.loads(proc.stdout)
    nodes = {n["name"]: n for n in snap["nodes"]}
    idle_node = trouble_nodes(NODES)["idle"]
    idle = [v for v in nodes[idle_node]["verdicts"] if v["kind"] == "idle"]
    # the idle hold is 30 s and the window 3 s: seen, held a few seconds, not established
    assert idle and idle[0]["pending"] is True, nodes[idle_node]["verdicts"]
    assert 0 <= idle[0]["held_s"] < 30
    # times are ISO 8601 like taken_at, never epoch seconds
    assert isinstance(idle[0]["since"], str) and re.match(r"\d{4}-\d\d-\d\dT", idle[0]["since"])
    # money to the cent, counts whole
    session = snap["session"]
    for key, value in session.items():
        if key.endswith("_usd") and isinstance(value, float):
            assert round(value, 2) == value, (key, value)
    for key in ("accepted_tokens", "requests_finished", "prompt_tokens"):
        assert session[key] is None or isinstance(session[key], int), (key, session[key])
    # the requests running and waiting, a node's and a pool's (a newcomer read 5564.0)
    for where in [snap["cluster"]["total"], *(n["engine"] for n in snap["nodes"] if n["engine"])]:
        for key in ("requests_running", "requests_waiting"):
            assert where[key] is None or isinstance(where[key], int), (key, where[key])
    cost = snap["cluster"]["total"]["cost_per_hour_usd"]
    assert round(cost, 2) == cost


def test_text_has_links_column_pending_marks_and_unknown_gpus(tmp_path: Path) -> None:
    layout = tmp_path / "demo.toml"
    with serving_demo(layout, "--nodes", str(NODES)):
        with_dead = tmp_path / "with-dead.toml"
        with_dead.write_text(layout.read_text() + _dead_node(_closed_port()))
        proc = _snapshot(with_dead)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    header = lines[0].split()
    assert "LINKS" in header, lines[0]
    dead = next(line for line in lines if line.startswith("dead-01"))
    # the layout says 8 GPUs, none was seen: unknown, not 0
    assert dead.split()[3] == "—", dead
    idle_node = trouble_nodes(NODES)["idle"]
    idle_row = next(line for line in lines if line.startswith(idle_node))
    assert "idle (pending" in idle_row, idle_row


def test_fail_on_exits_3_for_a_critical_node_and_0_when_clean(tmp_path: Path) -> None:
    layout = tmp_path / "demo.toml"
    with serving_demo(layout, "--nodes", str(NODES)):
        with_dead = tmp_path / "with-dead.toml"
        with_dead.write_text(layout.read_text() + _dead_node(_closed_port()))
        failing = _snapshot(with_dead, "--fail-on", "critical")
        # the demo's own nodes: only pending conditions in a 3 s window, which do not count
        clean = _snapshot(layout, "--fail-on", "warning", "--json")
    assert failing.returncode == EXIT_VERDICT, (failing.returncode, failing.stderr)
    assert "dead-01: error" in failing.stderr, failing.stderr
    assert clean.returncode == 0, clean.stderr
    verdicts = [v for n in json.loads(clean.stdout)["nodes"] for v in n["verdicts"]]
    assert verdicts and all(v["pending"] for v in verdicts), verdicts


def test_fail_on_rejects_an_unknown_level(tmp_path: Path) -> None:
    layout = tmp_path / "l.toml"
    layout.write_text('[[nodes]]\nname = "a"\nrole = "decode"\n')
    proc = _snapshot(layout, "--fail-on", "bogus")
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and "--fail-on" in proc.stderr
