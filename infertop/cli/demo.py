"""`infertop demo`: a simulated DeepInfer cluster on loopback, and the TUI on it.

    infertop demo [--nodes N]                  the cluster, its monitor and the TUI
    infertop demo --scenario diagnosis         issue 46's drill: 8 nodes, five troubles
    infertop demo --serve-only [--layout-out F] endpoints only, a layout for them in F,
                                               until SIGINT / SIGTERM
    infertop demo --via prometheus|victoriametrics
                                               the same, read through a real backend
                                               (the system package) scraping the cluster

One command, three processes, as a real deployment has them: the served cluster
(`demo --serve-only`), the monitor (`record --no-record`: the demo records nothing) and
this process, the viewer, attached to the monitor's socket. The two children end with
the demo, also when the viewer is killed (`--exit-with`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, TYPE_CHECKING

from infertop.cli.argtypes import positive_float, whole_number
from infertop.cli.common import EXIT_OK, UsageError
from infertop.collectors.process.stopping import Stop, run_stoppable, watch_parent
from infertop.demo.backends import (
    BACKENDS,
    VIA_FULL_PACE_NODES,
    BackendMissing,
    backend_binary,
    free_port,
    scrape_config,
    start_backend,
    via_plan,
    write_rules,
    write_scrape_config,
)
from infertop.demo.page_sizes import PAGE_SIZES
from infertop.demo.scenario import (
    DIAGNOSIS,
    DIAGNOSIS_NODES,
    RESTART_EVERY_S,
    SCENARIOS,
    trouble_nodes,
)
from infertop.layouts import LayoutError, load_layout
from infertop.layouts.model import Layout

if TYPE_CHECKING:  # the demo server (aiohttp) loads when a demo runs, not with the CLI
    from infertop.demo.server import DemoServer

NAME = "demo"
HELP = "a simulated DeepInfer cluster on loopback, and the TUI on it"
MAX_NODES = 4096


def _nodes(text: str) -> int:
    return whole_number(text, low=2, high=MAX_NODES, unit=" nodes")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--nodes", type=_nodes, default=None, metavar="N",
                   help="simulated nodes, about a quarter prefill (default 16: 4 prefill, 12 decode)")
    p.add_argument("--scenario", choices=SCENARIOS, default="default",
                   help="default: the cluster of --nodes, its scripted trouble spread over the pools; "
                        f"{DIAGNOSIS}: an on-call drill, {DIAGNOSIS_NODES} nodes (pre-0..1, dec-0..5), "
                        "8 GPUs and 8 vLLM engines each, five troubles on from the start — a RoCE pause "
                        "storm on dec-5, a slow rank on a thermally throttled GPU on dec-3, busy-but-waiting "
                        "GPUs on dec-2, a KV block_size drift on dec-4, engine restarts on dec-1 — each on "
                        "the first screen within 10 s, its cause behind `e`")
    p.add_argument("--serve-only", action="store_true",
                   help="serve the endpoints and write a layout for them; no TUI")
    p.add_argument("--layout-out", metavar="FILE", default=None,
                   help="where to write the layout (default: a file in the temp folder, printed)")
    p.add_argument("--host", default="127.0.0.1", help="address to serve on (default 127.0.0.1)")
    p.add_argument("--seed", type=int, default=7, help="randomness seed (default 7)")
    p.add_argument("--platform", choices=("nvidia", "ascend"), default="nvidia",
                   help="accelerators to simulate: NVIDIA GPUs (dcgm-exporter) or Ascend NPUs "
                        "(npu-exporter) (default nvidia)")
    p.add_argument("--pages", choices=PAGE_SIZES, default=None,
                   help="realistic (default): pages of real size, 8 data-parallel vLLM engines a node "
                        "(~300 KB), dcgm-exporter's default counters, node_exporter of a host with many "
                        "interfaces; small: only the series infertop reads (~130 lines a page; the "
                        f"default through a backend past {VIA_FULL_PACE_NODES} nodes)")
    p.add_argument("--via", choices=("direct", *BACKENDS), default="direct",
                   help="direct (default): the monitor scrapes every node; prometheus / victoriametrics: "
                        "a real backend from the system package scrapes them, the monitor reads it "
                        "(the prom source), as at production scale")
    p.add_argument("--exit-with", type=int, default=None, help=argparse.SUPPRESS)  # the viewer's pid
    # --serve-only for --via: the backend's URL for the layout, and where its scrape config goes
    p.add_argument("--via-url", default=None, help=argparse.SUPPRESS)
    p.add_argument("--scrape-config-out", default=None, help=argparse.SUPPRESS)
    p.add_argument("--restart-every", type=positive_float, default=RESTART_EVERY_S, metavar="S",
                   help=f"seconds between simulated engine restarts (default {RESTART_EVERY_S:g})")


def _pages(args: argparse.Namespace) -> str:
    """--pages, or what the demo's size and --via hold on one machine (`via_plan`)."""
    if args.pages is not None:
        return str(args.pages)
    return "realistic" if args.via == "direct" else via_plan(args.nodes, args.via).pages


