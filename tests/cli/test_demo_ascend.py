"""`infertop demo --platform ascend` end to end: npu-exporter pages over real HTTP, the
scrape source, `infertop snapshot --json`, and the node with a broken NPU link flagged."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from infertop.demo.ascend import BROKEN_NPU, npu_exporter_page
from infertop.demo.pd_trouble import congested
from infertop.demo.scenario import SimCluster
from tests.support.demo_server import serving_demo
from tests.support.paths import infertop_bin


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    folder = tmp_path_factory.mktemp("ascend-demo")
    layout = folder / "demo.toml"
    with serving_demo(layout, "--platform", "ascend", "--nodes", "8"):
        # one snapshot is one tick: verdicts need no hold time to show in it
        text = layout.read_text() + "\n[thresholds]\nhold_s = 0\n"
        snap_layout = folder / "snap.toml"
        snap_layout.write_text(text)
        out = subprocess.run(
            [infertop_bin(), "snapshot", "--layout", str(snap_layout), "--json", "--window", "3"],
            capture_output=True, text=True, timeout=120, check=False,
        )
        assert out.returncode == 0, out.stderr
        yield json.loads(out.stdout)


def test_every_node_has_eight_npus(snapshot: dict[str, Any]) -> None:
    nodes = snapshot["nodes"]
    assert len(nodes) == 8
    for node in nodes:
        assert node["status"] == "ok", node["error"]
        assert [g["kind"] for g in node["gpus"]] == ["npu"] * 8
        assert node["gpus"][0]["name"] == "Ascend950-Ascend-V1"
        assert node["cost_per_hour_usd"] == pytest.approx(8 * 10.582, abs=0.005)  # money does not care (JSON: to the cent)


def test_broken_npu_link_flags_its_node_only(snapshot: dict[str, Any]) -> None:
    nodes = {n["name"]: n for n in snapshot["nodes"]}
    starved = {
        name for name, n in nodes.items()
        if any(v["kind"] == "link-starved" and not v["pending"] for v in n["verdicts"])
    }
    # the demo's scripted congested P→D link (pause frames on eth0) is link-starved by design,
    # on any platform; the broken NPU link must add decode-03 and no one else
    scripted = {name for name, node in SimCluster(8, started_at=0.0).nodes.items() if congested(node)}
    assert starved - scripted == {"decode-03"}
    (verdict,) = [v for v in nodes["decode-03"]["verdicts"] if v["kind"] == "link-starved"]
    assert f"NPU {BROKEN_NPU} port npu{BROKEN_NPU}-roce down" in verdict["detail"]
    port = next(p for p in nodes["decode-03"]["nics"] if p["name"] == f"npu{BROKEN_NPU}-roce")
    assert port["kind"] == "npu-roce" and port["state"] == "down" and port["accelerator_index"] == BROKEN_NPU
    assert port["errors_per_s"] == pytest.approx(40 * 1.15, rel=0.2)  # rx + tx + out-of-order
    healthy = next(p for p in nodes["decode-01"]["nics"] if p["name"] == "npu0-roce")
    assert healthy["state"] == "up" and healthy["speed_gbps"] == 400


def test_no_infiniband_on_an_ascend_host(snapshot: dict[str, Any]) -> None:
    for node in snapshot["nodes"]:
        assert not [p for p in node["nics"] if p["name"].startswith("mlx5_")]


def test_page_is_npu_exporter_text() -> None:
    cluster = SimCluster(8, started_at=1000.0)
    page = npu_exporter_page(cluster.nodes["decode-03"], 1060.0)
    assert "# TYPE npu_chip_info_link_status gauge" in page
    assert f'npu_chip_info_link_status{{container_name="",id="{BROKEN_NPU}",' in page
    assert "machine_npu_nums 8" in page
