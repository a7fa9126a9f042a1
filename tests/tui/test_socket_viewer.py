"""The TUI drawing a monitor through its socket (SocketFeed), through Textual's Pilot: the
real Monitor over a real in-memory Source, serving a real Unix socket."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from infertop.monitor.channel.client import SocketFeed
from infertop.monitor.channel.paths import socket_path
from infertop.monitor.channel.server import ChannelServer
from infertop.monitor.monitor import Monitor
from infertop.tui.app import InfertopApp
from tests.support.tui_helpers import NodeSpec, SyntheticSource, make_layout, screen_text, wait_for

SIZE = (200, 45)


@dataclass
class Served:
    monitor: Monitor
    server: ChannelServer
    stops: list[bool]


@pytest.fixture
async def served() -> AsyncIterator[Served]:
    specs = [NodeSpec("decode-01"), NodeSpec("decode-02"), NodeSpec("prefill-01", role="prefill")]
    layout = make_layout(specs)
    monitor = Monitor(layout, sources=[SyntheticSource(specs, 0.25)])
    stops: list[bool] = []
    server = ChannelServer(monitor, socket_path(layout), None, on_stop=lambda: stops.append(True))
    await server.start()
    await monitor.start()
    try:
        yield Served(monitor, server, stops)
    finally:
        await server.close()
        await monitor.stop()


def viewer(served: Served) -> tuple[InfertopApp, SocketFeed]:
    feed = SocketFeed(served.monitor.layout, served.server.path)
    return InfertopApp(feed), feed


async def test_the_tui_draws_the_monitor_and_marks_its_phase_over_the_socket(served: Served) -> None:
    app, feed = viewer(served)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: len(app.overview.table.displayed_order()) == 3 and app.frames_rendered >= 2)
        assert "decode-01" in screen_text(app) and "prefill-01" in screen_text(app)
        assert feed.frames >= 2 and served.server.viewers == 1
        app.mark_phase("load")
        await wait_for(pilot, lambda: app.latest_snapshot is not None and app.latest_snapshot.session.phase == "load")
        assert served.monitor.ledger.view(served.monitor.clock(), None).phase == "load"
    assert not served.stops  # quitting the viewer left the monitor alone


async def test_quit_and_stop_the_monitor_from_the_palette(served: Served) -> None:
    app, _ = viewer(served)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.frames_rendered >= 1)
        commands = {c.title: c for c in app.get_system_commands(app.screen)}
        commands["Quit and stop the monitor"].callback()
        await wait_for(pilot, lambda: bool(served.stops))
    assert app.return_code == 0


async def test_the_tui_leaves_when_its_monitor_goes(served: Served) -> None:
    app, feed = viewer(served)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.frames_rendered >= 1)
        await served.server.close()  # the monitor stopped (`infertop stop`, or killed)
        await wait_for(pilot, lambda: app.return_code is not None)  # it left on its own
    assert feed.end_reason == "the monitor stopped"
