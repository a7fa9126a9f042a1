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


def itl_buckets(seen: float) -> tuple[tuple[float, float], ...]:
    """vLLM's first ITL bounds with every gap 30 ms long (the 25–50 ms bucket)."""
    bounds = (0.01, 0.025, 0.05, 0.075, float("inf"))
    return tuple((le, 0.0 if le < 0.03 else seen) for le in bounds)


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
                                            requests_finished_total=float(i), requests_running=2.0,
                                            latency_buckets={"itl": itl_buckets(100.0 * i)})))
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
    assert [Path(p).name for p in printed] == ["report.md", "phases.csv", "nodes.csv", "hours.csv", "spend.svg",
                                               "scoreboard.svg"]
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
    assert "\x1b" not in md  # hostile text from the layout is inert
    svg = ET.fromstring((out / "spend.svg").read_text())
    assert len(svg.findall("{http://www.w3.org/2000/svg}polyline")) == 2
    assert any("[bold red]" in (t.text or "") for t in svg.iter("{http://www.w3.org/2000/svg}text"))


def test_report_scoreboard_section_and_chart(tmp_path: Path) -> None:
    """1,000 tokens a minute from d1's 4 GPUs with 2 running requests: 4.17 tokens/s per
    GPU and 8.33 per user; every inter-token gap 30 ms, in the 25–50 ms bucket."""
    path, live = record_session(tmp_path, 30)
    out = tmp_path / "out"
    assert main(["report", str(path), "--out", str(out)]) == 0
    assert live.session.output_tokens_per_s_per_gpu == pytest.approx(1000 / 60 / 4)
    assert live.session.output_tokens_per_s_per_user == pytest.approx(1000 / 60 / 2)
    md = (out / "report.md").read_text()
    section = md[md.index("## Scoreboard"):]
    assert "4 accepted tokens/s per GPU" in section and "8 tokens/s per user" in section
    assert "| EP64 | 15,700 | 246 | full-acceptance |" in section
    # interpolated within the bucket: rank 50 % of it at 37.5 ms, 99 % at 49.75 ms
    assert "| decode pool | — | — | 37.5 ms (25–50) | 49.75 ms (25–50) | — |" in section
    assert "| decode pool | 20.0% | — | — |" in section  # 100 cached of 500 prompt tokens
    svg = ET.fromstring((out / "scoreboard.svg").read_text())
    ns = "{http://www.w3.org/2000/svg}"
    (trail,) = [p for p in svg.iter(f"{ns}polyline") if p.get("class") == "trail"]
    assert len(trail.get("points", "").split()) >= 25  # one point per tick with a live point
    assert [c.get("class") for c in svg.iter(f"{ns}circle")] == ["live"]  # no full-acceptance figure
    assert len([r for r in svg.iter(f"{ns}rect") if r.get("class") == "reference"]) == 2


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
