"""One node up close: a row per GPU (with sparklines), a row per NIC / IB port, the
engine block, host figures, verdicts, notes and error. Esc goes back."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import Static

from infertop.monitor.snapshot import NodeView, Snapshot
from infertop.tui.footer import FitFooter
from infertop.tui.frames import FrameScreen, FrameState
from infertop.tui.history import History
from infertop.tui.node_engines import RANK_COLUMNS, activity_text, rank_rows
from infertop.tui.node_rows import (
    GPU_COLUMNS,
    NIC_COLUMNS,
    SPARK_WIDTH,
    engine_text,
    gpu_row,
    host_text,
    nic_row,
    notes_text,
    scale_text,
    title_text,
)
from infertop.tui.row_table import RowTable
from infertop.tui.sections import SECTION_BINDINGS, Section, SectionKeys
from infertop.tui.text import inert
from infertop.tui.timeline_text import event_line, node_events, settings_text


class NodeScreen(SectionKeys, FrameScreen):
    BINDINGS = [Binding("escape", "app.pop_screen", "Back", tooltip="Back to the overview"),
                *SECTION_BINDINGS]

    def __init__(self, node: str, history: History, frames: FrameState) -> None:
        super().__init__(frames, classes="node-screen")
        self.node = node
        self.history = history

    def nodes_in_view(self) -> list[str]:
        return [self.node]

    def compose(self) -> ComposeResult:
        self.title_bar = Static(inert(self.node, "bold"), id="node-title")
        self.gpu_title = Static(Text("GPUS", "bold"), classes="section", id="gpu-title")
        # the GPU index and the port name stay put when the rest scroll sideways
        # ↑/↓ move a table's cursor; PgUp/PgDn/Home/End scroll the page (sections.py)
        self.gpu_table = RowTable(GPU_COLUMNS, frozen=1, page_keys=False, id="gpus")
        self.nic_table = RowTable(NIC_COLUMNS, frozen=1, page_keys=False, id="nics")
        self.engine_block = Static(id="engine")
        self.host_block = Static(id="host")
        self.notes_block = Static(id="notes")
        # per-rank engines, GPU activity and processes: shown only where the node has them
        self.ranks_title = Static(Text("ENGINES (one row per data-parallel rank)", "bold"), classes="section")
        self.ranks_table = RowTable(RANK_COLUMNS, frozen=1, page_keys=False, id="ranks")
        self.activity_block = Static(id="activity")
        for hidden in (self.ranks_title, self.ranks_table, self.activity_block):
            hidden.display = False
        self.settings_block = Static(id="node-settings")
        self.events_block = Static(id="node-events")
        self.nic_title = Static(Text("NETWORK", "bold"), classes="section")
        self.engine_row = Horizontal(self.engine_block, self.host_block, id="engine-row")
        self.settings_title = Static(Text("ENGINE SETTINGS (≠ differs from the pool)", "bold"),
                                     classes="section")
        self.events_title = Static(Text("TIMELINE (this node and the cluster's phases)", "bold"),
                                   classes="section")
        self.scroll_body = VerticalScroll(id="node-body")
        yield self.title_bar
        with self.scroll_body:
            yield self.gpu_title
            yield self.gpu_table
            yield self.nic_title
            yield self.nic_table
            yield self.engine_row
            yield self.ranks_title
            yield self.ranks_table
            yield self.activity_block
            yield self.notes_block
            yield self.settings_title
            yield self.settings_block
            yield self.events_title
            yield self.events_block
        yield FitFooter()

    def sections(self) -> list[Section]:
        """In reading order; Tab goes from one to the next (sections.py)."""
        return [
            Section("GPUS", self.gpu_title, self.gpu_table),
            Section("NETWORK", self.nic_title, self.nic_table),
            Section("ENGINE", self.engine_row),
            Section("ENGINES", self.ranks_title, self.ranks_table),
            Section("ACTIVITY", self.activity_block),
            Section("NOTES", self.notes_block),
            Section("ENGINE SETTINGS", self.settings_title),
            Section("TIMELINE", self.events_title),
        ]

    def on_mount(self) -> None:
        self.gpu_table.focus()
        self.show_latest()

    def find(self, snapshot: Snapshot) -> NodeView | None:
        for node in snapshot.nodes:
            if node.name == self.node:
                return node
        return None

    def show_snapshot(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        node = self.find(snapshot)
        if node is None:
            gone = Text.assemble(inert(self.node, "bold"), ("  no longer in the cluster", "grey50"))
            self.title_bar.update(gone)
            return
        self.title_bar.update(self.with_news(title_text(node)))
        h = self.history
        # sparklines share a scale across the node's pool (drawn values only): a
        # straggler's line sits lower than its peers' instead of filling its own cell
        pool = [n for n in snapshot.nodes if n.role == node.role]
        power_top = h.peak(h.gpu_power, [(n.name, g.index) for n in pool for g in n.gpus], SPARK_WIDTH)
        steps_top = h.peak(h.node_steps, [n.name for n in pool], SPARK_WIDTH * 2)
        self.gpu_title.update(scale_text(node.role, len(pool), power_top))
        self.gpu_table.sync(
            (
                str(gpu.index),
                gpu_row(
                    gpu,
                    h.values(h.gpu_util, (node.name, gpu.index)),
                    h.values(h.gpu_power, (node.name, gpu.index)),
                    power_top,
                ),
            )
            for gpu in node.gpus
        )
        self.nic_table.sync((nic.name, nic_row(nic)) for nic in node.nics)
        steps = h.values(h.node_steps, node.name)
        self.engine_block.update(engine_text(node.engine, steps, steps_top, node.role))
        self.host_block.update(host_text(node.host))
        ranks = list(rank_rows(node.engine))
        self.ranks_table.sync(ranks)
        self.ranks_title.display = self.ranks_table.display = bool(ranks)
        activity = activity_text(node.gpus)
        self.activity_block.update(activity)
        self.activity_block.display = bool(activity.plain)
        notes = notes_text(node)
        self.notes_block.update(notes)
        self.notes_block.display = bool(notes.plain)
        self.settings_block.update(settings_text(node))
        events = node_events(snapshot.timeline, node.name)
        self.events_block.update(
            Text("\n").join(event_line(e, with_node=False) for e in events) if events
            else Text("nothing yet", "grey50")
        )
