"""The layout's scoreboard parts: `[slo]` targets (attainment share and the `slo`
verdict) and `[scoreboard]` reference points replacing the bundled, dated table."""

from __future__ import annotations

import pytest

from infertop.collectors.sample import EngineSample, NodeSample
from infertop.layouts import parse_layout
from infertop.layouts.loader import LayoutError
from infertop.monitor.evaluation.reference_points import REFERENCE_POINTS
from infertop.monitor.exporter import snapshot_families
from infertop.monitor.monitor import Monitor
from infertop.monitor.snapshot import Snapshot

ITL_BOUNDS = (0.01, 0.025, 0.05, 0.075, float("inf"))  # vLLM's first ITL buckets

LAYOUT = """
[cluster]
name = "slo-test"
interval_s = 1.0
window_s = 10.0

[thresholds]
hold_s = 0
clear_s = 0

[[nodes]]
name = "decode-01"
role = "decode"
gpus = 8
"""


def run(layout_text: str) -> Snapshot:
    """decode-01 over 10 s: 1,000 inter-token gaps a second, every one 30 ms long."""
    monitor = Monitor(parse_layout(layout_text), sources=[], clock=lambda: 1_000.0)
    snap = None
    for i in range(11):
        seen = 1000.0 * i
        monitor.fleet.ingest(NodeSample(
            node="decode-01", source="test", taken_at=990.0 + i,
            engine=EngineSample(
                generation_tokens_total=seen, requests_running=10,
                latency_buckets={"itl": tuple(zip(ITL_BOUNDS, (0.0, 0.0, seen, seen, seen), strict=True))},
            ),
        ))
        snap = monitor.tick(990.0 + i)
    assert snap is not None
    return snap


def test_a_target_below_the_bucket_is_a_miss_with_its_evidence() -> None:
    snap = run(LAYOUT + "\n[slo]\nitl_p99_s = 0.02\n")
    (node,) = snap.nodes
    assert node.engine is not None and node.engine.slo_itl_attainment == 0.0
    verdicts = {v.kind: v.detail for v in node.verdicts}
    assert verdicts["slo"] == "ITL p99 25–50 ms > target 20 ms, 0.0% within"
    assert snap.cluster.roles["decode"].slo_itl_attainment == 0.0
    assert snap.cluster.slo_itl_p99_s == 0.02
    families = {f.name: f for f in snapshot_families(snap)}
    (sample,) = families["infertop_node_slo_itl_attainment_ratio"].samples
    assert sample.value == 0.0 and sample.labels["node"] == "decode-01"


def test_a_target_inside_the_bucket_is_no_miss_and_the_share_is_bounded() -> None:
    snap = run(LAYOUT + "\n[slo]\nitl_p99_s = 0.04\nttft_p99_s = 2\n")
    (node,) = snap.nodes
    assert "slo" not in {v.kind for v in node.verdicts}
    assert node.engine is not None
    # every gap in the 25–50 ms bucket: between none and all within 40 ms, never 60 %
    assert (node.engine.slo_itl_attainment, node.engine.slo_itl_attainment_high) == (0.0, 1.0)
    assert node.engine.slo_ttft_attainment is None  # no TTFT histogram: unknown
    assert node.engine.slo_ttft_attainment_high is None


def test_no_slo_no_share_no_verdict() -> None:
    snap = run(LAYOUT)
    (node,) = snap.nodes
    assert node.engine is not None and node.engine.slo_itl_attainment is None
    # no slo verdict (the node is blind on its GPUs: the test sends none of the 8)
    assert [v.kind for v in node.verdicts] == ["blind"]
    # the bundled, dated table
    assert [p.label for p in snap.cluster.reference_points] == [p.label for p in REFERENCE_POINTS]
    assert snap.cluster.reference_points[0].output_tokens_per_s_per_gpu == 15_700
    assert snap.cluster.reference_points[0].accounting == "full-acceptance"
    assert "2026" in (snap.cluster.reference_source or "")
    assert snap.session.output_tokens_per_s_per_gpu == pytest.approx(1000 / 8)
    assert snap.session.output_tokens_per_s_per_user == pytest.approx(100.0)


def test_layout_reference_points_replace_the_bundled_ones() -> None:
    snap = run(LAYOUT + """
[scoreboard]
reference_source = "our own bench, 2026-11-30"

[[scoreboard.reference_points]]
label = "bench-EP16"
output_tokens_per_s_per_gpu = 9000
output_tokens_per_s_per_user = 120
accounting = "accepted"
""")
    (point,) = snap.cluster.reference_points
    assert (point.label, point.output_tokens_per_s_per_gpu, point.accounting) == ("bench-EP16", 9000, "accepted")
    assert snap.cluster.reference_source == "our own bench, 2026-11-30"


@pytest.mark.parametrize(("extra", "field"), [
    ("[slo]\nitl_p99_s = -1\n", "slo.itl_p99_s"),
    ("[[scoreboard.reference_points]]\nlabel = \"x\"\noutput_tokens_per_s_per_gpu = 1\n", "scoreboard"),
    ("[[scoreboard.reference_points]]\nlabel = \"a\\u001b[31m\"\noutput_tokens_per_s_per_gpu = 1\n"
     "output_tokens_per_s_per_user = 1\n", "scoreboard.reference_points"),
])
def test_bad_scoreboard_layout_names_the_field(extra: str, field: str) -> None:
    with pytest.raises(LayoutError) as err:
        parse_layout(LAYOUT + "\n" + extra)
    assert field in str(err.value) and "\n" not in str(err.value)


