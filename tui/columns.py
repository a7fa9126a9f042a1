"""The overview table's columns: what each shows for a node, and how rows sort.

Pure (Rich `Text` only, no Textual) so rendering and sorting are tested without an app.
Every cell built from outside data goes through `tui.text.inert`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rich.text import Text

from monitor.format import (
    UNKNOWN,
    fmt_age,
    fmt_bytes_pair,
    fmt_num,
    fmt_pct,
    fmt_power_w,
    fmt_rate_gbps,
    fmt_usd,
    links_text,
)
from monitor.snapshot import NodeView
from tui.text import inert

# Calm at 3 a.m.: plain text for normal figures, grey for old ones, yellow for worth a
# look, red only for trouble.
GREY = "grey50"
WARN = "yellow"
TROUBLE = "bold red"
STATUS_ORDER = {"error": 0, "unreachable": 1, "stale": 2, "ok": 3}
SEVERITY_STYLE = {"critical": TROUBLE, "warning": WARN, "info": "cyan"}


def _cell(text: str, style: str = "", justify: str = "right") -> Text:
    return Text(text, style=style, justify=justify, no_wrap=True)  # type: ignore[arg-type]


def name_cell(node: NodeView) -> Text:
    return inert(node.name, max_len=64)


def status_cell(node: NodeView) -> Text:
    age = fmt_age(node.age_s) if node.age_s is not None else "never"
    if node.status == "ok":
        return _cell("ok", "green", "left")
    if node.status == "stale":
        return _cell(f"stale {age}", GREY, "left")
    if node.status == "unreachable":
        return _cell(f"UNREACH {age}", TROUBLE, "left")
    return _cell("ERROR", TROUBLE, "left")


def gpus_cell(node: NodeView) -> Text:
    seen, expected = len(node.gpus), node.gpus_expected
    if expected is not None and seen != expected and node.status == "ok":
        return _cell(f"{seen}/{expected}", TROUBLE)
    if seen == 0 and expected is None:
        return _cell(UNKNOWN)
    return _cell(str(seen if seen else expected))


def links_cell(node: NodeView) -> Text:
    trouble = node.links is not None and node.links.trouble
    return _cell(links_text(node.links), TROUBLE if trouble else "", "left")


def idle_cell(node: NodeView) -> Text:
    idle = node.idle_fraction
    return _cell(fmt_pct(idle), WARN if idle is not None and idle >= 0.5 else "")


def verdicts_cell(node: NodeView) -> Text:
    if not node.verdicts:
        return Text("")
    out = Text(no_wrap=True, overflow="ellipsis")
    for i, verdict in enumerate(node.verdicts):
        if i:
            out.append(" ")
        out.append(inert(verdict.kind, max_len=24).plain, SEVERITY_STYLE.get(verdict.severity, ""))
    return out


def _engine(attr: str) -> Callable[[NodeView], float | None]:
    def get(node: NodeView) -> float | None:
        value: float | None = getattr(node.engine, attr) if node.engine is not None else None
        return value

    return get


@dataclass(frozen=True)
class Column:
    key: str
    label: str
    width: int | None  # None: fit the content (names, verdicts)
    render: Callable[[NodeView], Text]
    # sort value (None sorts last); absent: the column is not offered for sorting
    value: Callable[[NodeView], float | str | None] | None = None
    descending: bool = True  # "worst first" for a column that is offered for sorting


def _rx(node: NodeView) -> float | None:
    return node.rx_bytes_per_s


def _tx(node: NodeView) -> float | None:
    return node.tx_bytes_per_s


COLUMNS: tuple[Column, ...] = (
    Column("name", "NODE", None, name_cell, lambda n: n.name, descending=False),
    Column("role", "ROLE", 7, lambda n: _cell(n.role, justify="left")),
    Column("status", "STATUS", 11, status_cell,
           lambda n: STATUS_ORDER.get(n.status, 9), descending=False),
    # what the operator hunts stays in view on a narrow terminal: right after the status
    Column("verdicts", "VERDICTS", 22, verdicts_cell),
    Column("gpus", "GPUS", 5, gpus_cell),
    Column("util", "UTIL", 5, lambda n: _cell(fmt_num(n.gpu_util_pct, 0, "%")), lambda n: n.gpu_util_pct),
    Column("mem", "GPU MEM", 13,
           lambda n: _cell(fmt_bytes_pair(n.gpu_mem_used_bytes, n.gpu_mem_total_bytes))),
    Column("power", "POWER", 8, lambda n: _cell(fmt_power_w(n.gpu_power_w)), lambda n: n.gpu_power_w),
    Column("rx", "NET RX", 10, lambda n: _cell(fmt_rate_gbps(_rx(n))), _rx),
    Column("tx", "NET TX", 10, lambda n: _cell(fmt_rate_gbps(_tx(n))), _tx),
    Column("links", "LINKS", 12, links_cell),
    Column("steps", "STEPS/S", 8, lambda n: _cell(fmt_num(_engine("decode_steps_per_s")(n), 1)),
           _engine("decode_steps_per_s"), descending=False),
    Column("accept", "ACCEPT", 6, lambda n: _cell(fmt_pct(_engine("draft_acceptance")(n))),
           _engine("draft_acceptance"), descending=False),
    Column("tokens", "TOK/S", 8, lambda n: _cell(fmt_num(_engine("accepted_tokens_per_s")(n), 0)),
           _engine("accepted_tokens_per_s")),
    Column("cost", "$/H", 9, lambda n: _cell(fmt_usd(n.cost_per_hour_usd)), lambda n: n.cost_per_hour_usd),
    Column("idle", "IDLE", 5, idle_cell, lambda n: n.idle_fraction),
)
COLUMN_KEYS = tuple(c.key for c in COLUMNS)
_GREYED = ("stale", "unreachable")


def render_row(node: NodeView) -> tuple[Text, ...]:
    """The cells of a node's row. A stale or unreachable node's last values are greyed."""
    cells = tuple(column.render(node) for column in COLUMNS)
    if node.status in _GREYED:
        for key, cell in zip(COLUMN_KEYS, cells, strict=True):
            if key not in ("status", "verdicts"):
                cell.stylize(GREY)
    return cells


# -- sorting -------------------------------------------------------------------------

@dataclass(frozen=True)
class SortSpec:
    label: str
    column: str | None  # None: the layout's order


SORTS: tuple[SortSpec, ...] = (
    SortSpec("layout", None),
    *(SortSpec(c.label.lower(), c.key) for c in COLUMNS if c.value is not None),
)
_BY_KEY = {c.key: c for c in COLUMNS}


def sort_order(nodes: list[NodeView], spec: SortSpec) -> list[str]:
    """Node names in display order. Unknown values last; ties keep the layout's order."""
    if spec.column is None:
        return [n.name for n in nodes]
    column = _BY_KEY[spec.column]
    assert column.value is not None
    get = column.value
    known = [(get(n), i, n.name) for i, n in enumerate(nodes) if get(n) is not None]
    unknown = [n.name for n in nodes if get(n) is None]
    if column.descending:
        known.sort(key=lambda t: (_neg(t[0]), t[1]))
    else:
        known.sort(key=lambda t: (t[0], t[1]))  # type: ignore[arg-type,return-value]
    return [name for _, _, name in known] + unknown


def _neg(value: object) -> object:
    return -value if isinstance(value, int | float) else value
