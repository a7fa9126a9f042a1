"""One process, no real-time pacing: the prom source's poll against the replay server and
Monitor.tick, under cProfile (or timed by parts), so where a tick's CPU goes is seen.

    python -m benchmarks.prom_replay.profile_tick NODES [TICKS] [--profile OUT.pstats]
"""

from __future__ import annotations

import asyncio
import cProfile
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.bench_scale import layout_for
from benchmarks.common import rss_bytes
from benchmarks.prom_replay.server import Replay
from infertop.demo.backends import free_port


async def _ticks(layout_path: Path, ticks: int, interval_s: float, profile: cProfile.Profile | None) -> None:
    from infertop.layouts.loader import load_layout
    from infertop.monitor.channel.protocol import encode_snapshot
    from infertop.monitor.monitor import Monitor

    monitor = Monitor(load_layout(layout_path))
    source = monitor.sources[0]
    # scrape k of the replay: stepped by the clock this source reads
    t = [time.time() - ticks * interval_s]
    source.clock = lambda: t[0]  # type: ignore[attr-defined]
    if profile is not None:
        # the answers' decoding and grouping run on the source's threads: run them here,
        # where cProfile sees them
        async def inline(fn, *args, executor=None):  # type: ignore[no-untyped-def]
            return fn(*args)

        source._call = inline  # type: ignore[attr-defined]
    for i in range(ticks):
        measured = profile is not None and i >= 2
        c0, w0 = time.process_time(), time.perf_counter()
        if measured:
            profile.enable()  # type: ignore[union-attr]
        samples = await source.poll()  # type: ignore[attr-defined]
        c1 = time.process_time()
        for s in samples:
            monitor.fleet.ingest(s)
        c2 = time.process_time()
        snap = monitor.tick(t[0] + 0.3)
        c3 = time.process_time()
        encoded = encode_snapshot(snap)
        c4 = time.process_time()
        if measured:
            profile.disable()  # type: ignore[union-attr]
        print(f"tick {i}: poll {c1 - c0:.3f} ingest {c2 - c1:.3f} Monitor.tick {c3 - c2:.3f} "
              f"encode {c4 - c3:.3f} (CPU s); wall {time.perf_counter() - w0:.2f} s; "
              f"{len(samples)} samples, snapshot {len(encoded) / 1e6:.1f} MB, RSS {rss_bytes() / 2**20:.0f} MiB",
              flush=True)
        t[0] += interval_s
    await source.close()  # type: ignore[attr-defined]


def main() -> int:
    nodes = int(sys.argv[1])
    ticks = int(sys.argv[2]) if len(sys.argv) > 2 and not sys.argv[2].startswith("-") else 6
    out = sys.argv[sys.argv.index("--profile") + 1] if "--profile" in sys.argv else None
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "benchmarks.prom_replay.server", str(nodes), str(port)],
                              stdout=subprocess.PIPE)
    try:
        assert server.stdout is not None
        server.stdout.readline()
        replay = Replay(nodes)
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "layout.toml"
            path.write_text(layout_for(replay, nodes, f"http://127.0.0.1:{port}"))
            profile = cProfile.Profile() if out else None
            asyncio.run(_ticks(path, ticks, replay.interval_s, profile))
            if profile is not None and out:
                profile.dump_stats(out)
    finally:
        server.terminate()
        server.wait(10)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
