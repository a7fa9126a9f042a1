"""The overview table's columns: what each shows for a node, and how rows sort.

Pure (Rich `Text` only, no Textual) so rendering and sorting are tested without an app.
Every cell built from outside data goes through `tui.text.inert`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rich.console import JustifyMethod as Justify
from rich.text import Text

from infertop.monitor.evaluation.verdicts import node_hunt_key
from infertop.monitor.format import (
    UNKNOWN,
    figure_forms,
    fmt_age,
    fmt_bytes_pair,
    fmt_num,
    fmt_pct,
    fmt_power_w,
    fmt_rate_gbps,
    links_text,
)
from infertop.monitor.snapshot import NodeView
from infertop.tui.row_table import FigureText
from infertop.tui.text import inert

# Calm at 3 a.m.: plain text for normal figures, grey for old ones, yellow for worth a
# look, red only for trouble.
GREY = "grey50"
WARN = "yellow"
TROUBLE = "bold red"
# the STATUS column sorts by the node's standing (monitor.evaluation.judging), worst first
STATUS_ORDER = {"error": 0, "unreachable": 1, "critical": 2, "stale": 3, "warning": 4,
                "unknown": 5, "reading": 6, "judging": 7, "ok": 8}
SEVERITY_STYLE = {"critical": TROUBLE, "warning": WARN, "info": "cyan"}


def _cell(text: str, style: str = "", justify: str = "right") -> Text:
    return Text(text, style=style, justify=justify, no_wrap=True)  # type: ignore[arg-type]


def figure_cell(value: float | None, digits: int = 1, unit: str = "", money: bool = False) -> Text:
    """A figure that a narrow column writes shorter by the one rule, never cut."""
    return FigureText(figure_forms(value, digits, unit, money))


def slowest_rank_short(node: NodeView) -> str | None:
    """"e5": the rank the monitor named as pacing the node's steps/s, where it named one."""
    e = node.engine
    if e is None or e.slowest_rank is None:
        return None
    rank = next((r for r in e.ranks or () if r.label == e.slowest_rank), None)
    return f"e{rank.dp_rank}" if rank is not None and rank.dp_rank is not None else None


def steps_cell(node: NodeView) -> Text:
    """The node's decode steps/s (its slowest busy rank's, where ranks are known) with that
    rank beside it ("16.1 e5"); a narrow column drops the rank before shortening the figure."""
    forms = figure_forms(_engine("decode_steps_per_s")(node), 1)
    rank = slowest_rank_short(node)
    return FigureText(tuple(f"{f} {rank}" for f in forms) + forms if rank else forms)


def name_cell(node: NodeView) -> Text:
    return inert(node.name, max_len=64)


def standing(node: NodeView) -> str:
    """The word the STATUS column draws and the filter matches: the monitor's standing
    (reachability and verdicts, monitor.evaluation.judging); a record written before it
    has the status alone."""
    return node.standing or node.status


_STANDING_CELLS = {"ok": ("ok", "green"), "judging": ("judging", GREY), "reading": ("reading", GREY),
                   "warning": ("warning", WARN), "critical": ("critical", TROUBLE)}


def status_cell(node: NodeView) -> Text:
    age = fmt_age(node.age_s) if node.age_s is not None else "never"
    word = standing(node)
    if word in _STANDING_CELLS:
        text, style = _STANDING_CELLS[word]
        return _cell(text, style, "left")
    if word == "stale":
        return _cell(f"stale {age}", GREY, "left")
    if word == "unreachable":
        return _cell(f"UNREACH {age}", TROUBLE, "left")
    if word == "unknown":  # its backend is down: said once in the header
        return _cell(f"unknown {age}", GREY, "left")
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


SortValue = float | str | tuple[float, ...] | None


@dataclass(frozen=True)
class Column:
    key: str
    label: str
    width: int | None  # None: fit the content (names, verdicts)
    render: Callable[[NodeView], Text]
    # sort value (None sorts last); absent: the column is not offered for sorting
    value: Callable[[NodeView], SortValue] | None = None
    descending: bool = True  # worst first: True when a higher value is worse
    # on a narrow terminal the lowest-priority columns are left out first
    priority: int = 0
    # where the label stands: over the column's cells (numbers to the right, as `_cell`)
    justify: Justify = "right"