def test_the_text_snapshot_has_a_scoreboard_line() -> None:
    from infertop.monitor.text_report import snapshot_table

    text = snapshot_table(run(LAYOUT + "\n[slo]\nitl_p99_s = 0.04\n"))
    line = next(li for li in text.splitlines() if li.startswith("scoreboard:"))
    assert line == ("scoreboard: 125 accepted tok/s per GPU (— full acceptance), 100 per user "
                    "(reference EP64: 15,700 / 246, full-acceptance); TTFT p99 —, "
                    "ITL p99 49.75 ms (25–50)")


TTFT_BOUNDS = (0.5, 1.0, 2.5, float("inf"))

DISAGGREGATED = LAYOUT + """
[[nodes]]
name = "prefill-01"
role = "prefill"
gpus = 8
"""


def run_disaggregated(prefill_ttft: bool) -> Snapshot:
    """decode-01 as in `run`; prefill-01 answers 100 first tokens a second, 0.5–1 s each
    (or none), and makes no output tokens of its own, as a disaggregated prefill pool."""
    monitor = Monitor(parse_layout(DISAGGREGATED), sources=[], clock=lambda: 1_000.0)
    snap = None
    for i in range(11):
        seen = 1000.0 * i
        first = 100.0 * i if prefill_ttft else 0.0
        monitor.fleet.ingest(NodeSample(
            node="decode-01", source="test", taken_at=990.0 + i,
            engine=EngineSample(
                generation_tokens_total=seen, requests_running=10,
                latency_buckets={"itl": tuple(zip(ITL_BOUNDS, (0.0, 0.0, seen, seen, seen), strict=True))},
            ),
        ))
        monitor.fleet.ingest(NodeSample(
            node="prefill-01", source="test", taken_at=990.0 + i,
            engine=EngineSample(
                requests_running=4,
                latency_buckets={"ttft": tuple(zip(TTFT_BOUNDS, (0.0, first, first, first), strict=True))},
            ),
        ))
        snap = monitor.tick(990.0 + i)
    assert snap is not None
    return snap


def test_on_a_disaggregated_cluster_the_scoreboard_ttft_is_the_prefill_pools() -> None:
    from infertop.monitor.text_report import snapshot_table
    from infertop.tui.scoreboard_text import scoreboard_line

    snap = run_disaggregated(prefill_ttft=True)
    s = snap.session
    assert (s.live_point_pool, s.ttft_pool, s.itl_pool) == ("decode", "prefill", "decode")
    assert snap.cluster.roles["decode"].ttft_p99_s is None  # the decode pool saw no first token
    assert snap.cluster.roles["prefill"].ttft_p99_s == pytest.approx(0.995)  # 99 % into 0.5–1 s
    text = snapshot_table(snap)
    line = next(li for li in text.splitlines() if li.startswith("scoreboard:"))
    assert line.endswith("TTFT p99 prefill 995 ms (500–1,000), ITL p99 49.75 ms (25–50)")
    assert "TTFT p99 prefill 995 ms  ITL p99 49.75 ms " in scoreboard_line(snap).plain


def test_with_no_pool_seeing_a_first_token_the_scoreboard_ttft_is_unknown() -> None:
    from infertop.tui.scoreboard_text import scoreboard_line

    snap = run_disaggregated(prefill_ttft=False)
    assert snap.session.ttft_pool is None and snap.session.itl_pool == "decode"
    assert "TTFT p99 —  ITL p99 49.75 ms" in scoreboard_line(snap).plain


def test_a_snapshot_recorded_before_the_latency_pools_gets_them_on_reading() -> None:
    import json
    import zlib

    from infertop.monitor.record.codec import decode_snapshot, encode_snapshot

    snap = run_disaggregated(prefill_ttft=True)
    data = json.loads(zlib.decompress(encode_snapshot(snap)))
    assert data["session"].pop("ttft_pool") == "prefill" and data["session"].pop("itl_pool") == "decode"
    old = decode_snapshot(zlib.compress(json.dumps(data).encode()))
    assert (old.session.ttft_pool, old.session.itl_pool) == ("prefill", "decode")
    assert decode_snapshot(encode_snapshot(snap)).session == snap.session


def test_the_overview_scoreboard_line_keeps_whole_items_within_its_width() -> None:
    from infertop.tui.scoreboard_text import scoreboard_line

    snap = run_disaggregated(prefill_ttft=True)
    whole = scoreboard_line(snap).plain
    assert whole.endswith("(b)") and "TTFT p99 prefill 995 ms" in whole
    for width in range(20, len(whole) + 1):
        cut = scoreboard_line(snap, width).plain
        assert len(cut) <= width or (cut.startswith("scoreboard") and "vs" not in cut), (width, cut)
        assert whole.startswith(cut)
        # a label is never left without its figure (a newcomer saw "break-even" alone)
        assert not cut.rstrip().endswith(("TTFT p99", "ITL p99", "prefix hit", "break-even", "vs"))
    assert scoreboard_line(snap, 60).plain.startswith("scoreboard 125 tok/s/GPU")
