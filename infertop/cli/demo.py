"""`infertop demo`: a simulated DeepInfer cluster on loopback, and the TUI on it.

    infertop demo [--nodes N]                  endpoints in-process + the TUI
    infertop demo --serve-only [--layout-out F] endpoints only, a layout for them in F,
                                               until SIGINT / SIGTERM
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
from pathlib import Path

from infertop.cli.argtypes import positive_float, whole_number
from infertop.cli.common import EXIT_OK, UsageError
from infertop.demo.scenario import RESTART_EVERY_S, pool_sizes, trouble_nodes
from infertop.demo.server import PAGE_SIZES, DemoServer, ServerThread, write_layout
from layouts import load_layout
from monitor.feeds import MonitorFeed
from monitor.stopping import Stop, run_stoppable

NAME = "demo"
HELP = "a simulated DeepInfer cluster on loopback, and the TUI on it"
MAX_NODES = 4096


def _nodes(text: str) -> int:
    return whole_number(text, low=2, high=MAX_NODES, unit=" nodes")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--nodes", type=_nodes, default=16, metavar="N",
                   help="simulated nodes, about a quarter prefill (default 16: 4 prefill, 12 decode)")
    p.add_argument("--serve-only", action="store_true",
                   help="serve the endpoints and write a layout for them; no TUI")
    p.add_argument("--layout-out", metavar="FILE", default=None,
                   help="where to write the layout (default: a file in the temp folder, printed)")
    p.add_argument("--host", default="127.0.0.1", help="address to serve on (default 127.0.0.1)")
    p.add_argument("--seed", type=int, default=7, help="randomness seed (default 7)")
    p.add_argument("--platform", choices=("nvidia", "ascend"), default="nvidia",
                   help="accelerators to simulate: NVIDIA GPUs (dcgm-exporter) or Ascend NPUs "
                        "(npu-exporter) (default nvidia)")
    p.add_argument("--pages", choices=PAGE_SIZES, default="realistic",
                   help="realistic (default): pages of real size, 8 data-parallel vLLM engines a node "
                        "(~300 KB), dcgm-exporter's default counters, node_exporter of a host with many "
                        "interfaces; small: only the series infertop reads (~130 lines a page)")
    p.add_argument("--restart-every", type=positive_float, default=RESTART_EVERY_S, metavar="S",
                   help=f"seconds between simulated engine restarts (default {RESTART_EVERY_S:g})")


def _layout_path(args: argparse.Namespace) -> Path:
    if args.layout_out:
        return Path(args.layout_out)
    return Path(tempfile.gettempdir()) / f"infertop-demo-{args.nodes}.toml"


def _describe(server: DemoServer, path: Path) -> str:
    prefill, decode = pool_sizes(len(server.cluster.plans))
    troubles = trouble_nodes(prefill + decode).items()
    trouble = ", ".join(f"{node} {kind.replace('_', ' ')}" for kind, node in troubles)
    ports = server.addresses.ports if server.addresses else {}
    return (
        f"infertop demo: {prefill + decode} nodes ({prefill} prefill, {decode} decode) on "
        f"{server.host}, ports {', '.join(f'{k} {v}' for k, v in ports.items())}\n"
        f"  scripted trouble: {trouble or 'none at this size'}\n"
        f"  layout: {path}\n"
    )


async def serve_until_signalled(server: DemoServer, path: Path, stop: Stop) -> None:
    await server.start()
    try:
        write_layout(server, path)
        sys.stdout.write(_describe(server, path))
        sys.stdout.flush()
        await stop.wait()
    finally:
        await server.stop()


def run(args: argparse.Namespace) -> int:
    path = _layout_path(args)
    server = DemoServer(args.nodes, host=args.host, seed=args.seed, restart_every_s=args.restart_every,
                        platform=args.platform, pages=args.pages)
    if args.serve_only:
        stop = Stop()
        try:
            run_stoppable(serve_until_signalled(server, path, stop), stop)
        except OSError as exc:
            raise UsageError(f"infertop demo: cannot serve on {args.host}: {exc.strerror or exc}") from None
        return EXIT_OK
    from tui.app import run_feed  # Textual loads only for the TUI

    thread = ServerThread(server)
    try:
        thread.start()
    except OSError as exc:
        raise UsageError(f"infertop demo: cannot serve on {args.host}: {exc.strerror or exc}") from None
    try:
        write_layout(server, path)
        return run_feed(MonitorFeed(load_layout(path)))
    finally:
        thread.stop()
        if args.layout_out is None:
            with contextlib.suppress(OSError):
                path.unlink()
