"""Bytes the terminal receives from the TUI: the real `infertop demo` in tmux at 160x45,
its output recorded by `script` with timing, for the 16- and 128-node demos.

    python -m benchmarks.run_all bench_terminal_bytes

Over a jump host or a slow link the bytes a monitor writes are what makes it smooth or
laggy (`top -d 1` writes ~5 KB/s at this size). Measured in steady state (after the demo's
first verdicts), over `SECONDS`: bytes per second as written, and bytes per frame (a
frame: an update that rewrote the header's clock). On a loaded machine frames come less
often than the 1 s interval, so the bytes a second at one frame a second (bytes per frame
× 1) is the figure set against the target; the load average is in the row.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import Row

SIZE = (160, 45)
WARMUP_S = 75.0  # past the first verdicts (hold 10 s, idle 30 s) and their first minute: steady
SECONDS = 30.0
TARGET_16_BYTES_PER_S = 10_000
COMMAND = "python -m benchmarks.run_all bench_terminal_bytes"
HEADER_CLOCK = re.compile(rb"\x1b\[1;\d+H")  # a write starting on the header's line


def _updates(data: bytes, timing: str) -> list[tuple[float, bytes]]:
    """The recording cut into updates: chunks written within 30 ms of each other."""
    out: list[tuple[float, bytes]] = []
    at, offset = 0.0, 0
    for line in timing.splitlines():
        delay, count = line.split()
        at += float(delay)
        chunk = data[offset:offset + int(count)]
        offset += int(count)
        if out and at - out[-1][0] < 0.03:
            out[-1] = (out[-1][0], out[-1][1] + chunk)
        else:
            out.append((at, chunk))
    return out


def measure(nodes: int, seconds: float = SECONDS, warmup_s: float = WARMUP_S) -> dict[str, float]:
    """Run the demo in tmux under `script`; bytes/s and bytes per frame in steady state."""
    infertop = str(Path(sys.executable).with_name("infertop"))
    with tempfile.TemporaryDirectory(prefix="infertop-bytes-") as tmp:
        out, timing, sock = Path(tmp) / "typescript", Path(tmp) / "timing", Path(tmp) / "tmux"
        env = {**os.environ, "INFERTOP_STATE_DIR": str(Path(tmp) / "state")}
        demo = f"{infertop} demo --nodes {nodes}"
        subprocess.run(
            ["tmux", "-S", str(sock), "new-session", "-d", "-x", str(SIZE[0]), "-y", str(SIZE[1]),
             f"script -q -f --log-timing {timing} -c '{demo}' {out}"],
            check=True, env=env,
        )
        try:
            time.sleep(warmup_s)  # the steady picture is what is measured: the sleep is the point
            start_at = time.monotonic()
            start_bytes = out.stat().st_size
            time.sleep(seconds)  # the window measured
            took = time.monotonic() - start_at
            written = out.stat().st_size - start_bytes
            load = os.getloadavg()[0]
            updates = _updates(out.read_bytes(), timing.read_text())
        finally:
            subprocess.run(["tmux", "-S", str(sock), "send-keys", "q"], check=False)
            time.sleep(2.0)  # the demo's own stop (its children) before the server goes
            subprocess.run(["tmux", "-S", str(sock), "kill-server"], check=False, capture_output=True)
    end = updates[-1][0] if updates else 0.0
    window = [chunk for at, chunk in updates if end - seconds <= at <= end]
    frames = sum(1 for chunk in window if HEADER_CLOCK.search(chunk))
    return {
        "bytes_per_s": written / took,
        "frames_per_s": frames / seconds,
        "bytes_per_frame": sum(len(c) for c in window) / max(frames, 1),
        "load": load,
    }


def run() -> list[Row]:
    if shutil.which("tmux") is None or shutil.which("script") is None:
        return [Row("terminal bytes", "not measured", "—", "tmux and script are needed", COMMAND)]
    rows = []
    for nodes in (16, 128):
        got = measure(nodes)
        at_one_frame = got["bytes_per_frame"]
        target = TARGET_16_BYTES_PER_S if nodes == 16 else None
        verdict = "info" if target is None else (
            "met" if at_one_frame <= target else f"missed by {(at_one_frame - target) / 1000:.1f} KB/s")
        rows.append(Row(
            f"terminal bytes, {nodes}-node demo at {SIZE[0]}x{SIZE[1]}: per frame (= bytes/s at the 1 s "
            f"interval) / as written here (KB/s; {got['frames_per_s']:.2f} frames/s, load {got['load']:.1f})",
            f"{at_one_frame / 1000:.1f} / {got['bytes_per_s'] / 1000:.1f}",
            f"≤ {target / 1000:g} KB/s" if target else "—", verdict, COMMAND,
        ))
    return rows


if __name__ == "__main__":
    for row in run():
        print(f"{row.figure}: {row.value} ({row.verdict})")
