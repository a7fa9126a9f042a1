"""`infertop report`: Markdown + CSVs + SVG from a recording, totals equal to the live ones."""

from __future__ import annotations

import csv
import datetime as dt
import xml.etree.ElementTree as ET
from decimal import Decimal
from pathlib import Path

import pytest

from collectors.sample import EngineSample, GpuSample, NodeSample
from infertop.cli.main import main
from layouts import load_layout
from monitor.monitor import Monitor
from monitor.record.report import split_by_hour
from monitor.record.store import Recorder, Recording, TickRow
from monitor.snapshot import Snapshot

H = 3600.0
MONDAY = dt.datetime(2026, 11, 30, tzinfo=dt.UTC).timestamp()

LAYOUT = """
[cluster]
name = "report [bold red]test[/] \x1b[31m"
interval_s = 60
window_s = 150
[session]
reservation_start = "2026-11-30T00:30:00Z"
budget_usd = 600
[pricing]
gpu_hour_usd = 25.0
[[nodes]]
name = "d1"
role = "decode"
gpus = 4
engine = { url = "http://127.0.0.1:1/metrics", profile = "vllm" }
[[nodes]]
name = "p1"
role = "prefill"
gpus = 4
node_hour_usd = 100.0
"""


def record_session(tmp_path: Path, ticks: int, step_s: float = 60.0) -> tuple[Path, Snapshot]:
    layout_file = tmp_path / "layout.toml"
    layout_file.write_text(LAYOUT.replace("\x1b", "\\u001b"))
    layout = load_layout(layout_file)
    recorder = Recorder.open(layout, tmp_path / "rec.sqlite", now=MONDAY + H)
    monitor = Monitor(layout, sources=[], clock=lambda: MONDAY + H, recorder=recorder)
    emit = monitor.fleet._emit  # the path every source's samples take
    snap = None
    for i in range(ticks):
        now = MONDAY + H + i * step_s
        emit(NodeSample(node="d1", source="scrape", taken_at=now,
                        gpus=[GpuSample(index=g, util_pct=0.0 if i % 2 else 80.0) for g in range(4)],
                        engine=EngineSample(generation_tokens_total=1000.0 * i, prompt_tokens_total=500.0 * i,
                                            prompt_cached_tokens_total=100.0 * i,
                                            requests_finished_total=float(i))))
        if i == ticks // 2:
            monitor.mark_phase("warmup", now - step_s / 2)
        snap = monitor.tick(now)
    assert snap is not None
    recorder.close()
    return recorder.path, snap


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open() as fh:
        return list(csv.DictReader(fh))


