"""Monitor.tick on recorded realistic samples, without pacing or sources: the same work
every run, so a change is compared by CPU time or by instruction count (callgrind) on a
shared machine, paired.

    python -m benchmarks.replay_tick record OUT.pickle [NODES] [ROUNDS]    # from the demo, once
    python -m benchmarks.replay_tick run OUT.pickle [TICKS]                # CPU of each tick
    valgrind --tool=callgrind --callgrind-out-file=cg.out python -m benchmarks.replay_tick run OUT.pickle 5

`record` runs `infertop demo --serve-only` (realistic pages, 128 nodes by default) and
polls each source of its layout ROUNDS times, the samples restamped a second apart, kept
with the layout. `run` feeds them into a fresh Monitor second by second (its clock the samples')
and ticks once a second, each snapshot encoded as the channel does.
"""

from __future__ import annotations

import asyncio
import pickle
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.common import demo_serving


async def _record(layout_path: Path, rounds: int) -> dict[str, Any]:
    """`rounds` polls of each of the layout's sources, one after another as fast as they
    go (a shared machine cannot keep 1 s), restamped one second apart."""
    from infertop.collectors.sources.registry import build_sources
    from infertop.collectors.sources.source import PollingSource
    from infertop.layouts.loader import load_layout

    sources = [s for s in build_sources(load_layout(layout_path)) if isinstance(s, PollingSource)]
    kept: list[Any] = []
    base = time.time()
    for k in range(rounds):
        for source in sources:
            for sample in await source.poll():
                kept.append(sample.model_copy(update={"taken_at": base + k + 0.2}))
    for source in sources:
        await source.close()
    return {"layout": layout_path.read_text(), "samples": kept}


def record(out: Path, nodes: int, seconds: float) -> None:
    with demo_serving(nodes) as path:
        doc = asyncio.run(_record(path, int(seconds)))
    out.write_bytes(pickle.dumps(doc))
    print(f"{out}: {len(doc['samples'])} samples")


def run(path: Path, ticks: int) -> list[float]:
    import tempfile

    from infertop.layouts.loader import load_layout
    from infertop.monitor.channel.protocol import encode_snapshot
    from infertop.monitor.monitor import Monitor

    doc = pickle.loads(path.read_bytes())
    samples = sorted(doc["samples"], key=lambda s: s.taken_at)
    with tempfile.TemporaryDirectory() as tmp:
        layout_path = Path(tmp) / "layout.toml"
        layout_path.write_text(doc["layout"])
        layout = load_layout(layout_path)
    start = samples[0].taken_at
    now = [start]
    monitor = Monitor(layout, sources=[], clock=lambda: now[0])
    cpu: list[float] = []
    i = 0
    second = start + 1.0
    while i < len(samples) and len(cpu) < ticks:
        while i < len(samples) and samples[i].taken_at < second:
            monitor.fleet.ingest(samples[i])
            i += 1
        now[0] = second + 0.5
        c0 = time.process_time()
        encode_snapshot(monitor.tick(now[0]))
        cpu.append(time.process_time() - c0)
        second += 1.0
    return cpu


def main() -> int:
    verb, path = sys.argv[1], Path(sys.argv[2])
    if verb == "record":
        record(path, int(sys.argv[3]) if len(sys.argv) > 3 else 128, float(sys.argv[4]) if len(sys.argv) > 4 else 30)
        return 0
    cpu = run(path, int(sys.argv[3]) if len(sys.argv) > 3 else 30)
    steady = sorted(cpu[12:]) or sorted(cpu)
    print(f"{len(cpu)} ticks; CPU a tick after the window filled: median {1e3 * steady[len(steady) // 2]:.1f} ms, "
          f"total {sum(cpu):.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
