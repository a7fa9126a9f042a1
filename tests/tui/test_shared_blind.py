"""A cluster of 16 healthy nodes read through stock exporters (dcgm-exporter 4.5.3-4.8.2's
default counters, node_exporter 1.12.1; real HTTP on loopback, the real scrape source and
monitor) through the TUI (Pilot): what every node misses alike is said once — in the
header and as one hunt-list row whose evidence names the missing counters — and no node
shows a verdict (its own screen lists the gaps as the fleet's); a node whose counters CSV lacks a line its peers have keeps its `blind`
verdict (header "blind on 1 node", its own hunt-list row)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from infertop.layouts import parse_layout
from infertop.monitor.feeds import MonitorFeed
from infertop.monitor.snapshot import Snapshot
from infertop.tui.app import InfertopApp
from infertop.tui.hunt_list import HuntList
from infertop.tui.node_screen import NodeScreen
from infertop.tui.node_table import NodeTable
from tests.support.stock_cluster import (
    STOCK_MISSING,
    cluster_pages,
    layout_toml,
    node_names,
    serve_pages,
    trimmed_csv,
)
from tests.support.tui_helpers import screen_text, wait_for

SIZE = (220, 60)
NAMES = node_names(16)
INTERVAL_S = 1.0
HOLD_S = 1.0
HEADER = f"fleet-wide blind on throttle, ECC, NVLink errors ({len(NAMES)} nodes)"
ODD = "decode-07"


def taken(snapshot: Snapshot) -> float:
    return dt.datetime.fromisoformat(snapshot.taken_at).timestamp()


@pytest.mark.parametrize("odd", [None, ODD])
async def test_a_blind_spot_every_node_shares_is_one_row(tmp_path: Path, odd: str | None) -> None:
    fewer = {odd: trimmed_csv(tmp_path)} if odd else None
    with serve_pages(cluster_pages(NAMES, fewer)) as url:
        layout = parse_layout(layout_toml(url, NAMES, interval_s=INTERVAL_S, hold_s=HOLD_S))
        feed = MonitorFeed(layout)
        app = InfertopApp(feed)
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: HEADER in screen_text(app), timeout_s=60.0)
            latest = feed.monitor.latest
            assert latest is not None
            first = taken(latest)
            # past the hold time (and a frame more): a node verdict would be established now
            await wait_for(
                pilot,
                lambda: (s := feed.monitor.latest) is not None and taken(s) >= first + HOLD_S + 2 * INTERVAL_S,
                timeout_s=60.0,
            )
            await pilot.pause(0.2)
            frame = feed.monitor.latest
            assert frame is not None and all(n.status == "ok" for n in frame.nodes)
            text = screen_text(app)
            lines = text.splitlines()
            header = next(ln for ln in lines if "infertop ▸" in ln)
            assert HEADER in header
            # one row for the whole fleet in the hunt list; its evidence names the fix
            assert sum("warning 16 nodes blind" in " ".join(ln.split()) for ln in lines) == 1, text
            assert "1 fleet-wide blind spot" in text
            await wait_for(pilot, lambda: all(f in screen_text(app).replace("\n", "") for f in STOCK_MISSING[:2]))
            blind_rows = [ln for ln in lines if "decode-" in ln and "blind" in ln]
            if odd is None:
                assert "blind on" not in header.replace("fleet-wide blind on", "")
                assert blind_rows == [], blind_rows
                assert "all clear" not in text and "no node verdict" in text
            else:
                assert "blind on 1 node" in header
                # the node table's verdict column and its hunt-list row: that node only
                assert blind_rows and all(odd in ln for ln in blind_rows), blind_rows
                assert any("NVLink unknown" in ln for ln in blind_rows), blind_rows
            # Enter on the fleet's row opens no node (there is no one node to open)
            await pilot.press("tab")
            await wait_for(pilot, lambda: isinstance(app.focused, HuntList))
            hunt = app.focused
            assert isinstance(hunt, HuntList)
            if odd is None:
                assert hunt.current() == ("16 nodes", "blind")
                await pilot.press("enter")
                await pilot.pause(0.3)
                assert not isinstance(app.screen, NodeScreen)
            await pilot.press("shift+tab")
            await wait_for(pilot, lambda: isinstance(app.focused, NodeTable))
            # the node's own screen still lists what it cannot see, marked as the fleet's
            await pilot.press("enter")
            await wait_for(pilot, lambda: isinstance(app.screen, NodeScreen))
            await wait_for(pilot, lambda: "unseen (fleet-wide): throttle unknown" in screen_text(app))
            assert "blind:" not in screen_text(app)