def _layout_path(args: argparse.Namespace) -> Path:
    if args.layout_out:
        return Path(args.layout_out)
    return Path(tempfile.gettempdir()) / f"infertop-demo-{args.nodes}.toml"


def _describe(server: DemoServer, path: Path) -> str:
    prefill = sum(p.role == "prefill" for p in server.cluster.plans)
    decode = len(server.cluster.plans) - prefill
    troubles = (trouble_nodes(prefill + decode).items() if server.scenario != DIAGNOSIS else
                [(p.trouble, p.name) for p in server.cluster.plans if p.trouble is not None])
    trouble = ", ".join(f"{node} {kind.replace('_', ' ')}" for kind, node in troubles
                        # the stray process is read over SSH: not there without its server
                        if kind != "stray_process" or server.ssh_address is not None)
    ports = server.addresses.ports if server.addresses else {}
    return (
        f"infertop demo: {prefill + decode} nodes ({prefill} prefill, {decode} decode) on "
        f"{server.host}, ports {', '.join(f'{k} {v}' for k, v in ports.items())}\n"
        f"  scripted trouble: {trouble or 'none at this size'}\n"
        f"  layout: {path}\n"
    )


async def serve_until_signalled(
    server: DemoServer, path: Path, stop: Stop, parent: int | None = None,
    via_url: str | None = None, scrape_config_out: str | None = None, via: str = "direct",
) -> None:
    from infertop.demo.server import write_layout

    server.serve_ssh = via_url is None  # a backend scrapes exporters only
    await server.start()
    watching = asyncio.create_task(watch_parent(parent, stop))
    try:
        plan = via_plan(len(server.cluster.plans), via)
        if scrape_config_out is not None and server.addresses is not None:
            out = Path(scrape_config_out)
            rules = write_rules(out.with_name("infertop-rules.yml")) if plan.rules else None
            ports = server.addresses.ports
            write_scrape_config(out, scrape_config(server.host, ports, plan.interval_s, rules))
        if via_url is not None:
            write_layout(server, path, via_url=via_url, interval_s=plan.interval_s, window_s=plan.window_s,
                         prom_timeout_s=plan.timeout_s, why=plan.why)
        else:
            write_layout(server, path)
        sys.stdout.write(_describe(server, path))
        sys.stdout.flush()
        await stop.wait()
    finally:
        watching.cancel()
        await server.stop()


def _wait_for_layout(
    path: Path, served: subprocess.Popen[bytes], said: IO[bytes], timeout_s: float = 60.0
) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if served.poll() is not None:
            said.seek(0)
            last = (said.read().decode(errors="replace").strip().splitlines() or [""])[-1]
            # its own one-line error (e.g. "cannot serve on HOST: …"), without the prefix twice
            raise UsageError(last or f"infertop demo: the simulated cluster exited ({served.returncode})")
        if path.exists():
            with contextlib.suppress(LayoutError):
                load_layout(path)
                return
        time.sleep(0.1)
    raise UsageError("infertop demo: the simulated cluster wrote no layout in time")


def _end(proc: subprocess.Popen[bytes] | None) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


def _forget_monitor(layout: Layout) -> None:
    from infertop.monitor.channel.paths import lock_path, log_path, socket_path

    socket = socket_path(layout)
    for leftover in (lock_path(socket), log_path(socket)):
        with contextlib.suppress(OSError):
            leftover.unlink()


def _serve_argv(args: argparse.Namespace, path: Path, via: tuple[str, Path] | None = None) -> list[str]:
    argv = [
        sys.executable, "-m", "infertop", "demo", "--serve-only", "--nodes", str(args.nodes),
        "--layout-out", str(path), "--host", args.host, "--seed", str(args.seed),
        "--platform", args.platform, "--pages", _pages(args), "--restart-every", repr(args.restart_every),
        "--scenario", args.scenario,
        "--exit-with", str(os.getpid()),
    ]
    if via is not None:
        argv += ["--via", args.via, "--via-url", via[0], "--scrape-config-out", str(via[1])]
    return argv


