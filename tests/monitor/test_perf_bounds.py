"""What the performance fixes promise, checked without timing anything (issue 8).

- the fleet state keeps one window of samples per source, not `history` of them;
- the monitor still derives its rates from that window;
- the node table repaints a cell only when it changed, and shows the new value when it did.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

from hypothesis import given, settings
from hypothesis import strategies as st
from rich.text import Text
from textual.app import App, ComposeResult

from infertop.collectors.fleet import FleetState
from infertop.collectors.rates import counter_rate
from infertop.collectors.sample import EngineSample, NodeSample
from infertop.layouts.model import Layout
from infertop.monitor.monitor import Monitor
from infertop.tui.row_table import Column, RowTable


def _sample(node: str, t: float, steps: float, source: str = "s") -> NodeSample:
    return NodeSample(node=node, source=source, taken_at=t, engine=EngineSample(steps_total=steps))


def test_fleet_keeps_a_window_behind_each_sources_newest_sample() -> None:
    state = FleetState(["n"], history=600, retain_s=5.0)
    for i in range(100):
        state.add(_sample("n", 1000.0 + i, float(i)))
        state.add(_sample("n", 500.0 + i, float(i), source="skewed"))  # a clock 500 s behind
    ring = state.nodes["n"].by_source["s"]
    assert [s.taken_at for s in ring] == [1094.0 + k for k in range(6)]
    assert len(state.nodes["n"].by_source["skewed"]) == 6
    # a source that went quiet keeps its newest sample however old it is
    state.add(_sample("n", 5000.0, 1.0, source="once"))
    assert len(state.nodes["n"].by_source["once"]) == 1


def test_fleet_without_retention_is_bounded_by_history_alone() -> None:
    state = FleetState(["n"], history=50)
    for i in range(200):
        state.add(_sample("n", float(i), float(i)))
    assert len(state.nodes["n"].by_source["s"]) == 50


def test_monitor_keeps_one_window_and_still_has_its_rates() -> None:
    layout = Layout.model_validate({
        "cluster": {"interval_s": 1.0, "window_s": 10.0, "history": 600},
        "nodes": [{"name": "n", "role": "decode", "gpus": 0}],
    })
    monitor = Monitor(layout, sources=[], clock=lambda: 0.0)
    for i in range(300):
        monitor.fleet.ingest(_sample("n", 1000.0 + i, 40.0 * i))
        snap = monitor.tick(1000.0 + i)
    assert len(monitor.state.nodes["n"].by_source["s"]) <= 13
    engine = snap.nodes[0].engine
    assert engine is not None and engine.decode_steps_per_s == 40.0


class _TableApp(App[None]):
    def compose(self) -> ComposeResult:
        yield RowTable([("name", "NAME", 8), ("value", "VALUE", 8)], id="t")


def _line(table: RowTable, y: int) -> str:
    return "".join(segment.text for segment in table.render_line(y))


async def test_table_renders_only_changed_rows_and_shows_them() -> None:
    app = _TableApp()
    async with app.run_test(size=(40, 10)) as pilot:
        table = app.query_one(RowTable)
        table.sync([(f"r{i}", [Text(f"r{i}"), Text(str(i))]) for i in range(3)])
        await pilot.pause()
        for y in range(1, 4):  # line 0 is the header
            _line(table, y)
        rendered = table.lines_rendered
        table.sync([(f"r{i}", [Text(f"r{i}"), Text(str(10 if i == 1 else i))]) for i in range(3)])
        await pilot.pause()
        lines = [_line(table, y) for y in range(1, 4)]
        assert "r1" in lines[1] and "10" in lines[1]
        assert "r0" in lines[0] and "r2" in lines[2] and "2" in lines[2].replace("r2", "")
        # only the one changed row went through Rich again
        assert table.lines_rendered == rendered + 1


async def test_table_renders_only_the_rows_on_screen() -> None:
    """128 rows in a 10-line widget: a frame where every row changed renders ~9 lines."""
    app = _TableApp()
    async with app.run_test(size=(40, 10)) as pilot:
        table = app.query_one(RowTable)
        table.styles.height = 10
        table.sync([(f"r{i}", [Text(f"r{i}"), Text("0")]) for i in range(128)])
        await pilot.pause()
        rendered = table.lines_rendered
        table.sync([(f"r{i}", [Text(f"r{i}"), Text("1")]) for i in range(128)])
        await pilot.pause()
        assert 0 < table.lines_rendered - rendered <= 10
        await pilot.press("end")  # the cursor on the last row scrolls it into view
        await pilot.pause()
        assert table.current_key() == "r127"
        assert "r127" in _line(table, 9)
        # wider than the screen: a horizontal scrollbar takes the bottom line
        table.sync([(f"r{i}", [Text(f"r{i}"), Text("x" * 60)]) for i in range(128)])
        table.columns[1] = Column("value", "VALUE", None)
        table.sync([(f"r{i}", [Text(f"r{i}"), Text("y" * 60)]) for i in range(128)])
        await pilot.press("home", "end")
        await pilot.pause()
        assert "r127" in _line(table, 8)


async def test_lazy_rows_are_made_only_when_drawn() -> None:
    """The node table's path: 128 rows handed over as makers; a 10-line widget makes the
    ~9 on screen, and a cell read makes its own row only."""
    app = _TableApp()
    async with app.run_test(size=(40, 10)) as pilot:
        table = app.query_one(RowTable)
        table.styles.height = 10
        made: list[str] = []

        def maker(key: str, value: str) -> Callable[[], list[Text]]:
            def make() -> list[Text]:
                made.append(key)
                return [Text(key), Text(value)]
            return make

        for frame in ("0", "1"):
            made.clear()
            table.sync_lazy([(f"r{i}", maker(f"r{i}", frame)) for i in range(128)], widths={"name": 4})
            await pilot.pause()
            assert 0 < len(made) <= 10 and made[0] == "r0"
            assert "r0" in _line(table, 1) and frame in _line(table, 1)
        assert table.get_cell("r100", "value").plain == "1" and made[-1] == "r100"
        assert table.row_count == 128


def _reference_rate(points: list[tuple[float, float | None]]) -> float | None:
    """The rate as first written (two passes over a filtered copy): the fast one must agree."""
    known = [(t, v) for t, v in points if v is not None]
    if len(known) < 2 or known[-1][0] - known[0][0] <= 0:
        return None
    values = [v for _, v in known]
    increase = sum(b - a if b >= a else b for a, b in itertools.pairwise(values))
    return increase / (known[-1][0] - known[0][0])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 1e6, allow_nan=False),
                          st.none() | st.floats(0, 1e15, allow_nan=False)), max_size=20))
def test_counter_rate_agrees_with_the_reference(raw: list[tuple[float, float | None]]) -> None:
    points = sorted(raw, key=lambda p: p[0])
    got, want = counter_rate(points), _reference_rate(points)
    assert (got is None) == (want is None)
    if got is not None and want is not None:
        assert math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-9)
