"""Issue 15's done-when, measured as a user runs it: the served cluster, the monitor
(`infertop record`) and the TUI (`infertop attach`, in tmux at 200x60) each in its own
process, for a few minutes; then the session record says, tick by tick, which nodes the
monitor showed stale, unreachable or in error (none should be: the cluster is healthy),
which verdicts it raised beyond the scripted ones, how old the newest samples were, and
when it said it was lagging. CPU of the monitor and the viewer is sampled from /proc.

    python -m benchmarks.trial_tui [--nodes 128] [--seconds 300] [--pages realistic]

Not part of `make bench` (it takes minutes); its figures are in BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from benchmarks.bench_realistic import _cpu_s
from infertop.demo.scenario import trouble_nodes
from infertop.monitor.record.recording import Recording

ROOT = Path(__file__).resolve().parent.parent


def _pct(values: list[float], q: float) -> float:
    return sorted(values)[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


def _workers_cpu_s(pid: int) -> float:
    """CPU seconds of a monitor's scrape workers (collectors.sources.scrape_shards), if any."""
    total = 0.0
    for child in psutil.Process(pid).children(recursive=True):
        try:
            times = child.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += times.user + times.system
    return total


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--nodes", type=int, default=128)
    p.add_argument("--seconds", type=float, default=300.0)
    p.add_argument("--pages", default="realistic")
    p.add_argument("--size", default="200x60")
    p.add_argument("--no-viewer", action="store_true", help="the monitor alone (where tmux is missing)")
    args = p.parse_args()
    if shutil.which("tmux") is None and not args.no_viewer:
        sys.exit("tmux is needed (or --no-viewer)")
    tmp = Path(tempfile.mkdtemp(prefix="infertop-trial-"))
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "PYTHONPATH": path, "INFERTOP_STATE_DIR": str(tmp / "state")}
    py = [sys.executable, "-m", "infertop"]
    layout = tmp / "demo.toml"
    server = subprocess.Popen([*py, "demo", "--serve-only", "--nodes", str(args.nodes), "--pages", args.pages,
                               "--layout-out", str(layout)], env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    while not layout.exists():
        if server.poll() is not None:
            sys.exit(f"the served cluster did not start (exit code {server.returncode}): "
                     f"try `{' '.join(py)} demo --serve-only` by hand")
        time.sleep(0.2)
    time.sleep(1.0)
    record = tmp / "trial.sqlite"
    monitor = subprocess.Popen([*py, "record", "--layout", str(layout), "--record", str(record), "-q"],
                               env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(3.0)
    session = f"trial{os.getpid()}"
    viewer_pid = os.getpid()  # with --no-viewer: this process, which sleeps
    if not args.no_viewer:
        width, height = args.size.split("x")
        command = " ".join([f"INFERTOP_STATE_DIR={env['INFERTOP_STATE_DIR']}", f"PYTHONPATH={path}",
                            sys.executable, "-m", "infertop", "attach", "--layout", str(layout)])
        subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", width, "-y", height, command],
                       check=True)
        time.sleep(2.0)
        viewer_pid = int(subprocess.run(["tmux", "list-panes", "-t", session, "-F", "#{pane_pid}"],
                                        capture_output=True, text=True, check=True).stdout.split()[0])
    start = time.monotonic()
    cpu0 = {"monitor": _cpu_s(monitor.pid), "viewer": _cpu_s(viewer_pid), "server": _cpu_s(server.pid),
            "workers": _workers_cpu_s(monitor.pid)}
    time.sleep(args.seconds)
    wall = time.monotonic() - start
    cpu = {k: 100 * (_cpu_s(pid) - cpu0[k]) / wall
           for k, pid in (("monitor", monitor.pid), ("viewer", viewer_pid), ("server", server.pid))}
    cpu["workers"] = 100 * (_workers_cpu_s(monitor.pid) - cpu0["workers"]) / wall
    screen = ""
    if not args.no_viewer:
        screen = subprocess.run(["tmux", "capture-pane", "-p", "-t", session], capture_output=True,
                                text=True).stdout
        subprocess.run(["tmux", "kill-session", "-t", session], check=False)
    monitor.send_signal(signal.SIGTERM)
    monitor.wait(30)
    server.send_signal(signal.SIGTERM)
    server.wait(30)

    rec = Recording.load(record)
    scripted = {(node, kind) for kind, node in trouble_nodes(args.nodes).items()}
    expected_kinds = {"ports_down": "link-starved", "idle": "idle", "straggler": "straggler"}
    allowed = {(node, expected_kinds.get(kind, kind)) for node, kind in scripted}
    not_ok: dict[str, int] = {}
    reasons: dict[str, int] = {}
    extra_verdicts: dict[tuple[str, str], int] = {}
    ages: list[float] = []
    # where in its second each frame was taken (the tick is due half an interval after
    # the reading instant, at most 0.9 of one when it waits for its round)
    phases: list[float] = []
    lagging = 0
    frames = 0
    warm = rec.ticks[0].at + 15.0 if rec.ticks else 0.0  # the first rates need a window
    for tick in rec.ticks:
        if tick.at < warm:
            continue
        snap = rec.snapshot(tick.id)
        if snap is None:
            continue
        frames += 1
        phases.append(tick.at % 1.0)
        if snap.monitor is not None and snap.monitor.lagging:
            lagging += 1
        for n in snap.nodes:
            if n.status != "ok":
                not_ok[n.name] = not_ok.get(n.name, 0) + 1
                why = f"{n.status}: {n.error or ''}"[:90]
                reasons[why] = reasons.get(why, 0) + 1
            if n.age_s is not None:
                ages.append(n.age_s)
            for v in n.verdicts:
                if (n.name, v.kind) not in allowed and v.kind != "blind":
                    extra_verdicts[(n.name, v.kind)] = extra_verdicts.get((n.name, v.kind), 0) + 1
    print(f"nodes {args.nodes}, pages {args.pages}, {wall:.0f} s, {frames} recorded frames after warm-up, "
          f"{os.cpu_count()} cores{', no viewer' if args.no_viewer else ''}")
    workers = os.environ.get("INFERTOP_SCRAPE_WORKERS", "default")
    print(f"CPU % of one core: monitor {cpu['monitor']:.0f} + its scrape workers {cpu['workers']:.0f} "
          f"(INFERTOP_SCRAPE_WORKERS={workers}), viewer {cpu['viewer']:.0f} "
          f"(together {cpu['monitor'] + cpu['workers'] + cpu['viewer']:.0f}), served cluster {cpu['server']:.0f}")
    print(f"nodes ever not ok: {len(not_ok)} ({sum(not_ok.values())} node-frames)")
    if reasons:
        print("  why:", sorted(reasons.items(), key=lambda kv: -kv[1])[:4])
    print(f"verdicts beyond the scripted ones: {len(extra_verdicts)} {sorted(extra_verdicts)[:8]}")
    print(f"newest-sample age s: median {statistics.median(ages) if ages else float('nan'):.2f}, "
          f"p99 {_pct(ages, 0.99):.2f}, max {max(ages) if ages else float('nan'):.2f}")
    old = sum(1 for a in ages if a >= 1.0)
    print(f"node-frames with a sample 1 s old or older: {old} of {len(ages)} ({100 * old / max(len(ages), 1):.1f} %)")
    print(f"frame taken at (s into its second): median {statistics.median(phases) if phases else float('nan'):.2f}, "
          f"p99 {_pct(phases, 0.99):.2f}")
    print(f"frames with the monitor saying it lags: {lagging} of {frames}")
    print("screen at the end:")
    print("\n".join(screen.splitlines()[:12]))
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
