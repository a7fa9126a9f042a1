"""End to end: the demo's scripted trouble yields exactly the right verdicts on exactly the
right nodes, and every healthy node stays clean.

The demo serves its simulated exporters over real HTTP in a subprocess (`--serve-only`);
the real `infertop snapshot --json` reads them through the layout the demo wrote, with
short hold times appended, over a window longer than those hold times.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from infertop.demo.scenario import PORTS_DOWN, THROTTLED_GPU, WAITING_GPUS, trouble_nodes
from tests.support.demo_server import serving_demo
from tests.support.paths import infertop_bin

NODES = 16
SHORT_HOLDS = "\n[thresholds]\nhold_s = 3\nclear_s = 3\nidle_hold_s = 3\n"


def test_demo_trouble_gives_exactly_the_right_verdicts(tmp_path: Path) -> None:
    layout = tmp_path / "demo.toml"
    with serving_demo(layout, "--nodes", str(NODES)):
        short = tmp_path / "short-holds.toml"
        short.write_text(layout.read_text() + SHORT_HOLDS)
        proc = subprocess.run(
            [infertop_bin(), "snapshot", "--layout", str(short), "--window", "10", "--json"],
            capture_output=True, text=True, timeout=120,
        )
        assert proc.returncode == 0, proc.stderr
        snapshot = json.loads(proc.stdout)

    nodes = {n["name"]: n for n in snapshot["nodes"]}
    assert len(nodes) == NODES and all(n["status"] == "ok" for n in nodes.values()), [
        (n["name"], n["status"], n["error"]) for n in nodes.values() if n["status"] != "ok"
    ]
    trouble = trouble_nodes(NODES)
    expected: dict[str, list[str]] = {name: [] for name in nodes}
    # …whose GPUs 6–7 spin in the all-to-all, starved: busy but waiting (issue 35)
    expected[trouble["ports_down"]] = ["busy-waiting", "link-starved"]
    expected[trouble["idle"]] = ["idle"]
    # the scenario's straggler runs slow because one of its GPUs is thermally throttled
    expected[trouble["straggler"]] = ["straggler", "throttled"]
    # established verdicts; a condition still within its hold is reported as pending
    got = {name: sorted(v["kind"] for v in n["verdicts"] if not v["pending"]) for name, n in nodes.items()}
    assert got == expected

    def detail(node: str, kind: str) -> str:
        return next(v["detail"] for v in nodes[node]["verdicts"] if v["kind"] == kind)

    link = detail(trouble["ports_down"], "link-starved")
    assert link.startswith("; ".join(f"{p} down" for p in PORTS_DOWN) + "; mlx5_0 carries 8"), link
    assert detail(trouble["straggler"], "throttled").startswith(f"GPU {THROTTLED_GPU} ")
    waiting = detail(trouble["ports_down"], "busy-waiting")
    assert waiting.startswith(f"busy but waiting — GPUs {','.join(map(str, WAITING_GPUS))} util 99 %"), waiting
    assert nodes[trouble["ports_down"]]["idle_basis"] == "sm_active"
    assert "% of the decode median" in detail(trouble["straggler"], "straggler")
    idle = next(v for v in nodes[trouble["idle"]]["verdicts"] if not v["pending"])
    assert idle["usd_per_hour_at_stake"] == nodes[trouble["idle"]]["cost_per_hour_usd"] > 0
    assert idle["usd_per_hour_at_stake"] == round(idle["usd_per_hour_at_stake"], 2)  # to the cent
