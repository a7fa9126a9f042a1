"""The monitor's socket and its viewers, in one process: a real Monitor over the demo's
real HTTP endpoints, a real ChannelServer on a Unix socket, a real SocketFeed."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from infertop.demo.server import DemoServer, write_layout
from infertop.layouts import load_layout
from infertop.monitor.channel.client import Connection, MonitorUnavailable, SocketFeed, call, list_monitors
from infertop.monitor.channel.paths import MonitorBusy, MonitorLock, socket_path
from infertop.monitor.channel.protocol import (
    MAX_COMMAND_BYTES,
    AskInfo,
    Info,
    MarkPhase,
    Refused,
    Reply,
    SnapshotFrame,
    decode_server_line,
    encode_snapshot,
    snapshot_line,
)
from infertop.monitor.channel.server import ChannelServer
from infertop.monitor.monitor import Monitor
from infertop.monitor.snapshot import Snapshot
from tests.support.waiting import until_async


class Served:
    def __init__(self, monitor: Monitor, server: ChannelServer, stops: list[bool]):
        self.monitor, self.server, self.stops = monitor, server, stops


def two_readings_of_every_node(monitor: Monitor) -> bool:
    nodes = monitor.state.nodes.values()
    return all(node.by_source and all(len(ring) >= 2 for ring in node.by_source.values()) for node in nodes)


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    """A monitor over a 4-node demo cluster, ticked by hand, serving its socket."""
    demo = DemoServer(4, seed=3)
    await demo.start()
    layout_file = tmp_path / "demo.toml"
    write_layout(demo, layout_file)
    layout = load_layout(layout_file)
    monitor = Monitor(layout)
    stops: list[bool] = []
    server = ChannelServer(monitor, socket_path(layout), str(layout_file), on_stop=lambda: stops.append(True))
    await monitor.start(tick=False)
    await server.start()
    try:
        # two readings of every node: rates, engines, verdicts
        await until_async(lambda: two_readings_of_every_node(monitor), 30, "two readings of every node")
        monitor.tick()
        yield Served(monitor, server, stops)
    finally:
        await server.close()
        await monitor.stop()
        await demo.stop()


async def test_a_snapshot_round_trips_exactly(served: Served) -> None:
    snapshot = served.monitor.tick()
    assert snapshot.nodes and any(n.engine is not None for n in snapshot.nodes)
    assert any(n.gpus for n in snapshot.nodes)
    encoded = encode_snapshot(snapshot)
    assert Snapshot.model_validate_json(encoded) == snapshot
    frame = decode_server_line(snapshot_line(encoded))
    assert isinstance(frame, SnapshotFrame)
    assert frame.snapshot == snapshot
    # and the frame is the snapshot/1 JSON, unchanged, inside its envelope
    assert json.loads(snapshot_line(encoded))["snapshot"] == json.loads(encoded)
    # fields at their default are not sent (pydantic fills them back, as checked above):
    # a viewer reads far less each second
    assert len(encoded) < 0.8 * len(snapshot.model_dump_json(by_alias=True))


async def test_a_socket_feed_receives_the_monitors_snapshots_and_marks_phases(served: Served) -> None:
    published: list[Snapshot] = []
    feed = SocketFeed(served.monitor.layout, served.server.path)
    await feed.connect(published.append)
    try:
        assert feed.info is not None and feed.info.pid == os.getpid()
        assert feed.info.layout == served.server.layout_file
        # the newest frame at once on subscribing, equal to the monitor's own
        await until_async(lambda: published and published[-1] == served.monitor.latest, 20, "the newest frame")
        ticked = served.monitor.tick()
        await until_async(lambda: published[-1] == ticked, 20, "the ticked frame")
        assert served.server.viewers == 1

        assert ticked.session.phase != "warmup"
        feed.mark_phase("warmup")
        await until_async(lambda: served.monitor.tick().session.phase == "warmup", 20, "the mark in a tick")
        await until_async(lambda: published[-1].session.phase == "warmup", 20, "the marked frame")
        with pytest.raises(ValueError, match="unknown phase"):
            feed.mark_phase("lunch")
    finally:
        await feed.stop()
    await until_async(lambda: served.server.viewers == 0, 20, "the viewer to be gone")


async def test_one_shot_commands_info_mark_and_stop(served: Served) -> None:
    path = served.server.path
    info = await asyncio.to_thread(call, path, AskInfo())
    assert isinstance(info, Info) and info.cluster == "deepinfer-demo"
    bad = await asyncio.to_thread(call, path, MarkPhase(phase="lunch"))
    assert isinstance(bad, Reply) and not bad.ok and "unknown phase" in bad.detail
    good = await asyncio.to_thread(call, path, MarkPhase(phase="load"))
    assert isinstance(good, Reply) and good.ok
    assert served.monitor.tick().session.phase == "load"
    monitors = await asyncio.to_thread(list_monitors, path.parent)
    assert [(p, i.pid) for p, i in monitors if isinstance(i, Info)] == [(path, os.getpid())]
    assert not served.stops
    from infertop.monitor.channel.protocol import StopMonitor

    stopped = await asyncio.to_thread(call, path, StopMonitor())
    assert isinstance(stopped, Reply) and stopped.ok and served.stops == [True]


async def test_a_viewer_that_never_reads_skips_frames_and_never_slows_the_monitor(served: Served) -> None:
    path = served.server.path
    _reader, writer = await asyncio.open_unix_connection(str(path))
    writer.write(b'{"type":"subscribe"}\n')
    await writer.drain()
    await until_async(lambda: served.server.viewers == 1, 20, "the subscription")
    frame_bytes = len(snapshot_line(encode_snapshot(served.monitor.tick())))
    took: list[float] = []
    for _ in range(60):
        started = time.perf_counter()
        served.monitor.tick()
        took.append(time.perf_counter() - started)
        await asyncio.sleep(0)
    (viewer,) = list(served.server._viewers)
    assert viewer.frames_skipped > 0
    # what waits for the viewer is at most the newest frame and what the socket holds
    buffered = viewer.writer.transport.get_write_buffer_size()
    assert buffered <= 2 * frame_bytes + 256 * 1024, buffered
    # a second viewer is served the newest frame meanwhile
    published: list[Snapshot] = []
    feed = SocketFeed(served.monitor.layout, path)
    await feed.connect(published.append)
    await until_async(lambda: published and published[-1] == served.monitor.latest, 20, "the newest frame")
    await feed.stop()
    writer.close()
    assert max(took) < 1.0


async def test_a_huge_line_is_refused_and_the_monitor_serves_on(served: Served) -> None:
    reader, writer = await asyncio.open_unix_connection(str(served.server.path), limit=2**26)
    assert isinstance(decode_server_line(await reader.readline()), Info)
    writer.write(b"x" * (MAX_COMMAND_BYTES + 10))
    await writer.drain()
    refused = decode_server_line(await asyncio.wait_for(reader.readline(), 5))
    assert isinstance(refused, Refused) and "longer than" in refused.detail
    assert await asyncio.wait_for(reader.read(), 5) == b""  # hung up
    writer.close()
    # garbage that fits is answered, not fatal
    reader, writer = await asyncio.open_unix_connection(str(served.server.path))
    await reader.readline()
    writer.write(b'{"type":"launch-missiles"}\nnot json\n')
    for _ in range(2):
        reply = decode_server_line(await asyncio.wait_for(reader.readline(), 5))
        assert isinstance(reply, Reply) and not reply.ok
    writer.close()
    info = await asyncio.to_thread(call, served.server.path, AskInfo())
    assert isinstance(info, Info)


async def test_a_stale_socket_is_reported_and_replaced(tmp_path: Path) -> None:
    demo = DemoServer(2, seed=3)
    await demo.start()
    try:
        layout_file = tmp_path / "demo.toml"
        write_layout(demo, layout_file)
        layout = load_layout(layout_file)
        path = socket_path(layout)
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        dead = socket.socket(socket.AF_UNIX)
        dead.bind(str(path))  # bound, never listening: what a SIGKILLed monitor leaves
        dead.close()
        with pytest.raises(MonitorUnavailable) as caught:
            Connection(path)
        assert caught.value.stale
        monitor = Monitor(layout)
        lock = MonitorLock.take(path, "test")
        with pytest.raises(MonitorBusy, match=f"pid {os.getpid()}"):
            MonitorLock.take(path, "second")
        server = ChannelServer(monitor, path, str(layout_file), on_stop=lambda: None)
        await server.start()
        try:
            assert server.replaced_stale
            assert oct(path.stat().st_mode & 0o777) == oct(0o600)
            assert isinstance(await asyncio.to_thread(call, path, AskInfo()), Info)
        finally:
            await server.close()
            lock.release()
        assert not path.exists()
    finally:
        await demo.stop()


async def test_a_deep_state_directory_still_serves(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    monkeypatch.setenv("INFERTOP_STATE_DIR", str(deep))
    demo = DemoServer(2, seed=3)
    await demo.start()
    try:
        layout_file = tmp_path / "demo.toml"
        write_layout(demo, layout_file)
        layout = load_layout(layout_file)
        path = socket_path(layout)
        assert len(str(path)) > 108
        monitor = Monitor(layout)
        server = ChannelServer(monitor, path, str(layout_file), on_stop=lambda: None)
        await server.start()
        try:
            assert oct(deep.stat().st_mode & 0o777) == oct(0o700)
            assert isinstance(await asyncio.to_thread(call, path, AskInfo()), Info)
            feed = SocketFeed(layout, path)
            await feed.connect(lambda s: None)
            await feed.stop()
        finally:
            await server.close()
    finally:
        await demo.stop()


async def test_a_feed_with_no_monitor_ends_at_once_saying_why(tmp_path: Path) -> None:
    demo = DemoServer(2, seed=3)
    await demo.start()
    try:
        layout_file = tmp_path / "demo.toml"
        write_layout(demo, layout_file)
        layout = load_layout(layout_file)
        feed = SocketFeed(layout, socket_path(layout))
        with pytest.raises(MonitorUnavailable, match="no monitor is running"):
            await feed.connect(lambda s: None)
        await feed.start(lambda s: None)  # a viewer's start-up: no exception, an ending
        async with asyncio.timeout(1):
            assert "no monitor is running" in await feed.ended()
        await feed.stop()
    finally:
        await demo.stop()


async def test_a_viewer_that_floods_commands_and_never_reads_is_not_buffered(served: Served) -> None:
    flood = socket.socket(socket.AF_UNIX)
    flood.connect(str(served.server.path))
    flood.settimeout(4.0)

    def send() -> None:  # ~3 MB of commands, each answered with ~300 bytes, none read
        with contextlib.suppress(TimeoutError):
            flood.sendall(b'{"type":"info"}\n' * 200_000)

    await asyncio.to_thread(send)
    (viewer,) = [v for v in served.server._viewers if not v.subscribed]
    # what waits for it is about the socket's high-water mark, not 60 MB of answers
    assert viewer.writer.transport.get_write_buffer_size() <= 1024 * 1024
    flood.close()
    assert isinstance(await asyncio.to_thread(call, served.server.path, AskInfo()), Info)


async def test_viewers_tell_the_monitor_the_nodes_they_show(served: Served) -> None:
    """The `interest` hint: the union of what every connected viewer shows reaches the
    monitor (whose prom source reads their detail every tick); a viewer gone takes its
    nodes with it."""
    names = [n.name for n in served.monitor.latest.nodes] if served.monitor.latest else []
    first = SocketFeed(served.monitor.layout, served.server.path)
    second = SocketFeed(served.monitor.layout, served.server.path)
    await first.connect(lambda s: None)
    await second.connect(lambda s: None)
    try:
        first.show_interest(names[:2])
        second.show_interest(names[1:3])
        await until_async(lambda: served.monitor.in_view == set(names[:3]), 20, "both viewers' nodes")
    finally:
        await second.stop()
    await until_async(lambda: served.monitor.in_view == set(names[:2]), 20, "the first viewer's nodes alone")
    await first.stop()
    await until_async(lambda: served.monitor.in_view == set(), 20, "no viewer, no nodes")
