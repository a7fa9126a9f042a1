"""Config drift and the one timeline, from vLLM 0.33 pages (tests/support/vllm_info_page.py)
through the monitor into the snapshot JSON, the session record and the report."""

from __future__ import annotations

import csv
import datetime as dt
from pathlib import Path

from infertop.cli.main import main
from infertop.monitor.evaluation.timeline import RESTART
from infertop.monitor.record.recording import Recording
from tests.support.timeline_session import DRIFTED, NODES, RESTART_TICK, RESTARTED, run_session
from tests.support.vllm_info_page import CACHE_CONFIG


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


def test_an_old_record_without_timeline_still_replays_and_reports(tmp_path: Path) -> None:
    """A record written before the timeline, settings and the P→D path existed: its
    snapshots lack those fields. It replays, and its report's timeline is the phase
    changes its tick rows keep."""
    import json
    import sqlite3
    import zlib

    from infertop.monitor.record.replay import ReplayFeed

    path, _, _ = run_session(tmp_path, ticks=4)
    conn = sqlite3.connect(path)
    for tick_id, blob in conn.execute("SELECT id, snapshot FROM ticks").fetchall():
        data = json.loads(zlib.decompress(blob))
        data.pop("timeline", None)
        data.pop("pd_paths", None)
        for node in data["nodes"]:
            node.pop("config_drift", None)
            if node.get("engine"):
                node["engine"].pop("settings", None)
                node["engine"].pop("healthy", None)
        conn.execute("UPDATE ticks SET snapshot = ? WHERE id = ?", (zlib.compress(json.dumps(data).encode()), tick_id))
    conn.commit()
    conn.close()
    rec = Recording.load(path)
    old = rec.snapshot(rec.ticks[-1].id)
    assert old is not None and old.timeline == [] and old.pd_paths == []
    rec.close()
    feed = ReplayFeed.open(path)
    assert len(feed.recording.ticks) == 4
    feed.recording.close()
    out = tmp_path / "out"
    assert main(["report", str(path), "--out", str(out)]) == 0
    with (out / "timeline.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert [(r["kind"], r["detail"]) for r in rows] == [("phase", "phase run")]


def test_the_snapshot_table_names_the_drift_and_the_restart(tmp_path: Path) -> None:
    from infertop.monitor.text_report import snapshot_table

    _, snaps, restart_at = run_session(tmp_path)
    text = snapshot_table(snaps[-1])
    assert f"drift {DRIFTED}: cache.block_size 32, pool 64" in text
    when = dt.datetime.fromtimestamp(restart_at, dt.UTC).strftime("%H:%M:%S")
    assert sum(line.startswith(f"event {when} restart {RESTARTED}:") for line in text.splitlines()) == 1
