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

from infertop.demo.pd_trouble import CONGESTED, DRIFTED
from infertop.demo.scenario import PORTS_DOWN, POWER_CAPPED_GPU, WAITING_GPUS, plan_cluster, trouble_nodes
from infertop.demo.ssh_node import STRAY_COMMAND, STRAY_GPU, STRAY_PID, STRAY_USER
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
    # the scenario's straggler runs slow because one rank's GPU is power-capped (a power
    # cap alone is no throttled verdict unless the layout asks: throttle_on_power_cap)
    expected[trouble["straggler"]] = ["straggler"]
    # a leftover process holds memory on one GPU; read over SSH, as no exporter carries it
    expected[trouble["stray_process"]] = ["stray-process"]
    # decode-05's engines run another KV block size (pd_trouble.py)
    drifted = next(p.name for p in plan_cluster(NODES) if (p.role, p.ordinal) == DRIFTED)
    congested = [p.name for p in plan_cluster(NODES) if (p.role, p.ordinal) in CONGESTED]
    expected[drifted] = ["config-drift"]
    # established verdicts; a condition still within its hold is reported as pending
    got = {name: sorted(v["kind"] for v in n["verdicts"] if not v["pending"]) for name, n in nodes.items()}
    # the scripted congested P→D pair (pd_trouble.py): congested on both ends, established
    # or (whether its hold falls inside this 10 s window is timing) still pending
    for name in congested:
        assert [v["kind"] for v in nodes[name]["verdicts"]] == ["congested"], name
        got[name] = []
    # the scripted acceptance collapse begins COLLAPSE_START_S in: whether this window
    # reaches it is timing (a loaded machine starts the demo slowly)
    collapsing = trouble.get("acceptance_collapse")
    if collapsing is not None and got.get(collapsing) == ["acceptance-drop"]:
        expected[collapsing] = ["acceptance-drop"]
    assert got == expected

    def detail(node: str, kind: str) -> str:
        return next(v["detail"] for v in nodes[node]["verdicts"] if v["kind"] == kind)

    link = detail(trouble["ports_down"], "link-starved")
    assert link.startswith("; ".join(f"{p} down" for p in PORTS_DOWN) + "; mlx5_0 carries 8"), link
    waiting = detail(trouble["ports_down"], "busy-waiting")
    # named with the ranks holding them (8 DP engines, one GPU each: engine k on GPU k)
    spinning = "; ".join(f"{trouble['ports_down']} engine {i} (GPU {i}): GPU {i} util 99 %" for i in WAITING_GPUS)
    assert waiting.replace(" but SM active 2 %", "").startswith(f"busy but waiting — {spinning}"), waiting
    assert nodes[trouble["ports_down"]]["idle_basis"] == "sm_active"
    straggler = detail(trouble["straggler"], "straggler")
    assert "% of the decode median" in straggler
    # the verdict names the slow rank (8 DP engines, one GPU each) …
    rank = f"engine {POWER_CAPPED_GPU} (GPU {POWER_CAPPED_GPU})"
    assert f"; slowest rank {trouble['straggler']} {rank} " in straggler, straggler
    # … and its evidence (key `e`) puts the power cap first, beside the pool's median
    evidence = next(v for v in nodes[trouble["straggler"]]["verdicts"] if v["kind"] == "straggler")["evidence"]
    # read off the slow rank's GPU (8 engines on 8 GPUs: engine 5 on GPU 5), named in each row
    assert evidence[0]["figure"] == f"GPU {POWER_CAPPED_GPU}: GPUs power-capped", evidence
    assert evidence[0]["value"] == 100 and evidence[0]["median"] == 0  # % of the GPUs in question
    power = next(e for e in evidence if e["figure"] == f"GPU {POWER_CAPPED_GPU}: lowest GPU power")
    assert power["value"] < 0.7 * power["median"]
    stray = detail(trouble["stray_process"], "stray-process")
    assert stray == f"not the engine — GPU {STRAY_GPU} held by pid {STRAY_PID} ({STRAY_USER}) {STRAY_COMMAND}: 18.0 GiB"
    assert nodes[trouble["stray_process"]]["sources"] == ["ssh"]
    idle = next(v for v in nodes[trouble["idle"]]["verdicts"] if not v["pending"])
    assert idle["usd_per_hour_at_stake"] == nodes[trouble["idle"]]["cost_per_hour_usd"] > 0
    assert idle["usd_per_hour_at_stake"] == round(idle["usd_per_hour_at_stake"], 2)  # to the cent
