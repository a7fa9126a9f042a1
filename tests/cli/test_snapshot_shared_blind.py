"""`infertop snapshot` (the real command) on 16 healthy nodes read through stock exporters
(dcgm-exporter 4.5.3-4.8.2's default counters, node_exporter 1.12.1; real HTTP on
loopback): what every node misses alike (clock-event reasons, ECC, NVLink errors) is one
cluster-level note naming the missing counters, and no node carries a verdict. A node whose
counters CSV lacks a line its peers have keeps its `blind` verdict, for that line only."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.support.infertop_cmd import run_infertop
from tests.support.stock_cluster import (
    STOCK_MISSING,
    TRIMMED_FIELD,
    cluster_pages,
    layout_toml,
    node_names,
    serve_pages,
    trimmed_csv,
)

NAMES = node_names(16)
SHARED_KINDS = ["clock_events", "ecc", "nvlink_errors"]
ODD = "decode-07"


def check_one_note(data: dict[str, Any]) -> dict[str, Any]:
    assert [n["status"] for n in data["nodes"]] == ["ok"] * len(NAMES), [n.get("error") for n in data["nodes"]]
    [spot] = data["cluster"]["shared_blind_spots"]
    assert spot["nodes"] == len(NAMES) and spot["roles"] == ["decode"] and spot["sources"] == ["scrape"]
    assert spot["kinds"] == SHARED_KINDS
    for field in STOCK_MISSING:
        assert field in spot["note"] and field in spot["fix"]
    assert "docs/dcgm-counters.csv" in spot["fix"]
    assert spot["note"].startswith(f"all {len(NAMES)} decode nodes")
    for node in data["nodes"]:
        shared = [g["kind"] for g in node["coverage"] if g.get("shared")]
        assert shared == SHARED_KINDS, node["name"]
    return spot


def test_a_stock_counters_cluster_is_one_note_and_an_odd_node_keeps_its_verdict(tmp_path: Path) -> None:
    fewer = {ODD: trimmed_csv(tmp_path)}
    with serve_pages(cluster_pages(NAMES)) as stock_url, serve_pages(cluster_pages(NAMES, fewer)) as odd_url:
        stock, odd = tmp_path / "stock.toml", tmp_path / "odd.toml"
        stock.write_text(layout_toml(stock_url, NAMES))
        odd.write_text(layout_toml(odd_url, NAMES))
        # a window past the hold time: a verdict would be established, not only pending
        window = ["--window", "4"]
        as_json, as_text, odd_json, gate = run_infertop(
            ["snapshot", "--layout", str(stock), *window, "--json"],
            ["snapshot", "--layout", str(stock), *window],
            ["snapshot", "--layout", str(odd), *window, "--json"],
            ["snapshot", "--layout", str(stock), *window, "--json", "--fail-on", "warning"],
            timeout_s=120.0,
        )
    for result in (as_json, as_text, odd_json):
        assert result.returncode == 0, result.stderr
    # unknown is never healthy: a gate that failed on 16 blind nodes fails on the one finding
    assert gate.returncode == 3, gate.stderr
    assert "infertop: 1 verdict(s) at warning or worse: cluster: blind on 16 nodes" in gate.stderr

    data = json.loads(as_json.stdout)
    spot = check_one_note(data)
    # no node verdict at all, not even a pending one (the snapshot reports those)
    assert {n["name"]: n["verdicts"] for n in data["nodes"] if n["verdicts"]} == {}
    assert data["cluster"]["blind_nodes"] == 0

    lines = as_text.stdout.splitlines()
    assert [ln for ln in lines if ln.startswith("unseen ")] == [f"unseen cluster: {spot['note']}"]
    for name in NAMES:
        row = next(ln for ln in lines if ln.startswith(name))
        assert row.rstrip().endswith("—"), row  # the VERDICTS column is empty

    data = json.loads(odd_json.stdout)
    check_one_note(data)
    verdicts = {n["name"]: n["verdicts"] for n in data["nodes"] if n["verdicts"]}
    assert list(verdicts) == [ODD]
    [blind] = verdicts[ODD]
    assert blind["kind"] == "blind" and not blind.get("pending")
    # only what it misses beyond its peers
    assert blind["detail"].startswith("NVLink unknown:") and TRIMMED_FIELD in blind["detail"]
    assert "ECC" not in blind["detail"] and "throttle" not in blind["detail"]
    assert data["cluster"]["blind_nodes"] == 1
