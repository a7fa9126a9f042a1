"""Each kind of timeline event, once, at its time (monitor/evaluation/timeline.py), from
vLLM 0.33 pages (tests/support/vllm_info_page.py) and plain views."""

from __future__ import annotations

from infertop.collectors.pages.profiles import engine_sample_from_text
from infertop.collectors.sample import NodeSample
from infertop.monitor.evaluation.timeline import MAX_EVENTS, TimelineTracker
from infertop.monitor.snapshot import EngineView, NodeView, SessionView, VerdictView
from tests.support.vllm_info_page import VllmInfoServer

T0 = 1_800_000_000.0


def sample(server: VllmInfoServer, at: float, node: str = "d1") -> NodeSample:
    return NodeSample(node=node, source="scrape", taken_at=at, engine=engine_sample_from_text(server.page(), "vllm"))


def test_health_flips_and_setting_changes_are_dated_by_their_sample() -> None:
    server, tracker = VllmInfoServer(engines=2), TimelineTracker()
    server.advance(5.0)
    tracker.observe(sample(server, T0))
    server.advance(5.0)
    server.healthy = False
    tracker.observe(sample(server, T0 + 5))
    server.advance(5.0)
    server.healthy = True
    server.settings["gpu_memory_utilization"] = "0.85"
    tracker.observe(sample(server, T0 + 10))
    server.advance(5.0)
    tracker.observe(sample(server, T0 + 15))  # nothing new
    got = [(e.at, e.kind, e.detail) for e in tracker.events]
    assert got == [
        (T0 + 5, "health", "engine says unhealthy"),
        (T0 + 10, "health", "engine says healthy again"),
        (T0 + 10, "config-change", "cache.gpu_memory_utilization 0.92 → 0.85"),
    ]


def node(name: str = "d1", verdicts: list[VerdictView] | None = None, preemptions: float | None = None,
         status: str = "ok") -> NodeView:
    return NodeView(name=name, role="decode", status=status, verdicts=verdicts or [],  # type: ignore[arg-type]
                    engine=EngineView(preemptions_per_s=preemptions))


def session(phase: str, elapsed: float) -> SessionView:
    return SessionView(started_at="2027-01-15T08:00:00+00:00", elapsed_s=100.0, cost_per_hour_usd=None,
                       spend_usd=None, idle_spend_usd=None, budget_usd=None,
                       usd_per_million_output_tokens=None, api_equivalent_usd=None,
                       phase=phase, phase_elapsed_s=elapsed)


def test_verdicts_bursts_and_phases_once_each() -> None:
    tracker = TimelineTracker(burst_per_s=1.0)
    straggler = VerdictView(kind="straggler", detail="slow", since=T0 - 12)
    tracker.update([node(preemptions=0.1)], session("load", 30.0), T0)
    tracker.update([node(verdicts=[straggler], preemptions=4.0)], session("load", 31.0), T0 + 1)
    tracker.update([node(verdicts=[straggler], preemptions=5.0)], session("run", 0.0), T0 + 2)
    # a node that stops answering keeps its verdict (hidden): no clear, no second onset
    tracker.update([node(status="stale")], session("run", 1.0), T0 + 3)
    tracker.update([node(verdicts=[straggler], preemptions=0.0)], session("run", 2.0), T0 + 4)
    tracker.update([node(preemptions=0.0)], session("run", 3.0), T0 + 5)
    got = [(e.at, e.kind, e.node, e.detail) for e in tracker.events]
    assert got == [
        (T0 - 30, "phase", None, "phase load"),
        (T0 - 12, "verdict-onset", "d1", "straggler: slow"),
        (T0 + 1, "preemption-burst", "d1", "4.0 preemptions/s"),
        (T0 + 2, "phase", None, "phase run"),
        (T0 + 5, "verdict-clear", "d1", "straggler cleared"),
    ]


def test_the_list_is_bounded_and_in_time_order() -> None:
    tracker = TimelineTracker()
    for i in range(MAX_EVENTS + 50):
        tracker.update([node(name=f"n{i}", verdicts=[VerdictView(kind="idle", detail="", since=T0 - i)])],
                       None, T0)
    assert len(tracker.events) == MAX_EVENTS
    ats = [e.at for e in tracker.events]
    assert ats == sorted(ats)
