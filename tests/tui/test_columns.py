"""The TUI's pure parts: inert text, sparklines, filter, column rendering and sorting,
history bounds, format helpers."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infertop.collectors.safe_text import inert_text
from infertop.monitor.evaluation.link_summary import gpu_sums
from infertop.monitor.format import fmt_bytes_pair, fmt_power_w
from infertop.monitor.snapshot import EngineView, GpuView, NodeView, VerdictView
from infertop.tui.columns import (
    COLUMN_KEYS,
    GREY,
    SORTS,
    TROUBLE,
    SortSpec,
    render_row,
    row_cell,
    sort_arrow,
    sort_order,
    sort_spec,
    status_cell,
)
from infertop.tui.filtering import NodeFilter
from infertop.tui.sparkline import sparkline
from infertop.tui.text import inert


def node(name: str = "n1", **kw: object) -> NodeView:
    """A node view as the evaluation makes it: its GPU sums from its GPUs."""
    base: dict[str, object] = {"name": name, "role": "decode", "status": "ok"}
    base.update(kw)
    gpus = [g if isinstance(g, GpuView) else GpuView.model_validate(g) for g in base.get("gpus", [])]  # type: ignore[attr-defined]
    base.update(gpu_sums(gpus))
    return NodeView.model_validate(base)


# -- inert text --------------------------------------------------------------------

@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("[red]x[/]", "[red]x[/]"),
        ("\x1b[31mred\x1b[0m", "\\x1b[31mred\\x1b[0m"),
        ("a\x1b]8;;http://evil\x1b\\link\x1b]8;;\x1b\\b", "a\\x1b]8;;http://evil\\x1b\\link\\x1b]8;;\\x1b\\b"),
        ("two\nlines\tand\rtabs", "two lines and tabs"),
        ("bell\x07 nul\x00 c1\x9b", "bell\\x07 nul\\x00 c1\\x9b"),
        ("rtl\u202eoverride", "rtl\\u202eoverride"),
    ],
)
def test_inert_shows_escapes_visibly_and_markup_literally(raw: str, shown: str) -> None:
    assert inert_text(raw) == shown
    text = inert(raw)
    assert text.plain == shown and text.spans == []


@given(st.text())
def test_inert_text_never_leaves_control_characters(raw: str) -> None:
    out = inert_text(raw, max_len=10_000)
    assert out.isprintable()
    assert inert_text(out, max_len=10_000) == out  # idempotent: sanitising twice is harmless


def test_inert_text_truncates() -> None:
    assert inert_text("x" * 500, max_len=10) == "x" * 9 + "…"


# -- sparklines --------------------------------------------------------------------

def test_sparkline_scales_and_marks_gaps() -> None:
    assert sparkline([0, 50, 100], 3, 0, 100) == "▁▅█"
    assert sparkline([None, 100], 4, 0, 100) == "   █"
    assert sparkline([], 3) == "   "
    assert sparkline(list(range(100)), 5, 0, 99) == sparkline(list(range(95, 100)), 5, 0, 99)


@given(st.lists(st.one_of(st.none(), st.floats(-1e6, 1e6)), max_size=50), st.integers(1, 40))
def test_sparkline_width_is_exact(values: list[float | None], width: int) -> None:
    assert len(sparkline(values, width)) == width


# -- filter ------------------------------------------------------------------------

def test_filter_matches_name_role_status_verdict_and_inverts() -> None:
    idle = node("decode-07", verdicts=[VerdictView(kind="idle", detail="util 0%")])
    stale = node("prefill-01", role="prefill", status="stale")
    assert NodeFilter.parse("DECODE").matches(idle)
    assert NodeFilter.parse("idle").matches(idle) and not NodeFilter.parse("idle").matches(stale)
    assert NodeFilter.parse("stale").matches(stale)
    assert NodeFilter.parse("!decode").matches(stale) and not NodeFilter.parse("!decode").matches(idle)
    assert NodeFilter.parse("decode idle").matches(idle)
    assert not NodeFilter.parse("decode stale").matches(idle)  # words must all match
    assert NodeFilter.parse("  ").matches(idle) and not NodeFilter.parse("").active
    assert NodeFilter.parse("!").matches(idle)  # "!" alone filters nothing


def test_not_ok_finds_what_the_operator_hunts() -> None:
    """STATUS is the monitor's standing: a node with a critical verdict is "critical", not
    plain "ok", so `!ok` (the README's example) finds it, and nodes not judged yet."""
    crit = node("decode-03", standing="critical",
                verdicts=[VerdictView(kind="link-starved", detail="ib0 down", severity="critical")])
    fine = node("decode-01", standing="ok")
    judging = node("decode-02", standing="judging")
    reading = node("decode-09", status="stale", standing="reading")
    old_record = node("decode-04")  # written before `standing`: the status is drawn
    shown = [n.name for n in (crit, fine, judging, reading, old_record) if NodeFilter.parse("!ok").matches(n)]
    assert shown == ["decode-03", "decode-02", "decode-09"]
    assert NodeFilter.parse("critical").matches(crit) and not NodeFilter.parse("critical").matches(fine)
    cells = {n.name: status_cell(n).plain for n in (crit, fine, judging, reading, old_record)}
    assert cells == {"decode-03": "critical", "decode-01": "ok", "decode-02": "judging",
                     "decode-09": "reading", "decode-04": "ok"}
    # worst first: the critical node sorts above the stale, judging and ok ones
    assert sort_order([fine, judging, reading, crit], sort_spec("status")) == [
        "decode-03", "decode-09", "decode-02", "decode-01"]


# -- columns -----------------------------------------------------------------------

def test_unknown_values_show_as_dash() -> None:
    cells = {c: t.plain for c, t in zip(COLUMN_KEYS, render_row(node()), strict=True)}
    for key in ("gpus", "util", "mem", "power", "rx", "tx", "links", "steps", "accept", "tokens",
                "cost", "idle"):
        assert cells[key] == "—", key


def test_row_figures_and_trouble_colours() -> None:
    gpus = [GpuView(index=i, util_pct=50.0 + i * 10, power_w=400.0, mem_used_bytes=2**30,
                    mem_total_bytes=2**32) for i in range(2)]
    n = node(gpus=gpus, gpus_expected=4, cost_per_hour_usd=21.16, idle_fraction=0.75,
             engine=EngineView(decode_steps_per_s=31.25, draft_acceptance=0.7, accepted_tokens_per_s=1234.4))
    cells = render_row(n)
    plain = {key: row_cell(cells, key).plain for key in COLUMN_KEYS}
    assert plain["gpus"] == "2/4" and TROUBLE in str(row_cell(cells, "gpus").style)  # GPUs missing
    assert plain["util"] == "55%" and plain["mem"] == "2.0/8.0 GiB" and plain["power"] == "800 W"
    assert [plain[k] for k in ("steps", "accept", "tokens", "cost", "idle")] == [
        "31.2", "70%", "1,234", "$21.16", "75%"]


def test_stale_row_greyed_but_status_says_why() -> None:
    cells = render_row(node(status="stale", age_s=7.0, gpus=[GpuView(index=0, util_pct=90.0)]))
    assert row_cell(cells, "status").plain == "stale 7s"
    assert any(GREY in str(s.style) for s in row_cell(cells, "util").spans)
    unreachable = render_row(node(status="unreachable", age_s=125.0))
    status = row_cell(unreachable, "status")
    assert status.plain == "UNREACH 2m" and TROUBLE in str(status.style)


def test_name_cell_is_inert() -> None:
    label = render_row(node("[b]x[/b]\x1b[1m"))[0]
    assert label.plain == "[b]x[/b]\\x1b[1m" and label.spans == []


def test_sort_orders_worst_first_unknown_last() -> None:
    a = node("a", gpus=[GpuView(index=0, util_pct=10.0)], engine=EngineView(decode_steps_per_s=30.0))
    b = node("b", status="error")
    c = node("c", gpus=[GpuView(index=0, util_pct=90.0)], engine=EngineView(decode_steps_per_s=5.0))
    nodes = [a, b, c]
    by = {s.label: s for s in SORTS}
    assert sort_order(nodes, SortSpec("layout", None)) == ["a", "b", "c"]
    assert sort_order(nodes, by["status"]) == ["b", "a", "c"]
    assert sort_order(nodes, by["util"]) == ["a", "c", "b"]  # the idle node first
    assert sort_order(nodes, by["steps/s"]) == ["c", "a", "b"]  # stragglers first
    assert sort_order(nodes, by["node"]) == ["a", "b", "c"]
    # reversed: best first, unknown still last
    assert sort_order(nodes, sort_spec("util", reverse=True)) == ["c", "a", "b"]
    assert sort_order(nodes, sort_spec("name", reverse=True)) == ["c", "b", "a"]


@pytest.mark.parametrize(
    ("column", "worst_first", "arrow"),
    [("util", ["idle", "mid", "busy"], "▲"), ("steps", ["idle", "mid", "busy"], "▲"),
     ("cost", ["busy", "mid", "idle"], "▼"), ("idle", ["idle", "mid", "busy"], "▼")],
)
def test_each_column_sorts_worst_first_with_its_arrow(column: str, worst_first: list[str], arrow: str) -> None:
    def n(name: str, util: float, steps: float, cost: float, idle: float) -> NodeView:
        return node(name, gpus=[GpuView(index=0, util_pct=util)], engine=EngineView(decode_steps_per_s=steps),
                    cost_per_hour_usd=cost, idle_fraction=idle)

    nodes = [n("busy", 95.0, 30.0, 40.0, 0.0), n("idle", 2.0, 1.0, 10.0, 0.9), n("mid", 50.0, 15.0, 20.0, 0.4)]
    spec = sort_spec(column)
    assert sort_order(nodes, spec) == worst_first
    assert sort_arrow(spec) == arrow
    assert sort_order(nodes, sort_spec(column, reverse=True)) == worst_first[::-1]
    assert sort_arrow(sort_spec(column, reverse=True)) != arrow


def test_sort_by_severity_then_dollars_at_stake() -> None:
    def v(kind: str, severity: str, stake: float | None) -> VerdictView:
        return VerdictView(kind=kind, detail="x", severity=severity, usd_per_hour_at_stake=stake)  # type: ignore[arg-type]

    nodes = [
        node("calm"),
        node("warn-cheap", verdicts=[v("idle", "warning", 5.0)]),
        node("crit", verdicts=[v("link-down", "critical", 2.0)]),
        node("warn-dear", verdicts=[v("straggler", "warning", 40.0)]),
    ]
    assert sort_order(nodes, sort_spec("verdicts")) == ["crit", "warn-dear", "warn-cheap", "calm"]


def test_sort_keeps_its_order_while_values_jitter_within_the_margin() -> None:
    def n(name: str, util: float) -> NodeView:
        return node(name, gpus=[GpuView(index=0, util_pct=util)])

    spec = sort_spec("util")
    first = sort_order([n("a", 50.0), n("b", 51.0), n("c", 10.0)], spec)
    assert first == ["c", "a", "b"]
    # a and b swap values by less than the margin: the shown order stays
    jittered = [n("a", 51.5), n("b", 50.0), n("c", 10.5)]
    assert sort_order(jittered, spec, previous=first) == ["c", "a", "b"]
    assert sort_order(jittered, spec) == ["c", "b", "a"]  # without the previous order it would swap
    # a real change (beyond the margin) still reorders
    assert sort_order([n("a", 90.0), n("b", 20.0), n("c", 10.5)], spec, previous=first) == ["c", "b", "a"]
    # a node that arrives takes its place; one that leaves is gone
    assert sort_order([n("d", 5.0), n("a", 50.0), n("c", 10.0)], spec, previous=first) == ["d", "c", "a"]


# -- format helpers ----------------------------------------------------------------

@pytest.mark.parametrize(
    ("used", "total", "shown"),
    [(None, None, "—"), (70 * 2**30, 141 * 2**30, "70/141 GiB"), (2**39, 2 * 2**40, "0.5/2.0 TiB"),
     (None, 80 * 2**30, "—/80 GiB"), (512, None, "512 B")],
)
def test_fmt_bytes_pair(used: float | None, total: float | None, shown: str) -> None:
    assert fmt_bytes_pair(used, total) == shown


def test_fmt_power_w() -> None:
    assert fmt_power_w(None) == "—" and fmt_power_w(699.6) == "700 W" and fmt_power_w(12_800) == "12.8 kW"


# -- history -----------------------------------------------------------------------

def test_history_is_bounded_and_forgets_departed_nodes() -> None:
    from infertop.tui.history import History
    from tests.support.tui_helpers import FrozenFeed, NodeSpec

    feed = FrozenFeed([NodeSpec("a"), NodeSpec("b", silent_after=2)], ticks=6)
    history = History(length=4)
    for frame in feed.frames:
        history.record(frame)
        history.record(frame)  # the same frame twice is one point
    assert len(history.values(history.gpu_util, ("a", 0))) == 4
    assert history.values(history.node_util, "b")[-1] is None  # stale: a gap, not a repeat
    last = feed.frames[-1]
    history.record(last.model_copy(update={"nodes": [last.nodes[0]], "taken_at": "later"}))
    assert "b" not in history.node_util and ("b", 0) not in history.gpu_util
