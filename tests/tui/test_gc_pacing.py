"""Garbage is collected between frames, not while one is drawn (collectors.process.gc_pacing).

At 128 nodes the collector, left to its thresholds, ran inside the viewer's frame
handler and paint (up to 84 ms at once): one frame in three took over 50 ms. A real
app with its every panel gets frames from a frozen feed; the collector's own callbacks
say when it ran.
"""

from __future__ import annotations

import gc
import weakref

from test_layout_passes import next_frame

from infertop.collectors.process.gc_pacing import (
    FULL_COLLECTION_EVERY_FRAMES,
    PACED_GEN0_THRESHOLD,
    PacedCollector,
)
from infertop.tui.app import InfertopApp
from tests.support.tui_helpers import FrozenFeed, NodeSpec, wait_for


class Collections:
    """Every collection the interpreter runs, by generation, while in use."""

    def __init__(self) -> None:
        self.generations: list[int] = []

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self.generations.append(info["generation"])

    def __enter__(self) -> Collections:
        gc.callbacks.append(self)
        return self

    def __exit__(self, *_: object) -> None:
        gc.callbacks.remove(self)


def test_the_paced_collector_collects_once_a_frame_and_everything_now_and_then() -> None:
    before = gc.get_threshold()
    collector = PacedCollector()
    collector.install()
    try:
        assert gc.get_threshold()[0] == PACED_GEN0_THRESHOLD
        with Collections() as seen:
            for _ in range(FULL_COLLECTION_EVERY_FRAMES):
                collector.after_frame()
        # young and middle generations once a frame, all of them once in so many frames
        assert seen.generations.count(1) == FULL_COLLECTION_EVERY_FRAMES - 1
        assert seen.generations.count(2) == 1 and seen.generations[-1] == 2
    finally:
        collector.uninstall()
    assert gc.get_threshold() == before
    with Collections() as seen:
        collector.after_frame()  # not installed: does nothing
    assert seen.generations == []


def test_a_frozen_collector_thaws_what_it_froze() -> None:
    collector = PacedCollector(freeze=True)
    collector.install()
    try:
        assert gc.get_freeze_count() > 0  # this process's long-lived objects, out of full collections
    finally:
        collector.uninstall()
    assert gc.get_freeze_count() == 0


async def test_the_viewer_collects_after_each_frame_is_drawn_not_while_drawing() -> None:
    specs = [NodeSpec("decode-01"), NodeSpec("decode-02"), NodeSpec("prefill-01", role="prefill")]
    feed = FrozenFeed(specs, ticks=4)
    app = InfertopApp(feed)
    before = gc.get_threshold()
    async with app.run_test(size=(160, 45)) as pilot:
        await wait_for(pilot, lambda: app.overview.snapshot is feed.frames[-1])
        assert app.collector.installed
        drawing: list[int] = []  # collections that ran inside a frame's handler
        render = app.render_snapshot

        with Collections() as seen:

            def timed(snapshot: object) -> None:
                start = len(seen.generations)
                render(snapshot)  # type: ignore[arg-type]
                drawing.extend(seen.generations[start:])

            app.render_snapshot = timed  # type: ignore[method-assign]
            for k in range(1, 6):
                # garbage of a frame's size, as reading a 128-node snapshot makes
                ballast = [[{"k": i}] for i in range(50_000)]
                del ballast
                frame = next_frame(feed.frames[-1], k)
                app.publish(frame)
                await wait_for(pilot, lambda frame=frame: app.overview.snapshot is frame)  # type: ignore[misc]
                await pilot.pause()
        assert drawing == []
        assert seen.generations.count(1) >= 5  # one after each frame, once it was drawn
    assert gc.get_threshold() == before  # the app gave the process its thresholds back


async def test_the_frame_a_new_one_replaces_is_let_go_once_the_new_one_is_drawn() -> None:
    # freeing a 128-node frame (~20k objects) took 3-5 ms from drawing the next one
    specs = [NodeSpec("decode-01"), NodeSpec("prefill-01", role="prefill")]
    feed = FrozenFeed(specs, ticks=3)
    app = InfertopApp(feed)
    async with app.run_test(size=(160, 45)) as pilot:
        await wait_for(pilot, lambda: app.overview.snapshot is feed.frames[-1])
        old = next_frame(feed.frames[-1], 1)
        app.publish(old)
        await wait_for(pilot, lambda old=old: app.overview.snapshot is old)  # type: ignore[misc]
        await pilot.pause()
        freed: list[bool] = []
        weakref.finalize(old, freed.append, True)
        freed_while_drawing: list[bool] = []
        render = app.render_snapshot

        def timed(snapshot: object) -> None:
            render(snapshot)  # type: ignore[arg-type]
            freed_while_drawing.append(bool(freed))

        app.render_snapshot = timed  # type: ignore[method-assign]
        new = next_frame(feed.frames[-1], 2)
        del old
        app.publish(new)
        await wait_for(pilot, lambda: app.overview.snapshot is new)
        await pilot.pause()
        assert freed_while_drawing == [False]
        assert freed == [True]
