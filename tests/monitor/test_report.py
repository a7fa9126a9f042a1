"""`infertop report`: Markdown + CSVs + SVG from a recording, totals equal to the live ones."""

from __future__ import annotations

import csv
import datetime as dt
import xml.etree.ElementTree as ET
from decimal import Decimal
from pathlib import Path

import pytest

from infertop.cli.main import main
from infertop.collectors.sample import EngineSample, GpuSample, NodeSample
from infertop.layouts import load_layout
from infertop.monitor.format import fmt_lapse
from infertop.monitor.monitor import Monitor
from infertop.monitor.record.recording import Recording, TickRow
from infertop.monitor.record.report import nice_range, split_by_hour
from infertop.monitor.record.store import Recorder
from infertop.monitor.snapshot import Snapshot

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


def record_session(tmp_path: Path, ticks: int, step_s: float = 60.0,
                   layout_text: str = LAYOUT) -> tuple[Path, Snapshot]:
    layout_file = tmp_path / "layout.toml"
    layout_file.write_text(layout_text.replace("\x1b", "\\u001b"))
    layout = load_layout(layout_file)
    recorder = Recorder.open(layout, tmp_path / "rec.sqlite", now=MONDAY + H)
    monitor = Monitor(layout, sources=[], clock=lambda: MONDAY + H, recorder=recorder)
    emit = monitor.fleet.ingest  # the path every source's samples take
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
    assert [Path(p).name for p in printed] == [
        "report.md", "phases.csv", "nodes.csv", "incidents.csv", "hours.csv", "spend.svg", "scoreboard.svg",
        "timeline.csv",
    ]
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
    assert set(nodes) == {"d1", "p1"}  # no extras billed: no "(cluster)" row of float dust
    assert Decimal(nodes["d1"]["spend_usd"]) == Decimal(nodes["p1"]["spend_usd"])  # both $100/h
    assert nodes["d1"]["role"] == "decode" and nodes["d1"]["gpus"] == "4"
    hours = read_csv(out / "hours.csv")
    assert [r["hour_start_utc"][11:16] for r in hours] == ["00:00", "01:00", "02:00", "03:00", "04:00"]
    assert sum(Decimal(r["spend_usd"]) for r in hours) == pytest.approx(Decimal(str(live.session.spend_usd)), abs=Decimal("1e-5"))
    assert Decimal(hours[0]["spend_usd"]) == pytest.approx(Decimal(rate / 2), abs=Decimal("1e-6"))
    assert sum(int(r["output_tokens"]) for r in hours) == pytest.approx(199_000, abs=len(hours))
    assert all(r["output_tokens"].isdigit() for r in hours)  # whole tokens, not 1234.567
    md = (out / "report.md").read_text()
    for fact in ("2 (1 decode, 1 prefill)", "| GPUs (layout) | 8 |", "60 s", "vllm",
                 "2026-11-30 00:30:00 UTC", "ticks recorded | 200", "$25/GPU-h"):
        assert fact in md, fact
    assert f"| spend | ${live.session.spend_usd:,.2f} |" in md
    # the engine does not say since when it counts: tokens are set against the spend since
    # infertop first read them, and the report says so
    assert live.session.tokens_since is not None
    assert live.session.span_s is not None
    assert (f"| token figures cover | over the last {fmt_lapse(live.session.span_s)} watched: "
            f"from {live.session.tokens_since} to {live.session.tokens_until} (spend over it: $") in md
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


def test_report_carries_the_goodput_over_the_token_figures_stretch(tmp_path: Path) -> None:
    """With an ITL target of 50 ms (a bucket bound) every 30 ms gap is within: over the
    stretch the $/1M covers, 100 % and $/1M good tokens = the plain $/1M; the record's
    report gives the live session's figures (the buckets are not in the record)."""
    path, live = record_session(tmp_path, 30, layout_text=LAYOUT + "\n[slo]\nitl_p99_s = 0.05\n")
    s = live.session
    assert s.span_goodput_share_low == s.span_goodput_share_high == 1.0
    assert s.span_usd_per_million_good_tokens_low == pytest.approx(s.usd_per_million_output_tokens)
    assert Recording.load(path).final_session() == s
    out = tmp_path / "out"
    assert main(["report", str(path), "--out", str(out)]) == 0
    md = (out / "report.md").read_text()
    assert "| within the SLO targets (over the same stretch) | 100.0% |" in md
    assert f"| $ per 1M good output tokens (over the same stretch) | ${s.usd_per_million_output_tokens:,.4f} |" in md


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


def record_idle_run(tmp_path: Path) -> tuple[Path, float, float]:
    """d1 busy, then idle from tick 40 to tick 100 (60 s ticks), then busy again; p1 busy
    throughout. Returns the record and when the idle run began and ended."""
    layout_file = tmp_path / "layout.toml"
    layout_file.write_text(LAYOUT.replace("\x1b", "\\u001b") + "[thresholds]\nidle_hold_s = 60\nclear_s = 60\n")
    layout = load_layout(layout_file)
    recorder = Recorder.open(layout, tmp_path / "rec.sqlite", now=MONDAY + H)
    monitor = Monitor(layout, sources=[], clock=lambda: MONDAY + H, recorder=recorder)
    emit = monitor.fleet.ingest
    tokens = 0.0
    for i in range(160):
        now = MONDAY + H + i * 60.0
        idle = 40 <= i < 100
        tokens += 0.0 if idle else 6000.0  # 100 tok/s while busy
        # GPUs read with their clock-event reasons (NVML, dcgm-exporter with them on): the
        # nodes are fully seen, so idle is the only verdict
        emit(NodeSample(node="d1", source="scrape", taken_at=now,
                        gpus=[GpuSample(index=g, util_pct=0.0 if idle else 90.0, clock_event_reasons=0)
                              for g in range(4)],
                        engine=EngineSample(generation_tokens_total=tokens,
                                            requests_running=0.0 if idle else 32.0)))
        emit(NodeSample(node="p1", source="scrape", taken_at=now,
                        gpus=[GpuSample(index=g, util_pct=70.0, clock_event_reasons=0) for g in range(4)]))
        monitor.tick(now)
    recorder.close()
    return recorder.path, MONDAY + H + 40 * 60.0, MONDAY + H + 100 * 60.0


