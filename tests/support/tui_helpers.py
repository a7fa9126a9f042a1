"""Helpers for the TUI tests: a real in-memory `Source` of synthetic samples, layouts,
a frozen feed (real Monitor, fixed clock), and screen-reading utilities."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from infertop.collectors.sample import EngineSample, GpuSample, HostSample, NicSample, NodeSample, PageOutcome
from infertop.collectors.sources.source import PollingSource
from infertop.layouts.model import ClusterConfig, Layout, NicExpectation, NodeConfig, PricingConfig
from infertop.monitor.feeds import Publish
from infertop.monitor.monitor import Monitor
from tests.support.waiting import until_async

GIB = 1024**3


@dataclass
class NodeSpec:
    name: str
    role: str = "decode"
    gpus: int = 2
    gpu_name: str = "NVIDIA H200"
    nics: Sequence[str] = ("mlx5_0", "mlx5_1")
    down_nics: Sequence[str] = ()
    steps_per_s: float | None = 30.0
    util_pct: float = 80.0
    power_w: float = 500.0  # GPU i draws this plus 10 W × i
    silent_after: int | None = None  # stop answering after this many samples
    notes: list[str] = field(default_factory=list)
    in_layout: bool = True
    error: str | None = None  # answer with this error instead of figures
    itl_s: float | None = None  # every inter-token gap this long (vLLM's ITL buckets)
    # its node_exporter page fails with this error: its ports are unread (blind)
    dead_node_exporter: str | None = None
    group: str | None = None  # the layout's group (a rack, a unit) within the pool


ITL_BOUNDS = (0.01, 0.025, 0.05, 0.075, 0.1, float("inf"))  # vLLM's first ITL buckets


def scoreboard_counters(itl_s: float, t: float) -> dict[str, object]:
    """1,000 inter-token gaps a second, all `itl_s` long; a 75 % prefix hit rate; one
    preemption and 2 GB of KV moved a second."""
    seen = 1000.0 * t
    buckets = tuple((le, seen if itl_s <= le else 0.0) for le in ITL_BOUNDS)
    return {
        "latency_buckets": {"itl": buckets},
        "prefix_cache_queries_total": 4000.0 * t,
        "prefix_cache_hits_total": 3000.0 * t,
        "preemptions_total": t,
        "kv_transfer_bytes_total": 2e9 * t,
    }


def make_sample(spec: NodeSpec, n: int, taken_at: float, interval_s: float, source: str) -> NodeSample:
    """The n-th reading of a node: gauges fixed, counters growing at fixed rates."""
    if spec.error is not None:
        return NodeSample(node=spec.name, source=source, taken_at=taken_at, error=spec.error)
    t = n * interval_s
    gpus = [
        GpuSample(
            index=i,
            name=spec.gpu_name,
            util_pct=spec.util_pct,
            mem_used_bytes=70 * GIB,
            mem_total_bytes=141 * GIB,
            power_w=spec.power_w + 10 * i,
            temp_c=60.0,
            sm_clock_mhz=1980.0,
            clock_event_reasons=0x4 if i == 1 else 0,
            healthy=True,
            nvlink_links_total=18,
            nvlink_links_up=18,
            nvlink_tx_bytes_total=t * 1e9,
            nvlink_rx_bytes_total=t * 1e9,
        )
        for i in range(spec.gpus)
    ]
    nics = [
        NicSample(
            name=name,
            kind="infiniband",
            state="down" if name in spec.down_nics else "active",
            speed_gbps=400.0,
            rx_bytes_total=t * 5e9,
            tx_bytes_total=t * 4e9,
            xmit_wait_total=0.0,
        )
        for name in spec.nics
    ]
    engine = None
    if spec.steps_per_s is not None:
        engine = EngineSample(
            profile="vllm",
            steps_total=t * spec.steps_per_s,
            drafts_total=t * spec.steps_per_s * 8,
            draft_tokens_total=t * spec.steps_per_s * 8 * 3,
            accepted_tokens_total=t * spec.steps_per_s * 8 * 2,
            generation_tokens_total=t * spec.steps_per_s * 8 * 3,
            requests_running=8.0,
            requests_waiting=1.0,
            kv_cache_usage=0.4,
            **(scoreboard_counters(spec.itl_s, t) if spec.itl_s is not None else {}),
        )
    pages = []
    if spec.dead_node_exporter is not None:
        url = f"http://{spec.name}:9100/metrics"
        pages = [PageOutcome(kind="node_exporter", url=url, ok=False, error=spec.dead_node_exporter, parts=("nics",))]
    return NodeSample(
        node=spec.name,
        source=source,
        taken_at=taken_at,
        gpus=gpus,
        nics=None if spec.dead_node_exporter is not None else nics,
        pages=pages,
        engine=engine,
        host=HostSample(cpu_pct=12.0, mem_used_bytes=100 * GIB, mem_total_bytes=2000 * GIB),
        notes=list(spec.notes),
    )


class SyntheticSource(PollingSource):
    """A real polling source, in memory: synthetic readings of the given nodes."""

    kind = "synthetic"

    def __init__(self, specs: Sequence[NodeSpec], interval_s: float, clock: Callable[[], float] = time.time):
        super().__init__([s.name for s in specs], interval_s, timeout_s=5.0)
        self.specs = list(specs)
        self.clock = clock
        self.polls = 0

    async def poll(self) -> Sequence[NodeSample]:
        n = self.polls
        self.polls += 1
        now = self.clock()
        return [
            make_sample(s, n, now, self.interval_s, self.kind)
            for s in self.specs
            if s.silent_after is None or n < s.silent_after
        ]


def make_layout(specs: Sequence[NodeSpec], interval_s: float = 0.25, name: str = "test-cluster",
                insecure: bool = False) -> Layout:
    nodes = [
        NodeConfig(
            name=s.name,
            role=s.role,  # type: ignore[arg-type]
            gpus=s.gpus,
            nics=[NicExpectation(name=n, expected_gbps=400) for n in s.nics],
            group=s.group,
        )
        for s in specs
        if s.in_layout
    ]
    return Layout.model_validate(
        {
            "cluster": ClusterConfig(name=name, interval_s=interval_s, window_s=interval_s * 8),
            "pricing": PricingConfig(gpu_hour_usd=2.5),
            "ssh": {"insecure_no_host_key_check": insecure},
            "nodes": nodes,
        }
    )


class FrozenFeed:
    """A feed whose frames come from the real Monitor at fixed instants (deterministic)."""

    def __init__(self, specs: Sequence[NodeSpec], start: float = 1_800_000_000.0, ticks: int = 5,
                 interval_s: float = 1.0, insecure: bool = False, budget_usd: float = 100.0):
        self.layout = make_layout(specs, interval_s=interval_s, insecure=insecure)
        self.layout = self.layout.model_copy(
            update={"session": self.layout.session.model_copy(update={"budget_usd": budget_usd})}
        )
        self.monitor = Monitor(self.layout, sources=[], clock=lambda: start)
        self.monitor.ledger.started_at = start - 3600.0  # an hour into the reservation
        self.frames = []
        for n in range(ticks):
            now = start + n * interval_s
            for spec in specs:
                if spec.silent_after is None or n < spec.silent_after:
                    self.monitor.fleet.ingest(make_sample(spec, n, now, interval_s, "synthetic"))
            self.frames.append(self.monitor.tick(now=now))
        self.stopped = False

    async def start(self, publish: Publish) -> None:
        for frame in self.frames:
            publish(frame)

    async def stop(self) -> None:
        self.stopped = True


async def wait_for(pilot, predicate: Callable[[], bool], timeout_s: float = 60.0) -> None:  # type: ignore[no-untyped-def]
    """Let the app run (and draw) until `predicate()` holds: `until_async` with the Pilot's pause.
    60 s by default: it returns as soon as the predicate holds, and 15 s was seen too short
    for a hunt-list row's evidence to be drawn with make bench beside the suite."""
    await until_async(predicate, timeout_s, "the app", pause=pilot.pause)


def screen_text(app) -> str:  # type: ignore[no-untyped-def]
    """What the terminal shows right now, as plain text (rendered, not widget data)."""
    lines = []
    for strip in app.screen._compositor.render_strips():
        lines.append("".join(segment.text for segment in strip))
    return "\n".join(lines)
