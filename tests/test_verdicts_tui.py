"""The hunt list in a real Textual app, driven by Pilot."""

from __future__ import annotations

from typing import Any

from textual.app import App, ComposeResult

from infertop.view import ClusterView, NodeView, RollupView, SessionView, Snapshot, VerdictView
from tui.hunt_list import HuntList, VerdictAnnouncer
from tui.messages import OpenNode

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


class HuntApp(App[None]):
    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.opened: list[str] = []

    def compose(self) -> ComposeResult:
        yield HuntList(id="hunt")

    def on_open_node(self, message: OpenNode) -> None:
        self.opened.append(message.node)


def rows(table: HuntList) -> list[list[str]]:
    return [[c.plain for c in table.get_row_at(i)] for i in range(table.row_count)]


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
        assert rows(table)[0] == ["critical", "decode-03", "link-starved", "30s", "$80.00", "x"]
        assert rows(table)[1][5] == "42.0 decode steps/s"
        table.focus()
        await pilot.press("down", "enter")
        await pilot.pause()
        assert app.opened == ["decode-02"]


async def test_new_verdict_notifies_and_cursor_follows_its_row() -> None:
    app = HuntApp()
    async with app.run_test(size=(140, 20)) as pilot:
        table = app.query_one(HuntList)
        table.show(snapshot({"a": [verdict("idle", "warning", 10.0)], "b": [verdict("idle", "warning", 5.0)]}))
        await pilot.pause()
        assert len(app._notifications) == 0  # what was already there when we opened is not news
        table.focus()
        await pilot.press("down")
        assert table.current() == ("b", "idle")
        table.show(snapshot({
            "a": [verdict("idle", "warning", 10.0)],
            "b": [verdict("idle", "warning", 5.0)],
            "c": [verdict("gpu-error", "critical", 80.0, detail="GPU 3 XID 79")],
        }))
        await pilot.pause()
        notes = list(app._notifications)
        assert [(n.title, n.message, n.severity) for n in notes] == [
            ("c: gpu-error", "GPU 3 XID 79", "error")
        ]
        assert table.entries[0] == ("c", "gpu-error")
        assert table.current() == ("b", "idle")  # the cursor stayed on its verdict
        # the same frame again: nothing new, nothing announced
        table.show(snapshot({"a": [verdict("idle", "warning", 10.0)], "b": [verdict("idle", "warning", 5.0)],
                             "c": [verdict("gpu-error", "critical", 80.0)]}, now=T0 + 95))
        await pilot.pause()
        assert len(app._notifications) == 1
        table.show(snapshot({}))
        await pilot.pause()
        assert table.row_count == 0 and table.current() is None


async def test_burst_of_verdicts_is_one_notification() -> None:
    app = HuntApp()
    async with app.run_test(size=(140, 20)) as pilot:
        table = app.query_one(HuntList)
        table.show(snapshot({}))
        table.show(snapshot({f"n{i}": [verdict("unreachable", "critical", 1.0)] for i in range(6)}))
        await pilot.pause()
        notes = list(app._notifications)
        assert len(notes) == 1 and notes[0].message.startswith("6 new verdicts: ")


async def test_hostile_text_is_shown_inert() -> None:
    app = HuntApp()
    async with app.run_test(size=(140, 20)) as pilot:
        table = app.query_one(HuntList)
        table.show(snapshot({}))
        evil = "[bold red]pwn[/] \x1b[31mred\x1b[0m\x1b]8;;http://x\x07link"
        table.show(snapshot({"n1": [verdict("idle", "warning", 1.0, detail=evil)]}))
        await pilot.pause()
        shown = rows(table)[0][5]
        # markup literal, escapes written out (never obeyed)
        assert shown == "[bold red]pwn[/] \\x1b[31mred\\x1b[0m\\x1b]8;;http://x\\x07link"
        notes = list(app._notifications)
        assert notes[0].markup is False and "\x1b" not in notes[0].message


class AnnouncingApp(HuntApp):
    """An app that announces every frame itself (whatever screen is on top)."""

    def __init__(self) -> None:
        super().__init__()
        self.verdict_announcer = VerdictAnnouncer()


async def test_list_leaves_announcing_to_an_app_that_does_it() -> None:
    app = AnnouncingApp()
    async with app.run_test(size=(140, 20)) as pilot:
        table = app.query_one(HuntList)
        first, second = snapshot({}), snapshot({"n1": [verdict("idle", "warning", 1.0, detail="quiet")]})
        assert app.verdict_announcer.observe(app, first.nodes) == []
        table.show(first)
        started = app.verdict_announcer.observe(app, second.nodes)
        table.show(second)
        await pilot.pause()
        assert [(n.name, v.kind) for n, v in started] == [("n1", "idle")]
        assert [n.message for n in app._notifications] == ["quiet"]  # once, not twice
