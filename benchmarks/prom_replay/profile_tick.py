"""One process, no real-time pacing: the prom source's poll against the replay server and
Monitor.tick, under cProfile (or timed by parts), so where a tick's CPU goes is seen.

    python -m benchmarks.prom_replay.profile_tick NODES [TICKS] [--profile OUT.pstats] [--memory]

`--memory`: after the ticks, the bytes each part of the monitor holds a node.
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


async def _ticks(layout_path: Path, ticks: int, interval_s: float, profile: cProfile.Profile | None,
                 parts: bool = False) -> None:
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
    if parts:
        _memory_by_part(monitor, encoded)


def deep_size(obj: object, seen: set[int]) -> int:
    """Bytes held by `obj` and everything it reaches that `seen` has not counted yet
    (shared objects are counted once, where first met)."""
    size = 0
    stack = [obj]
    while stack:
        o = stack.pop()
        if id(o) in seen or o is None or isinstance(o, type):
            continue
        seen.add(id(o))
        size += sys.getsizeof(o)
        if isinstance(o, dict):
            stack.extend(o.keys())
            stack.extend(o.values())
        elif isinstance(o, list | tuple | set | frozenset) or type(o).__name__ == "deque":
            stack.extend(o)  # type: ignore[arg-type]
        elif hasattr(o, "__dict__"):
            stack.append(vars(o))
            extra = getattr(o, "__pydantic_extra__", None)
            if extra:
                stack.append(extra)
        elif hasattr(o, "__slots__"):
            stack.extend(getattr(o, name) for name in o.__slots__ if hasattr(o, name))  # type: ignore[attr-defined]
    return size


def _memory_by_part(monitor: object, encoded: bytes) -> None:
    """KiB a node held by each part of the monitor, measured by walking it (deep size)."""
    import gc

    gc.collect()
    nodes = len(monitor.state.nodes)  # type: ignore[attr-defined]
    seen: set[int] = set()
    parts = [
        ("history rings (samples kept per node)", monitor.state),  # type: ignore[attr-defined]
        ("rate cache (window rates)", monitor.rates),  # type: ignore[attr-defined]
        ("the snapshot (node views, cluster, session)", monitor.latest),  # type: ignore[attr-defined]
        ("verdict tracker", monitor.verdicts),  # type: ignore[attr-defined]
        ("timeline", monitor.timeline),  # type: ignore[attr-defined]
        ("ledger", monitor.ledger),  # type: ignore[attr-defined]
        ("prom source (namer, last stamps)", monitor.sources[0]),  # type: ignore[attr-defined]
    ]
    total = 0
    for name, part in parts:
        size = deep_size(part, seen)
        total += size
        print(f"memory: {name}: {size / nodes / 1024:.1f} KiB a node ({size / 2**20:.1f} MiB)")
    print(f"memory: encoded snapshot: {len(encoded) / nodes / 1024:.1f} KiB a node")
    print(f"memory: walked in all: {total / nodes / 1024:.1f} KiB a node; RSS {rss_bytes() / 2**20:.0f} MiB "
          f"({rss_bytes() / nodes / 1024:.0f} KiB a node, the interpreter and libraries included)")


def main() -> int:
    nodes = int(sys.argv[1])
    ticks = int(sys.argv[2]) if len(sys.argv) > 2 and not sys.argv[2].startswith("-") else 6
    out = sys.argv[sys.argv.index("--profile") + 1] if "--profile" in sys.argv else None
    parts = "--memory" in sys.argv
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
            asyncio.run(_ticks(path, ticks, replay.interval_s, profile, parts))
            if profile is not None and out:
                profile.dump_stats(out)
    finally:
        server.terminate()
        server.wait(10)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
