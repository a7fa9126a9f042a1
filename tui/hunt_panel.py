"""The hunt list as an overview panel (registered with `tui.panels` on import).

The overview hands every rendered snapshot to `show_snapshot`; the border title counts
the verdicts so the panel says "all clear" when there is nothing to hunt, once the
monitor has judged every node ("judging — first verdicts in 7 s" before that).
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from infertop.monitor.evaluation.judging import judging_note
from infertop.monitor.evaluation.verdicts import hunt_order
from infertop.monitor.snapshot import Snapshot
from infertop.tui.hunt_list import HuntList
from infertop.tui.panels import register_panel
from infertop.tui.row_table import RowTable


class HuntPanel(Vertical):
    DEFAULT_CSS = """
    HuntPanel {
        height: auto;
        width: 2fr;
        border: round $panel-lighten-2;
        border-title-color: $text-muted;
    }
    HuntPanel > HuntList {
        height: auto;
        max-height: 8;  /* until the overview fits it: `fit_in` */
        overflow-x: hidden;  /* the detail line below shows the evidence in full */
    }
    HuntPanel > #hunt-detail {
        height: auto;
        max-height: 6;
        padding: 0 1;
        border-top: hkey $panel-lighten-2;
    }
    """

    def __init__(self) -> None:
        super().__init__(id="hunt-panel")
        self._shown_title = "hunt list"
        self.border_title = self._shown_title
        # built here, not in compose: the overview may hand over a frame before this
        # panel has composed (the list keeps it until its columns exist)
        self.hunt = HuntList(id="hunt")
        # the selected verdict in full (the table cuts the evidence), wrapping
        self.detail = Static(id="hunt-detail")
        self.detail.display = False
        self._detail_shown: Text | None = None
        self._detail_lines: int | None = None
        self.list_lines: int | None = None  # the lines the overview left the list (`fit_in`)
        self._fitted: tuple[int, int] | None = None

    def _frame_lines(self) -> int:
        """The panel's lines around the list: its border and the detail line under it."""
        detail = self.detail.outer_size.height if self.detail.display else 0
        return self.styles.gutter.height + detail

    def lines_wanted(self) -> int:
        """Every row, its column header and the frame: every flagged node on screen."""
        return self.hunt.row_count + 1 + self._frame_lines()

    def fit_in(self, lines: int) -> None:
        """The overview grants `lines` to the panels' row (`overview.panel_lines`): the
        list takes what the frame leaves; rows past it are said in the title."""
        list_lines = max(lines - self._frame_lines(), 2)
        if (lines, list_lines) != self._fitted:
            self._fitted = (lines, list_lines)
            self.list_lines = list_lines
            self.styles.max_height = lines
            self.hunt.styles.max_height = list_lines
            if self.hunt.snapshot_shown is not None:
                self.show_snapshot(self.hunt.snapshot_shown)  # the title says what is left out

    def rows_left_out(self) -> int:
        """Rows the list has no line for at its height (reached by Tab and ↓)."""
        if self.list_lines is None:
            return 0
        return max(self.hunt.row_count - (self.list_lines - 1), 0)

    def compose(self) -> ComposeResult:
        yield self.hunt
        yield self.detail

    def _detail_folded(self) -> bool:
        # a compact screen keeps its lines for the verdicts and the node table (overview.py)
        return self.is_attached and self.screen.has_class("compact")

    def on_resize(self) -> None:
        self._show_detail()

    def _show_detail(self) -> None:
        text = self.hunt.current_detail()
        self.detail.display = text is not None and not self._detail_folded()
        # it wraps, so a new text reflows the screen, unless it takes as many lines as the
        # one shown (its figures change every frame, its length seldom)
        if text is not None and text != self._detail_shown:
            width = self.detail.content_region.width
            lines = len(text.wrap(self.app.console, width)) if width > 0 else None
            self.detail.update(text, layout=lines is None or lines != self._detail_lines)
            self._detail_shown, self._detail_lines = text, lines

    def on_row_table_columns_changed(self, event: RowTable.ColumnsChanged) -> None:
        if event.table is self.hunt and self.hunt.snapshot_shown is not None:
            self.show_snapshot(self.hunt.snapshot_shown)  # the title says what is hidden

    def on_row_table_row_highlighted(self, event: RowTable.RowHighlighted) -> None:
        if event.table is self.hunt:
            self._show_detail()

    def show_snapshot(self, snapshot: Snapshot) -> None:
        self.hunt.show(snapshot)
        self._show_detail()
        count = len(hunt_order(snapshot.nodes))
        # no verdict before the first verdict window closed is "not judged yet", never
        # "all clear" (the monitor says how long: evaluation.judging)
        judging = judging_note(snapshot.cluster, len(snapshot.nodes))
        title = f"hunt list · {judging}" if judging and not count else "hunt list · all clear"
        if count:
            title = f"hunt list · {count} verdict{'s' if count != 1 else ''}"
            if judging:
                title += f" · {judging}"
        events = len(snapshot.verdict_groups)
        if events:
            title += f" · {events} mass event{'s' if events != 1 else ''}"
        spots = len(snapshot.cluster.shared_blind_spots)
        if spots:
            title = title.replace("all clear", "no node verdict")
            title += f" · {spots} fleet-wide blind spot{'s' if spots != 1 else ''}"
        left_out = self.rows_left_out()
        if left_out:  # never dropped unsaid: the list scrolls to them
            title += f" · +{left_out} more (Tab, ↓)"
        hidden = self.hunt.hidden_columns
        if hidden:  # left out whole at this width: said, and where to see them
            where = "Enter: the node" if self._detail_folded() else "the line below"
            title += f" · {', '.join(hidden)} hidden ({where})"
        if title != self._shown_title:  # setting a title repaints the panel, even the same one
            self._shown_title = title
            self.border_title = title


register_panel(HuntPanel)
