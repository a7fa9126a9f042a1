"""The monitor: runs the sources, and once per interval turns fleet state into a Snapshot.

Every view (TUI, `snapshot --json`, the session store, the exporter) subscribes to the
same stream of immutable `Snapshot`s; none of them touches sources or fleet state.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import time
from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING

from infertop.collectors.fleet import Fleet, FleetState
from infertop.collectors.process.loop_stalls import (
    KEEP_S,
    LoopStallMeter,
    StallTimeline,
    acquire_meter,
    release_meter,
)
from infertop.collectors.sample import NodeSample
from infertop.collectors.sources.cadence import TICK_LATEST_PHASE, TICK_PHASE, delay_to_boundary
from infertop.collectors.sources.registry import build_sources
from infertop.collectors.sources.routing import route_layout
from infertop.collectors.sources.source import RoundSource, Source
from infertop.monitor.evaluation.cluster import evaluate_cluster, evaluate_nodes
from infertop.monitor.evaluation.conditions import DETAIL_KINDS
from infertop.monitor.evaluation.judging import WarmUp, with_warm_up
from infertop.monitor.evaluation.ledger import SessionLedger, TickFigures
from infertop.monitor.evaluation.mass_events import verdict_groups
from infertop.monitor.evaluation.money import (
    cost_weighted_idle_fraction,
    extras_cost_per_hour_usd,
    idle_cost_per_hour_usd,
)
from infertop.monitor.evaluation.pd_path import pd_paths
from infertop.monitor.evaluation.restart_marks import mark_restarts, recent_restarts, with_restart_verdicts
from infertop.monitor.evaluation.scoreboard import with_live_point
from infertop.monitor.evaluation.timeline import TimelineTracker
from infertop.monitor.evaluation.verdicts import VerdictTracker
from infertop.monitor.evaluation.window_rates import RateCache
from infertop.monitor.format import detail_forms
from infertop.monitor.health import MonitorHealth, suggestion

if TYPE_CHECKING:
    from infertop.monitor.record.store import Recorder
from infertop.layouts.model import Layout, NodeConfig
from infertop.monitor.evaluation.backends import backend_view, unseen_nodes
from infertop.monitor.snapshot import DetailView, NodeView, Snapshot

log = logging.getLogger(__name__)
Listener = Callable[[Snapshot], None]


class Monitor:
    def __init__(
        self,
        layout: Layout,
        sources: Sequence[Source] | None = None,
        clock: Callable[[], float] = time.time,
        recorder: Recorder | None = None,
    ):
        """`recorder`: the session record (monitor.record.store.Recorder): the ledger resumes from
        it, phase marks made elsewhere are taken from it before each tick, and each tick is
        written to it before the listeners see the snapshot. `stop()` closes it."""
        self.layout = layout
        self.clock = clock
        names = [n.name for n in layout.nodes if n.name is not None]
        # keep one window of samples (plus two intervals of slack), `history` at most:
        # evaluation reads no further back, and each node sample is tens of KiB
        cluster_cfg = layout.cluster
        self.state = FleetState(
            names, cluster_cfg.history, retain_s=cluster_cfg.window_s + 2 * cluster_cfg.interval_s
        )
        self.sources = list(sources) if sources is not None else build_sources(layout)
        self.fleet = Fleet(self.state, self.sources)
        self.recorder = recorder
        self.ledger = recorder.ledger if recorder is not None else SessionLedger.for_layout(layout, clock())
        # the ledger counts tokens from counter increases as samples arrive
        self.fleet.listeners.append(self.ledger.tally.observe)
        self.fleet.listeners.append(self.ledger.energy.observe)
        self.verdicts = VerdictTracker()
        # when watching began and each node first answered: "judging" until verdicts can be
        self.warm_up = WarmUp()
        # restarts, health flips and setting changes are seen sample by sample
        self.timeline = TimelineTracker(burst_per_s=layout.thresholds.preemption_burst_per_s)
        self.fleet.listeners.append(self.timeline.observe)
        # each tick's rates from the last tick's: a window only slides by a sample or two
        self.rates = RateCache()
        self.listeners: list[Listener] = []
        self.record_path = str(recorder.path) if recorder is not None else None
        self.latest: Snapshot | None = None
        self._ticker: asyncio.Task[None] | None = None
        # the monitor's own lateness (monitor.health): measured, shown, never blamed on nodes
        self.health = MonitorHealth(cluster_cfg.interval_s)
        self.stall_meter: LoopStallMeter | None = None
        self._read_over_network: int | None = None  # for the advice when lagging
        # the nodes a viewer has in view (a hint passed down; viewers never collect): their
        # detail is read every tick, like that of the nodes a verdict flags
        self.in_view: frozenset[str] = frozenset()
        if layout.prometheus is not None and layout.prometheus.discover:
            self._named = set(names)
            self.fleet.listeners.append(self._adopt_discovered)

    async def start(self, tick: bool = True) -> None:
        # before the sources: their timeouts are measured on the wire against this meter
        if self.stall_meter is None:
            self.stall_meter = acquire_meter()
        self.warm_up.start(self.clock())
        await self.fleet.start()
        if tick:
            self._ticker = asyncio.create_task(self._tick_loop(), name="monitor:tick")

    async def stop(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._ticker
            self._ticker = None
        await self.fleet.stop()
        if self.stall_meter is not None:
            await release_meter(self.stall_meter)
            self.stall_meter = None
        if self.recorder is not None:
            self.recorder.close()

    async def _tick_loop(self) -> None:
        interval = self.layout.cluster.interval_s
        # the first frame as soon as every node has answered once (or failed), at most one
        # interval in: nobody should stare at an empty screen waiting for a boundary
        waiting = {name for name, node in self.state.nodes.items() if not node.samples_seen}
        everyone_heard = asyncio.Event()

        def heard(sample: NodeSample) -> None:
            waiting.discard(sample.node)
            if not waiting:
                everyone_heard.set()

        if waiting:
            self.fleet.listeners.append(heard)
            try:
                async with asyncio.timeout(interval):  # not wait_for: see PollingSource.run
                    await everyone_heard.wait()
            except TimeoutError:
                pass
            finally:
                self.fleet.listeners.remove(heard)
        self._safe_tick()
        # polls read at the same wall-clock instants as the ticks are spaced: a frame waits
        # for their round (collectors.sources.cadence)
        timed = [s for s in self.sources if isinstance(s, RoundSource) and s.interval_s == interval]
        round_in = asyncio.Event()

        def heard_round(_source: RoundSource) -> None:
            round_in.set()

        for source in timed:
            source.round_listeners.append(heard_round)
        try:
            while True:
                # half an interval after the sources' wall-clock reading instants
                now = time.time()
                slot = now + delay_to_boundary(
                    interval, now, offset_s=TICK_PHASE * interval, min_delay_s=0.2 * interval
                )
                await asyncio.sleep(slot - now)
                due, missed = await self._round_in(timed, round_in, slot, interval)
                self.health.tick_ran(due, time.time(), round_missed=missed)
                self._safe_tick()
        finally:
            for source in timed:
                source.round_listeners.remove(heard_round)

    @staticmethod
    async def _round_in(
        timed: Sequence[RoundSource], round_in: asyncio.Event, slot: float, interval: float
    ) -> tuple[float, bool]:
        """Wait, from `slot`, until every timed poll of this slot's reading instant has
        finished, at most until TICK_LATEST_PHASE of an interval after that instant. The
        wall time the tick was then due (what its lateness is measured against), and
        whether it goes without all of that round (the polls' own deadlines come before
        the latest phase, so a round not in by then was slowed by the monitor itself)."""
        reading_at = slot - TICK_PHASE * interval
        latest = reading_at + TICK_LATEST_PHASE * interval
        # a poll that started a little before the instant (a clock step) still counts
        since = reading_at - 0.1 * interval

        def pending() -> bool:
            return any(s.round_started_at is None or s.round_started_at < since for s in timed)

        while pending():
            round_in.clear()
            remaining = latest - time.time()
            if remaining <= 0:
                return latest, True
            try:
                async with asyncio.timeout(remaining):  # not wait_for: see PollingSource.run
                    await round_in.wait()
            except TimeoutError:
                return latest, True
        finished = max((s.round_finished_at or slot for s in timed), default=slot)
        return min(max(slot, finished), latest), False

    def _safe_tick(self) -> None:
        try:
            self.tick()
        except Exception:  # a bug in evaluation must not stop collection
            log.exception("tick failed")

    def tick(self, now: float | None = None) -> Snapshot:
        """Evaluate the fleet at `now`, advance the ledger, publish the snapshot."""
        now = self.clock() if now is None else now
        layout = self.layout
        if self.recorder is not None:
            self._take_phase_marks(self.recorder)
        meter = self.stall_meter
        # built once a tick: each node asks how long the monitor stood still since its
        # sample; its scrape workers' stalls are the monitor's too (collectors.sources.scrape_shards)
        spans = [span for source in self.sources for span in source.stall_spans_wall(now - KEEP_S)]
        if meter is not None:
            spans += meter.spans_wall(now - KEEP_S)
        stalls = StallTimeline(spans) if spans or meter is not None else None
        backends = [b for source in self.sources for b in source.backend_states()]
        # the latency windows: the engines' bucket increases, working data beside the views
        nodes, windows = evaluate_nodes(self.state, layout, now, self.rates, stalls, unseen_nodes(backends))
        restarts = recent_restarts(self.timeline.events, now, layout.cluster.window_s)
        nodes = self.warm_up.mark_reading(nodes, layout, now, stalls)
        nodes = self.verdicts.apply(mark_restarts(nodes, restarts), layout, now)
        nodes = with_restart_verdicts(nodes, restarts, now)
        nodes = self.warm_up.judge(nodes, layout, now)
        detail = self._ask_for_detail(nodes)
        cluster = with_warm_up(evaluate_cluster(nodes, layout, windows), nodes)
        paths = pd_paths(nodes, layout.thresholds, windows)
        idle_pairs = [(n.cost_per_hour_usd, n.idle_fraction) for n in nodes]
        counted = self.ledger.energy.watched_nodes() if layout.pricing.mode == "owned" else set()
        counted_power = {n.name: n.gpu_power_w for n in nodes if n.name in counted}
        self.ledger.advance(
            TickFigures(
                now=now,
                cost_per_hour_usd=cluster.total.cost_per_hour_usd,
                idle_fraction=cost_weighted_idle_fraction(idle_pairs),
                idle_cost_per_hour_usd=idle_cost_per_hour_usd(idle_pairs),
                extras_cost_per_hour_usd=extras_cost_per_hour_usd(layout.pricing),
                node_cost_per_hour_usd={n.name: n.cost_per_hour_usd for n in nodes},
                deltas=self.ledger.tally.drain(),
                accepted_tokens_per_s=cluster.total.accepted_tokens_per_s,
                energy_j_by_node=self.ledger.energy.drain(),
                counted_gpu_power_w=counted_power,
            )
        )
        session = with_live_point(self.ledger.view(now, self.record_path, self.layout.slo), cluster)
        snapshot = Snapshot(
            taken_at=dt.datetime.fromtimestamp(now, dt.UTC).isoformat(),
            window_s=layout.cluster.window_s,
            cluster=cluster,
            session=session,
            nodes=nodes,
            monitor=self.health.view(meter, sum(n.monitor_late for n in nodes), self._advice()),
            verdict_groups=verdict_groups(nodes, layout.cluster.interval_s),
            backends=[backend_view(b) for b in backends],
            detail=detail,
            timeline=self.timeline.update(nodes, session, now),
            pd_paths=paths,
        )
        self.latest = snapshot
        if self.recorder is not None:
            self.recorder.write(snapshot, now)
        for listener in self.listeners:
            try:
                listener(snapshot)
            except Exception:
                log.exception("snapshot listener failed")
        return snapshot

    def set_in_view(self, nodes: Collection[str]) -> None:  # a viewer's hint (monitor/feeds.py)
        """The nodes a viewer shows now: their detail is read every tick from the next round."""
        self.in_view = frozenset(nodes)

    def _ask_for_detail(self, nodes: Sequence[NodeView]) -> DetailView | None:
        """Tell the sources whose detail is wanted every tick: the nodes in view and those a
        verdict flags (its evidence is per GPU: a verdict asks for its node's detail);
        and say how much detail the last round read."""
        wanted = self.in_view | {n.name for n in nodes if any(v.kind in DETAIL_KINDS for v in n.verdicts)}
        view = None
        for source in self.sources:
            source.want_detail(wanted)
            plan = source.detail_read()
            if plan is not None and view is None:
                note = detail_forms(plan.count, plan.total, plan.every_s)[0]
                view = DetailView(nodes=plan.count, of=plan.total, every_s=plan.every_s,
                                  wanted=plan.wanted, note=note)
        return view

    def _advice(self) -> str:
        layout = self.layout
        if self._read_over_network is None:  # discovered nodes are PromQL's: the count holds
            self._read_over_network = route_layout(layout).read_over_network()
        return suggestion(layout.cluster.interval_s, self._read_over_network, layout.prometheus is not None)

    def _take_phase_marks(self, recorder: Recorder) -> None:
        """Phases marked by `infertop phase` (into the record) count from their instant.
        A record that cannot be read now must not stop the tick: the marks wait."""
        try:
            marks = recorder.take_phase_marks()
        except Exception:
            log.exception("phase marks could not be read from the session record")
            return
        for at, phase in marks:
            try:
                self.ledger.mark_phase(phase, at)
            except ValueError as exc:  # a bad name from an old CLI: say so, keep going
                log.warning("phase mark ignored: %s", exc)

    def _adopt_discovered(self, sample: NodeSample) -> None:
        """A node found in Prometheus joins the layout: its role, priced per GPU seen."""
        if not sample.ok or sample.node in self._named:
            return
        self._named.add(sample.node)
        assert self.layout.prometheus is not None
        node = NodeConfig(name=sample.node, role=self.layout.prometheus.discover_role)
        self.layout = self.layout.model_copy(update={"nodes": [*self.layout.nodes, node]})

    def mark_phase(self, phase: str, at: float | None = None) -> None:
        """Attribute spend from `at` (default: now) on to `phase` (build, load, run, …)."""
        self.ledger.mark_phase(phase, self.clock() if at is None else at)
