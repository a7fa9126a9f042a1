"""The per-role roll-up strip: prefill pool, decode pool, …, and the whole cluster."""

from __future__ import annotations

from rich import box
from rich.table import Table
from textual.widgets import Static

from infertop.format import fmt_num, fmt_pct, fmt_usd
from infertop.view import RollupView, Snapshot
from tui.text import inert

_HEADERS = ("POOL", "NODES", "GPUS", "UTIL", "STEPS/S", "ACCEPT", "TOK/S", "FULL TOK/S",
            "RUN", "WAIT", "$/H", "IDLE")


def _row(label: str, r: RollupView) -> list[str]:
    return [
        label,
        str(r.nodes),
        str(r.gpus),
        fmt_num(r.util_pct, 0, "%"),
        fmt_num(r.decode_steps_per_s, 1),
        fmt_pct(r.draft_acceptance),
        fmt_num(r.accepted_tokens_per_s, 0),
        fmt_num(r.full_acceptance_tokens_per_s, 0),
        fmt_num(r.requests_running, 0),
        fmt_num(r.requests_waiting, 0),
        fmt_usd(r.cost_per_hour_usd),
        fmt_pct(r.idle_fraction),
    ]


def rollup_table(snapshot: Snapshot) -> Table:
    table = Table(box=box.SIMPLE_HEAD, expand=False, padding=(0, 1), header_style="bold grey70")
    for i, name in enumerate(_HEADERS):
        table.add_column(name, justify="left" if i == 0 else "right", no_wrap=True)
    for role, view in snapshot.cluster.roles.items():
        table.add_row(*(inert(c) for c in _row(f"{role} pool", view)))
    table.add_row(*(inert(c, "bold") for c in _row("cluster", snapshot.cluster.total)))
    return table


class RollupStrip(Static):
    DEFAULT_CSS = """
    RollupStrip { height: auto; padding: 0 1; }
    """

    def show(self, snapshot: Snapshot) -> None:
        self.update(rollup_table(snapshot))
