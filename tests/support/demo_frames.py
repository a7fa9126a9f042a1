"""The demo's frames, frozen: what the real monitor made of the demo cluster (16 and 128
nodes), recorded once by `python -m tests.support.demo_frames` and kept in
`tests/fixtures/tui/`, so that the screen tests over sizes draw real frames without
starting the demo each time.

Made by the real path: `infertop demo --serve-only` serves the simulated cluster,
`infertop record` reads it through the layout's sources for `RECORD_S` seconds (past the
first verdict window), and the last frames of the record are written out with their layout.
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from infertop.layouts.model import Layout
from infertop.monitor.feeds import Publish
from infertop.monitor.record.recording import Recording
from infertop.monitor.snapshot import Snapshot
from tests.support.demo_server import serving_demo
from tests.support.paths import FIXTURES, infertop_bin

SIZES = (16, 128)
RECORD_S = 40.0
# at 128 nodes of realistic pages, one shared machine reads them in more than a second
# (every node timed out at 1 s): read at a pace this machine keeps
INTERVAL_S = {16: 1.0, 128: 4.0}
FRAMES_KEPT = 3  # enough for the sparklines to draw a line; the fixtures stay small


def fixture_path(nodes: int) -> Path:
    return FIXTURES / "tui" / f"demo-{nodes}.json.gz"


@dataclass
class DemoFrames:
    layout: Layout
    frames: list[Snapshot]


@cache
def demo_frames(nodes: int) -> DemoFrames:
    """The frozen frames of the `nodes`-node demo (read once a test process)."""
    data = json.loads(gzip.decompress(fixture_path(nodes).read_bytes()))
    return DemoFrames(Layout.model_validate_json(data["layout"]),
                      [Snapshot.model_validate_json(f) for f in data["frames"]])


class DemoFramesFeed:
    """A feed that publishes the frozen frames once, in order (the app's real door)."""

    def __init__(self, nodes: int) -> None:
        frozen = demo_frames(nodes)
        self.layout = frozen.layout
        self.frames = frozen.frames

    async def start(self, publish: Publish) -> None:
        for frame in self.frames:
            publish(frame)

    async def stop(self) -> None:
        pass


def record(nodes: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        layout = Path(tmp) / "layout.toml"
        store = Path(tmp) / "session.sqlite"
        with serving_demo(layout, "--nodes", str(nodes)):
            interval_s = INTERVAL_S.get(nodes, 4.0)
            duration_s = RECORD_S * interval_s
            subprocess.run([infertop_bin(), "record", "--layout", str(layout), "--record", str(store),
                            "--interval", str(interval_s), "--duration", str(duration_s), "-q"],
                           check=True, timeout=duration_s + 120)
        recording = Recording.load(store)
        try:
            ids = [tick.id for tick in recording.ticks][-FRAMES_KEPT:]
            frames = [recording.snapshot(i) for i in ids]
            assert recording.layout is not None
            data = {"layout": recording.layout.model_dump_json(),
                    "frames": [f.model_dump_json() for f in frames if f is not None]}
        finally:
            recording.close()
    fixture_path(nodes).parent.mkdir(parents=True, exist_ok=True)
    fixture_path(nodes).write_bytes(gzip.compress(json.dumps(data).encode(), mtime=0))


if __name__ == "__main__":
    for size in [int(a) for a in sys.argv[1:]] or SIZES:
        record(size)