def test_report_lists_incidents_and_real_per_node_figures(tmp_path: Path) -> None:
    path, idle_from, idle_to = record_idle_run(tmp_path)
    out = tmp_path / "out"
    assert main(["report", str(path), "--out", str(out)]) == 0
    incidents = [r for r in read_csv(out / "incidents.csv") if r["verdict"] == "idle"]
    assert len(incidents) == 1, incidents
    (idle,) = incidents
    assert idle["node"] == "d1"
    start = dt.datetime.fromisoformat(idle["start_utc"]).timestamp()
    end = dt.datetime.fromisoformat(idle["end_utc"]).timestamp()
    # from when the condition began (the rate window lags by up to one window) to the
    # first tick without it (the clear time after the node got busy again)
    assert idle_from - 60 <= start <= idle_from + 180, (start - idle_from)
    assert idle_to <= end <= idle_to + 360, (end - idle_to)
    duration = float(idle["duration_s"])
    assert duration == pytest.approx(end - start, abs=1)
    # $ at stake × duration: the idle node's own $100/h for as long as it ran
    assert Decimal(idle["usd_at_stake"]) == pytest.approx(Decimal(100 * duration / H), rel=Decimal("0.01"))
    md = (out / "report.md").read_text()
    assert "## Incidents" in md and "| idle | d1 |" in md

    nodes = {r["node"]: r for r in read_csv(out / "nodes.csv")}
    d1, p1 = nodes["d1"], nodes["p1"]
    # 100 busy ticks of 60 s at 100 tok/s (rates need a window to settle: within 5 %)
    assert int(d1["output_tokens"]) == pytest.approx(100 * 60 * 100, rel=0.05)
    assert p1["output_tokens"] in ("", "0")
    assert float(d1["mean_util_pct"]) == pytest.approx(90 * 100 / 160, rel=0.05)
    assert float(p1["mean_util_pct"]) == pytest.approx(70.0, abs=0.5)
    assert float(d1["verdict_minutes"]) == pytest.approx(duration / 60, rel=0.1)
    assert float(p1["verdict_minutes"]) == 0.0
    # idle spend: the idle node's $100/h over its idle time, the busy one none
    assert Decimal(d1["idle_spend_usd"]) > Decimal(50) and Decimal(p1["idle_spend_usd"]) == 0


def test_chart_axes_fit_the_data_and_mark_phases_and_incidents(tmp_path: Path) -> None:
    path, _, _ = record_idle_run(tmp_path)
    out = tmp_path / "out"
    assert main(["report", str(path), "--out", str(out)]) == 0
    ns = "{http://www.w3.org/2000/svg}"
    svg = ET.fromstring((out / "spend.svg").read_text())
    texts = [t.text or "" for t in svg.iter(f"{ns}text")]
    width = float(svg.get("width", "0"))
    # each line uses most of the plot's height (the axes fit the data; a $0 floor under a
    # late-started session's spend drew it as a flat line in the top tenth)
    plot = next(r for r in svg.iter(f"{ns}rect") if r.get("fill") == "none")
    plot_h = float(plot.get("height", "1"))
    for line in svg.iter(f"{ns}polyline"):
        ys = [float(pt.split(",")[1]) for pt in (line.get("points") or "").split()]
        assert max(ys) - min(ys) >= 0.6 * plot_h, (line.get("stroke"), max(ys) - min(ys), plot_h)
    # no label runs off the right edge: right-axis labels start inside the picture
    for t in svg.iter(f"{ns}text"):
        if t.get("text-anchor") in (None, "start"):
            assert float(t.get("x", "0")) + 7 * len(t.text or "") <= width + 1, t.text
    assert any("incident start" in t for t in texts)
    marks = [p for p in svg.iter(f"{ns}path") if (p.find(f"{ns}title") is not None)]
    assert any("idle on d1" in (m.find(f"{ns}title").text or "") for m in marks)  # type: ignore[union-attr]


@pytest.mark.parametrize(("low", "high"), [(20_000.0, 20_500.0), (100.0, 633.0), (0.0, 1.0), (5.0, 5.0)])
def test_nice_range_fits_the_data(low: float, high: float) -> None:
    bottom, top, step = nice_range(low, high)
    assert bottom <= low and top >= high and step > 0
    assert (top - bottom) <= 3 * max(high - low, abs(high) * 0.1, 1.0)  # fits: no $0 floor under $20k


def test_a_blank_latency_table_says_why(tmp_path: Path) -> None:
    """A record shorter than the window (issue 45): the pools' latency cells are blank, and
    the report says why, as the live TUI's scoreboard does on the nodes' rows."""
    path, _ = record_session(tmp_path, 1)
    out = tmp_path / "out"
    assert main(["report", str(path), "--out", str(out)]) == 0
    section = (out / "report.md").read_text().split("## Scoreboard", 1)[1]
    assert ("Latency is blank: the window (150 s) is longer than the record (0.0 s); "
            "no latency reading in this window.") in section
    # a record with its latency: no such line
    (tmp_path / "long").mkdir()
    path, _ = record_session(tmp_path / "long", 30)
    assert main(["report", str(path), "--out", str(tmp_path / "out2")]) == 0
    assert "Latency is blank" not in (tmp_path / "out2" / "report.md").read_text()