def _rx(node: NodeView) -> float | None:
    return node.rx_bytes_per_s


def _tx(node: NodeView) -> float | None:
    return node.tx_bytes_per_s


def _gpus_seen_fraction(node: NodeView) -> float | None:
    # drawn from two given numbers: the GPUs seen against the GPUs the layout names
    if node.gpus_expected:
        return len(node.gpus) / node.gpus_expected
    return None


def _links_value(node: NodeView) -> tuple[float, ...] | None:
    links = node.links
    if links is None or links.total == 0:
        return None
    return (0.0 if links.trouble else 1.0, links.up / links.total)


def _mem_used_fraction(node: NodeView) -> float | None:
    used, total = node.gpu_mem_used_bytes, node.gpu_mem_total_bytes
    return used / total if used is not None and total else None


# In the order the hunt needs them: what is wrong, what it costs, how busy it is, then
# the detail (links, GPUs, power, memory, network). NODE is frozen at the left.
COLUMNS: tuple[Column, ...] = (
    Column("name", "NODE", None, name_cell, lambda n: n.name, descending=False, priority=100,
           justify="left"),
    Column("status", "STATUS", 12, status_cell,
           lambda n: STATUS_ORDER.get(standing(n), 9), descending=False, priority=95, justify="left"),
    # severity first, then the dollars per hour at stake (monitor's hunt key)
    Column("verdicts", "VERDICTS", 22, verdicts_cell, node_hunt_key, descending=False, priority=90,
           justify="left"),
    Column("cost", "$/H", 9, lambda n: figure_cell(n.cost_per_hour_usd, 2, money=True),
           lambda n: n.cost_per_hour_usd, priority=88),
    Column("idle", "IDLE", 5, idle_cell, lambda n: n.idle_fraction, priority=87),
    Column("util", "UTIL", 5, lambda n: _cell(fmt_num(n.gpu_util_pct, 0, "%")), lambda n: n.gpu_util_pct,
           descending=False, priority=80),
    Column("steps", "STEPS/S", 8, steps_cell, _engine("decode_steps_per_s"), descending=False, priority=78),
    Column("tokens", "TOK/S", 8, lambda n: figure_cell(_engine("accepted_tokens_per_s")(n), 0),
           _engine("accepted_tokens_per_s"), descending=False, priority=76),
    Column("links", "LINKS", 13, links_cell, _links_value, descending=False, priority=74, justify="left"),
    Column("accept", "ACCEPT", 7, lambda n: _cell(fmt_pct(_engine("draft_acceptance")(n))),
           _engine("draft_acceptance"), descending=False, priority=60),
    Column("gpus", "GPUS", 5, gpus_cell, _gpus_seen_fraction, descending=False, priority=58),
    Column("role", "ROLE", 7, lambda n: _cell(n.role, justify="left"), lambda n: n.role,
           descending=False, priority=55, justify="left"),
    Column("power", "POWER", 8, lambda n: _cell(fmt_power_w(n.gpu_power_w)), lambda n: n.gpu_power_w,
           descending=False, priority=45),
    Column("mem", "GPU MEM", 13,
           lambda n: _cell(fmt_bytes_pair(n.gpu_mem_used_bytes, n.gpu_mem_total_bytes)),
           _mem_used_fraction, priority=30),
    Column("rx", "NET RX", 10, lambda n: _cell(fmt_rate_gbps(_rx(n))), _rx, descending=False, priority=40),
    Column("tx", "NET TX", 10, lambda n: _cell(fmt_rate_gbps(_tx(n))), _tx, descending=False, priority=39),
)
COLUMN_KEYS = tuple(c.key for c in COLUMNS)
_GREYED = ("stale", "unreachable", "unknown")


def render_row(node: NodeView) -> tuple[Text, ...]:
    """The cells of a node's row. A stale or unreachable node's last values are greyed."""
    cells = tuple(column.render(node) for column in COLUMNS)
    if node.status in _GREYED:
        for key, cell in zip(COLUMN_KEYS, cells, strict=True):
            if key not in ("status", "verdicts"):
                cell.stylize(GREY)
    return cells