def test_report_totals_equal_the_live_session(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path, live = record_session(tmp_path, 200)  # 00:30 → 04:19 UTC Monday: crosses the hours
    out = tmp_path / "out"
    assert main(["report", str(path), "--out", str(out)]) == 0
    printed = capsys.readouterr().out.split()
    assert [Path(p).name for p in printed] == ["report.md", "phases.csv", "nodes.csv", "hours.csv", "spend.svg"]
    rec = Recording.load(path)
    assert rec.final_session() == live.session
    ledger = rec.ledger
    assert ledger is not None
    rate = 4 * 25.0 + 100.0
    assert live.session.spend_usd == pytest.approx(rate * (H / 2 + 199 * 60) / H, abs=1e-9)
    phases = read_csv(out / "phases.csv")
    assert sum(Decimal(r["spend_usd"]) for r in phases) == pytest.approx(Decimal(str(live.session.spend_usd)), abs=Decimal("1e-5"))
    assert {r["phase"] for r in phases} == {"run", "warmup"}
    nodes = {r["node"]: r for r in read_csv(out / "nodes.csv")}
    assert set(nodes) == {"d1", "p1", "(cluster)"}
    assert Decimal(nodes["d1"]["spend_usd"]) == Decimal(nodes["p1"]["spend_usd"])  # both $100/h
    assert nodes["d1"]["role"] == "decode" and nodes["d1"]["gpus"] == "4"
    hours = read_csv(out / "hours.csv")
    assert [r["hour_start_utc"][11:16] for r in hours] == ["00:00", "01:00", "02:00", "03:00", "04:00"]
    assert sum(Decimal(r["spend_usd"]) for r in hours) == pytest.approx(Decimal(str(live.session.spend_usd)), abs=Decimal("1e-5"))
    assert Decimal(hours[0]["spend_usd"]) == pytest.approx(Decimal(rate / 2), abs=Decimal("1e-6"))
    assert sum(float(r["output_tokens"]) for r in hours) == pytest.approx(199_000.0)
    md = (out / "report.md").read_text()
    for fact in ("2 (1 decode, 1 prefill)", "| GPUs (layout) | 8 |", "60 s", "vllm",
                 "2026-11-30 00:30:00 UTC", "ticks recorded | 200", "$25/GPU-h"):
        assert fact in md, fact
    assert f"| spend | ${live.session.spend_usd:,.2f} |" in md
    # the engine does not say since when it counts: tokens are set against the spend since
    # infertop first read them, and the report says so
    assert live.session.tokens_since is not None
    assert f"| token figures cover | since {live.session.tokens_since} (spend over it: $" in md
    assert "\x1b" not in md  # hostile text from the layout is inert
    svg = ET.fromstring((out / "spend.svg").read_text())
    assert len(svg.findall("{http://www.w3.org/2000/svg}polyline")) == 2
    assert any("[bold red]" in (t.text or "") for t in svg.iter("{http://www.w3.org/2000/svg}text"))


def test_acceptable_tasks_deepinfer_example(tmp_path: Path) -> None:
    # $200/h (the layout's two nodes) over 3 h of recording from the reservation start
    path, live = record_session(tmp_path, 2, step_s=2.5 * H)  # 00:30 → 01:00 → 03:30
    assert live.session.spend_usd == pytest.approx(600.0, abs=1e-9)
    out = tmp_path / "out"
    assert main(["report", str(path), "--out", str(out), "--acceptable-tasks", "1000"]) == 0
    assert "| $ per acceptable task | $0.6000 |" in (out / "report.md").read_text()


def test_split_by_hour_is_exact() -> None:
    def tick(i: int, at: float, spend: str) -> TickRow:
        return TickRow(i, at, "run", 10.0, Decimal(spend), None, None, None, None, None, None)

    rows = split_by_hour(0.0, [tick(1, 1800.0, "5"), tick(2, 9000.0, "25")])
    assert [r.hour_start for r in rows] == [0.0, 3600.0, 7200.0]
    assert [r.spend_usd for r in rows] == [Decimal("10"), Decimal("10"), Decimal("5")]
    assert [r.watched_s for r in rows] == [1800.0, 3600.0, 1800.0]


def test_damaged_recording_reports_what_is_readable(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path, _ = record_session(tmp_path, 400)
    size = path.stat().st_size
    with path.open("r+b") as fh:
        fh.truncate(size // 2)
    out = tmp_path / "out"
    assert main(["report", str(path), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "damaged recording" in err[0] and "readable ticks" in err[0]
    md = (out / "report.md").read_text()
    assert "The recording is damaged" in md
    rec = Recording.load(path)
    assert 0 < len(rec.ticks) < 400
    assert len(read_csv(out / "hours.csv")) >= 1


def test_garbage_and_missing_files_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    garbage = tmp_path / "g.sqlite"
    garbage.write_bytes(b"\x00garbage" * 1000)
    assert main(["report", str(garbage), "--out", str(tmp_path / "o")]) == 2
    assert main(["report", str(tmp_path / "missing.sqlite")]) == 2
    assert main(["report", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and all(line.startswith("infertop: ") for line in err)
    assert "Traceback" not in "".join(err)
