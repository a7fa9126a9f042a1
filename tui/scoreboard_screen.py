"""`b`: the scoreboard — where the running cluster stands on the published throughput /
interactivity chart, latency people feel, the cache and the disaggregated path, and
(where the snapshot has them) break-even and energy. Esc goes back."""

from __future__ import annotations

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import Static

from infertop.monitor.snapshot import Snapshot
from infertop.tui.footer import FitFooter
from infertop.tui.frames import FrameScreen, FrameState
from infertop.tui.history import History
from infertop.tui.pd_path_text import pd_paths_text
from infertop.tui.scoreboard_text import (
    cache_table,
    latency_table,
    money_text,
    node_points_table,
    scatter,
    throughput_table,
)
from infertop.tui.sections import SECTION_BINDINGS, Section, SectionKeys
from infertop.tui.text import inert

# narrower than this, the table of points goes under the chart, not beside it (squeezed
# beside it, its figures were cut: "1,…", "TO…")
SIDE_BY_SIDE_FROM = 110


class ScoreboardScreen(SectionKeys, FrameScreen):
    BINDINGS = [Binding("escape", "app.pop_screen", "Back", tooltip="Back to the overview"),
                *SECTION_BINDINGS]

    def __init__(self, history: History, frames: FrameState) -> None:
        super().__init__(frames, classes="scoreboard-screen")
        self.history = history

    def compose(self) -> ComposeResult:
        self.plot = Static(id="scoreboard-plot")
        self.points = Static(id="scoreboard-points")
        self.source = Static(id="scoreboard-source")
        self.money = Static(id="scoreboard-money")
        self.latency = Static(id="scoreboard-latency")
        self.cache = Static(id="scoreboard-cache")
        self.pd_title = Static(
            Text("THE PREFILL → DECODE PATH (KV transfers beside both ends' network)", "bold"),
            classes="section")
        self.pd_path = Static(id="scoreboard-pd-path")
        self.node_points = Static(id="scoreboard-node-points")
        self.scroll_body = VerticalScroll(id="scoreboard-body")
        self.top = Horizontal(id="scoreboard-top")
        self.latency_title = Static(
            Text("LATENCY over the window (p50 / p99, within the bucket shown)", "bold"), classes="section")
        self.cache_title = Static(Text("CACHE AND THE DISAGGREGATED PATH", "bold"), classes="section")
        self.nodes_title = Static(
            Text("THROUGHPUT PER POOL AND NODE (accepted tokens/s ÷ GPUs, ÷ mean running)", "bold"),
            classes="section")
        self.title_bar = Static(Text("SCOREBOARD", "bold"), id="scoreboard-title")
        self._title_shown: Text | None = None
        yield self.title_bar
        with self.scroll_body:
            with self.top:
                yield self.plot
                with VerticalScroll(id="scoreboard-side", can_focus=False):
                    yield self.points
                    yield self.source
                    yield self.money
            yield self.latency_title
            yield self.latency
            yield self.pd_title
            yield self.pd_path
            yield self.cache_title
            yield self.cache
            yield self.nodes_title
            yield self.node_points
        yield FitFooter()

    def sections(self) -> list[Section]:
        """In reading order; Tab goes from one to the next (sections.py)."""
        return [
            Section("CHART", self.top),
            Section("LATENCY", self.latency_title),
            Section("PREFILL → DECODE", self.pd_title),
            Section("CACHE", self.cache_title),
            Section("THROUGHPUT PER POOL AND NODE", self.nodes_title),
        ]

    def on_resize(self, event: events.Resize) -> None:
        self.set_class(event.size.width < SIDE_BY_SIDE_FROM, "narrow")

    def on_mount(self) -> None:
        self.scroll_body.focus()  # ↑/↓ scroll it from the start
        self.show_latest()

    def show_snapshot(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        title = self.with_news(Text("SCOREBOARD", "bold"))
        if title != self._title_shown:
            self._title_shown = title
            self.title_bar.update(title)
        s = snapshot.session
        refs = [(p.label, (p.output_tokens_per_s_per_user, p.output_tokens_per_s_per_gpu))
                for p in snapshot.cluster.reference_points]
        live = None
        full = None
        if s.output_tokens_per_s_per_user is not None and s.output_tokens_per_s_per_gpu is not None:
            live = (s.output_tokens_per_s_per_user, s.output_tokens_per_s_per_gpu)
            if s.full_acceptance_tokens_per_s_per_gpu is not None:
                full = (s.output_tokens_per_s_per_user, s.full_acceptance_tokens_per_s_per_gpu)
        trail = [p for p in list(self.history.live_point)[:-1] if p is not None]
        self.plot.update(scatter(refs, live, full, trail))
        self.points.update(throughput_table(snapshot))
        source = snapshot.cluster.reference_source
        self.source.update(Text.assemble(
            ("references: ", "grey50"), inert(source or "none", "grey50", max_len=160),
            ("\nper GPU = accepted tokens/s ÷ the pool's GPUs; per user = ÷ its mean running "
             "requests", "grey50"),
        ))
        self.money.update(money_text(s))
        self.latency.update(latency_table(snapshot))
        self.cache.update(cache_table(snapshot))
        self.pd_path.update(pd_paths_text(snapshot))
        self.pd_title.display = self.pd_path.display = bool(snapshot.pd_paths)
        self.node_points.update(node_points_table(snapshot))
