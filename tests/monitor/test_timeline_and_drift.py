"""Config drift and the one timeline, from vLLM 0.33 pages (tests/fixtures/vllm_info_page.py)
through the monitor into the snapshot JSON, the session record and the report."""

from __future__ import annotations

import csv
import datetime as dt
from pathlib import Path

from fixtures.vllm_info_page import CACHE_CONFIG, VllmInfoServer

from collectors.profiles import engine_sample_from_text
from collectors.sample import NodeSample
from infertop.cli.main import main
from layouts import load_layout
from monitor.evaluation.timeline import RESTART
from monitor.monitor import Monitor
from monitor.record.store import Recorder, Recording
from monitor.snapshot import Snapshot

START = dt.datetime(2026, 11, 30, 12, tzinfo=dt.UTC).timestamp()
STEP_S = 5.0
NODES = ("d1", "d2", "d3", "d4")
DRIFTED, RESTARTED, RESTART_TICK = "d3", "d2", 6

LAYOUT = """
[cluster]
name = "drift"
interval_s = 5
window_s = 15
[session]
reservation_start = "2026-11-30T12:00:00Z"
[pricing]
gpu_hour_usd = 2.0
[thresholds]
hold_s = 10
clear_s = 10
""" + "".join(
    f'[[nodes]]\nname = "{n}"\nrole = "decode"\ngpus = 8\n'
    f'engine = {{ url = "http://127.0.0.1:1/metrics", profile = "vllm" }}\n'
    for n in NODES
)


def servers() -> dict[str, VllmInfoServer]:
    out = {n: VllmInfoServer(engines=2, seed=i) for i, n in enumerate(NODES)}
    out[DRIFTED].settings["block_size"] = "32"
    return out


def run_session(tmp_path: Path, ticks: int = 14) -> tuple[Path, list[Snapshot], float]:
    layout_file = tmp_path / "layout.toml"
    layout_file.write_text(LAYOUT)
    layout = load_layout(layout_file)
    recorder = Recorder.open(layout, tmp_path / "rec.sqlite", now=START)
    monitor = Monitor(layout, sources=[], clock=lambda: START, recorder=recorder)
    emit = monitor.fleet._emit  # the path every source's samples take
    pages = servers()
    snaps = []
    restart_at = 0.0
    for i in range(ticks):
        now = START + i * STEP_S
        for name, server in pages.items():
            if name == RESTARTED and i == RESTART_TICK:
                server.restart()
                restart_at = now
            server.advance(STEP_S)
            emit(NodeSample(node=name, source="scrape", taken_at=now,
                            engine=engine_sample_from_text(server.page(), "vllm")))
        snaps.append(monitor.tick(now))
    recorder.close()
    return recorder.path, snaps, restart_at


def restarts(events: list) -> list:  # type: ignore[type-arg]
    return [e for e in events if (e["kind"] if isinstance(e, dict) else e.kind) == RESTART]


def test_the_drifted_node_is_named_with_the_setting_and_both_values(tmp_path: Path) -> None:
    _, snaps, _ = run_session(tmp_path)
    last = snaps[-1]
    by_name = {n.name: n for n in last.nodes}
    drift = by_name[DRIFTED].config_drift
    assert [(d.setting, d.value, d.pool_value, d.pool_agreeing, d.pool_reporting) for d in drift] == [
        ("cache.block_size", "32", CACHE_CONFIG["block_size"], 3, 4)
    ]
    verdicts = [v for v in by_name[DRIFTED].verdicts if v.kind == "config-drift"]
    assert len(verdicts) == 1
    assert "cache.block_size 32, pool 64" in verdicts[0].detail
    assert all(not by_name[n].config_drift for n in NODES if n != DRIFTED)
    # the onset of that verdict is on the timeline
    onsets = [e for e in last.timeline
              if e.kind == "verdict-onset" and e.node == DRIFTED and e.detail.startswith("config-drift")]
    assert len(onsets) == 1


def test_the_restart_is_once_on_the_timeline_at_its_time_in_json_record_and_report(tmp_path: Path) -> None:
    path, snaps, restart_at = run_session(tmp_path)
    last = snaps[-1]
    found = restarts(last.timeline)
    assert [(e.node, e.at) for e in found] == [(RESTARTED, restart_at)]
    assert "fell" in found[0].detail
    # before the restart, nothing
    assert not restarts(snaps[RESTART_TICK - 1].timeline)
    # the JSON: ISO time
    in_json = restarts(last.to_json_dict()["timeline"])  # type: ignore[arg-type]
    assert [(e["node"], e["at"]) for e in in_json] == [
        (RESTARTED, dt.datetime.fromtimestamp(restart_at, dt.UTC).isoformat())
    ]
    # the record: the last tick's snapshot read back
    rec = Recording.load(path)
    back = rec.snapshot(rec.ticks[-1].id)
    assert back is not None
    assert [(e.node, e.at) for e in restarts(back.timeline)] == [(RESTARTED, restart_at)]
    # the report: once in timeline.csv and in report.md
    out = tmp_path / "out"
    assert main(["report", str(path), "--out", str(out)]) == 0
    with (out / "timeline.csv").open() as fh:
        rows = [r for r in csv.DictReader(fh) if r["kind"] == RESTART]
    assert [(r["node"], r["at_utc"]) for r in rows] == [
        (RESTARTED, dt.datetime.fromtimestamp(restart_at, dt.UTC).isoformat())
    ]
    md = (out / "report.md").read_text()
    when = dt.datetime.fromtimestamp(restart_at, dt.UTC).strftime("%Y-%m-%d %H:%M:%S")
    assert md.count(f"| {when} | restart | {RESTARTED} |") == 1
    assert "| phase" in md or "phase run" in md