def row_cell(cells: tuple[Text, ...], key: str) -> Text:
    return cells[COLUMN_KEYS.index(key)]


# -- sorting -------------------------------------------------------------------------

# Rows swap places only when their values differ by more than this fraction: figures
# that jitter tick to tick must not reshuffle the table.
SORT_MARGIN = 0.05


@dataclass(frozen=True)
class SortSpec:
    label: str
    column: str | None  # None: the layout's order
    reverse: bool = False  # False: worst first


SORTS: tuple[SortSpec, ...] = (
    SortSpec("layout", None),
    *(SortSpec(c.label.lower(), c.key) for c in COLUMNS if c.value is not None),
)
_BY_KEY = {c.key: c for c in COLUMNS}
SORTABLE = tuple(c.key for c in COLUMNS if c.value is not None)


def sort_spec(column: str | None, reverse: bool = False) -> SortSpec:
    """The sort by `column` (None: the layout's order), worst first unless `reverse`."""
    if column is None:
        return SortSpec("layout", None)
    label = _BY_KEY[column].label.lower()
    return SortSpec(label + (" (reversed)" if reverse else ""), column, reverse)


def sort_arrow(spec: SortSpec) -> str:
    """▼ when the column's higher values come first, ▲ when its lower ones do."""
    if spec.column is None:
        return ""
    higher_first = _BY_KEY[spec.column].descending != spec.reverse
    return "▼" if higher_first else "▲"


def sort_order(
    nodes: list[NodeView],
    spec: SortSpec,
    previous: list[str] | None = None,
    margin: float = SORT_MARGIN,
) -> list[str]:
    """Node names in display order. Unknown values last; ties keep the layout's order.

    With `previous` (the order shown last frame, same sort), rows keep that order unless
    a row's value is beyond `margin` (a fraction) worse than the row above it: jitter
    does not reshuffle the table, a real change still does."""
    if spec.column is None:
        return [n.name for n in nodes]
    column = _BY_KEY[spec.column]
    assert column.value is not None
    get = column.value
    higher_first = column.descending != spec.reverse
    values = {n.name: get(n) for n in nodes}
    layout = [n.name for n in nodes]
    known = [name for name in layout if values[name] is not None]
    unknown = [name for name in layout if values[name] is None]
    if previous is None:
        known.sort(key=lambda name: _Ordered(values[name], higher_first))
        return known + unknown
    place = {name: i for i, name in enumerate(previous)}
    start = sorted(known, key=lambda name: place.get(name, len(place)))
    unknown.sort(key=lambda name: place.get(name, len(place)))
    return _settle(start, values, higher_first, margin) + unknown


class _Ordered:
    """A sort key putting worse values first (`higher_first` or not), for any value."""

    def __init__(self, value: SortValue, higher_first: bool) -> None:
        self.value = value
        self.higher_first = higher_first

    def __lt__(self, other: _Ordered) -> bool:
        return _before(self.value, other.value, self.higher_first, 0.0)


def _settle(names: list[str], values: dict[str, SortValue], higher_first: bool, margin: float) -> list[str]:
    """Insertion sort from the previous order: a row moves up past another only when it
    is clearly (beyond `margin`) before it. Cheap when little changed (it is adaptive)."""
    out: list[str] = []
    for name in names:
        i = len(out)
        while i > 0 and _before(values[name], values[out[i - 1]], higher_first, margin):
            i -= 1
        out.insert(i, name)
    return out


def _before(a: SortValue, b: SortValue, higher_first: bool, margin: float) -> bool:
    """`a` sorts clearly before `b`: numbers must differ by more than `margin` of the
    larger magnitude; text and ranks compare exactly; tuples element by element."""
    if isinstance(a, tuple) and isinstance(b, tuple):
        for x, y in zip(a, b, strict=False):
            if _before(x, y, higher_first, margin):
                return True
            if _before(y, x, higher_first, margin):
                return False
        return False
    if isinstance(a, int | float) and isinstance(b, int | float):
        if abs(a - b) <= margin * max(abs(a), abs(b)):
            return False
        return a > b if higher_first else a < b
    if isinstance(a, str) and isinstance(b, str):
        return a > b if higher_first else a < b
    return False