def run_three_processes(args: argparse.Namespace) -> int:
    """The served cluster, the monitor and (here) the viewer, each a process of its own."""
    from infertop.cli.monitors import child_env, start_monitor, view, wait_for_monitor
    from infertop.monitor.channel.client import MonitorUnavailable

    # a folder of its own: two demos of one size must not share a layout (nor a monitor)
    folder = None if args.layout_out else Path(tempfile.mkdtemp(prefix="infertop-demo-"))
    path = Path(args.layout_out) if args.layout_out else folder / f"demo-{args.nodes}.toml"  # type: ignore[operator]
    with contextlib.suppress(FileNotFoundError):
        path.unlink()  # the layout to wait for is the one this demo's cluster writes
    served = monitor = backend = None
    layout = None
    said = tempfile.TemporaryFile()
    via = None
    if args.via != "direct":
        try:
            backend_binary(args.via)  # before anything starts: one line, exit 2
        except BackendMissing as exc:
            raise UsageError(str(exc)) from None
        backend_dir = Path(tempfile.mkdtemp(prefix=f"infertop-demo-{args.via}-"))
        via = (f"http://{args.host}:{free_port(args.host)}", backend_dir / "scrape.yml")
    try:
        served = subprocess.Popen(_serve_argv(args, path, via), stdin=subprocess.DEVNULL,
                                  stdout=subprocess.DEVNULL, stderr=said, start_new_session=True,
                                  env=child_env())
        _wait_for_layout(path, served, said)
        if via is not None:
            try:
                backend = start_backend(args.via, via[1], via[1].parent, args.host,
                                        int(via[0].rsplit(":", 1)[1]))
            except (BackendMissing, RuntimeError) as exc:
                raise UsageError(str(exc)) from None
        layout = load_layout(path)
        monitor = start_monitor(layout, None, recording=False, exit_with=os.getpid())
        try:
            info = wait_for_monitor(layout, monitor)
        except MonitorUnavailable as exc:
            raise UsageError(f"infertop demo: {exc}") from None
        if info.pid != monitor.pid:  # an older monitor on --layout-out: it watches old ports
            raise UsageError(f"infertop demo: a monitor already runs for {path} (pid {info.pid}); "
                             f"stop it first: infertop stop --layout {path}")
        return view(layout, info, outlives=False)
    finally:
        said.close()
        _end(monitor)
        _end(backend)
        _end(served)
        if via is not None:
            shutil.rmtree(via[1].parent, ignore_errors=True)
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)
            if layout is not None:  # a layout of this run only: its monitor's files go with it
                _forget_monitor(layout)


def _check_scenario(args: argparse.Namespace) -> None:
    """The drill's cluster is fixed: flags that would change it are refused (one line, exit 2)."""
    if args.scenario != DIAGNOSIS:
        args.nodes = 16 if args.nodes is None else args.nodes
        return
    for flag, given, allowed in (("--nodes", args.nodes, (None, DIAGNOSIS_NODES)),
                                 ("--platform", args.platform, ("nvidia",)),
                                 ("--via", args.via, ("direct",))):
        if given not in allowed:
            raise UsageError(f"infertop demo: --scenario {DIAGNOSIS} is a fixed cluster of {DIAGNOSIS_NODES} "
                             f"NVIDIA nodes read directly; leave out {flag}")
    args.nodes = DIAGNOSIS_NODES


def run(args: argparse.Namespace) -> int:
    _check_scenario(args)
    if args.serve_only:
        from infertop.demo.server import DemoServer

        path = _layout_path(args)
        server = DemoServer(args.nodes, host=args.host, seed=args.seed, restart_every_s=args.restart_every,
                            platform=args.platform, pages=_pages(args), scenario=args.scenario)
        stop = Stop()
        try:
            run_stoppable(serve_until_signalled(server, path, stop, args.exit_with,
                                                args.via_url, args.scrape_config_out, args.via), stop)
        except OSError as exc:
            raise UsageError(f"infertop demo: cannot serve on {args.host}: {exc.strerror or exc}") from None
        return EXIT_OK
    return run_three_processes(args)
