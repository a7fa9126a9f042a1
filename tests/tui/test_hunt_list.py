"""The hunt list and the verdict announcer in a real Textual app, driven by Pilot. The
test app feeds both every frame, as InfertopApp does. New verdicts are told in a line
where no figure sits (`VerdictAnnouncer.line`), never as a toast over the table."""

from __future__ import annotations

from typing import Any

from textual.app import App, ComposeResult

from infertop.monitor.snapshot import ClusterView, NodeView, RollupView, SessionView, Snapshot, VerdictView
from infertop.tui.announcer import VerdictAnnouncer
from infertop.tui.hunt_list import HuntList
from infertop.tui.messages import OpenNode
from tests.support.toasts import ToastsShown

T0 = 1_800_000_000.0


def verdict(kind: str, severity: str, usd: float | None, since: float = T0, detail: str = "x") -> VerdictView:
    return VerdictView(kind=kind, detail=detail, severity=severity,  # type: ignore[arg-type]
                       since=since, usd_per_hour_at_stake=usd)


def snapshot(nodes: dict[str, list[VerdictView]], now: float = T0 + 90) -> Snapshot:
    import datetime as dt

    views = [NodeView(name=name, role="decode", status="ok", verdicts=v) for name, v in nodes.items()]
    return Snapshot(
        taken_at=dt.datetime.fromtimestamp(now, dt.UTC).isoformat(),
        window_s=10.0,
        cluster=ClusterView(name="t", interval_s=1.0, total=RollupView(nodes=len(views), gpus=0)),
        session=SessionView(started_at="2027-01-15T08:00:00+00:00", elapsed_s=0.0, cost_per_hour_usd=None,
                            spend_usd=None, idle_spend_usd=None, budget_usd=None,
                            usd_per_million_output_tokens=None, api_equivalent_usd=None),
        nodes=views,
    )


class HuntApp(ToastsShown, App[None]):
    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.opened: list[str] = []
        self.announcer = VerdictAnnouncer()

    def compose(self) -> ComposeResult:
        yield HuntList(id="hunt")

    def show(self, frame: Snapshot) -> None:
        self.announcer.observe(frame.nodes)
        self.query_one(HuntList).show(frame)

    def news(self) -> str | None:
        line = self.announcer.line()
        return None if line is None else line.plain

    def on_open_node(self, message: OpenNode) -> None:
        self.opened.append(message.node)


def rows(table: HuntList) -> list[list[str]]:
    return [[c.plain for c in table.get_row(key)] for key in table.displayed_order()]


async def test_sorted_by_severity_then_money_and_enter_opens_the_node() -> None:
    app = HuntApp()
    async with app.run_test(size=(140, 20)) as pilot:
        table = app.query_one(HuntList)
        table.show(snapshot({
            "decode-01": [verdict("idle", "warning", 80.0)],
            "decode-02": [verdict("straggler", "warning", 200.0, detail="42.0 decode steps/s")],
            "decode-03": [verdict("link-starved", "critical", 80.0, since=T0 + 60)],
        }))
        await pilot.pause()
        assert table.entries == [("decode-03", "link-starved"), ("decode-02", "straggler"),
                                 ("decode-01", "idle")]
        assert rows(table)[0] == ["1", "critical", "decode-03", "link-starved", "30s", "$80.00", "x"]  # 1: its key
        assert rows(table)[1][6] == "42.0 decode steps/s"
        table.focus()
        await pilot.press("down", "enter")
        await pilot.pause()
        assert app.opened == ["decode-02"]


async def test_new_verdict_notifies_and_cursor_follows_its_row() -> None:
    app = HuntApp()
    async with app.run_test(size=(140, 20)) as pilot:
        table = app.query_one(HuntList)
        app.show(snapshot({"a": [verdict("idle", "warning", 10.0)], "b": [verdict("idle", "warning", 5.0)]}))
        await pilot.pause()
        assert app.news() is None  # what was already there when we opened is not news
        table.focus()
        await pilot.press("down")
        assert table.current() == ("b", "idle")
        app.show(snapshot({
            "a": [verdict("idle", "warning", 10.0)],
            "b": [verdict("idle", "warning", 5.0)],
            "c": [verdict("gpu-error", "critical", 80.0, detail="GPU 3 XID 79")],
        }))
        await pilot.pause()
        assert app.news() == "new: c gpu-error"
        line = app.announcer.line()
        assert line is not None and line.style == "bold red"  # critical
        assert not app.toasts  # nothing drawn over the table
        assert table.entries[0] == ("c", "gpu-error")
        assert table.current() == ("b", "idle")  # the cursor stayed on its verdict
        # the same frame again: nothing new, nothing announced
        app.show(snapshot({"a": [verdict("idle", "warning", 10.0)], "b": [verdict("idle", "warning", 5.0)],
                             "c": [verdict("gpu-error", "critical", 80.0)]}, now=T0 + 95))
        await pilot.pause()
        assert app.news() == "new: c gpu-error"
        app.show(snapshot({}))
        await pilot.pause()
        assert table.row_count == 0 and table.current() is None


async def test_burst_of_verdicts_is_one_line() -> None:
    app = HuntApp()
    async with app.run_test(size=(140, 20)) as pilot:
        app.show(snapshot({}))
        app.show(snapshot({f"n{i}": [verdict("unreachable", "critical", 1.0)] for i in range(6)}))
        await pilot.pause()
        assert app.news() == "6 new: n0 unreachable, n1 unreachable, n2 unreachable, …"
        assert not app.toasts


async def test_hostile_text_is_shown_inert() -> None:
    app = HuntApp()
    async with app.run_test(size=(140, 20)) as pilot:
        table = app.query_one(HuntList)
        app.show(snapshot({}))
        evil = "[bold red]pwn[/] \x1b[31mred\x1b[0m\x1b]8;;http://x\x07link"
        app.show(snapshot({"n1": [verdict("idle", "warning", 1.0, detail=evil)]}))
        await pilot.pause()
        shown = rows(table)[0][6]
        # markup literal, escapes written out (never obeyed)
        assert shown == "[bold red]pwn[/] \\x1b[31mred\\x1b[0m\\x1b]8;;http://x\\x07link"
        app.show(snapshot({"n1": [verdict("idle", "warning", 1.0)], evil: [verdict("idle", "warning", 1.0)]}))
        news = app.news()
        assert news is not None and "\x1b" not in news and "\x07" not in news
