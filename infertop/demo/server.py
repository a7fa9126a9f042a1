"""Serve the simulated cluster over real HTTP on loopback, and write a layout for it.

One process, one port per endpoint type (engine, dcgm-exporter, node_exporter); a node's
page is at ``/<node>/metrics`` on each. The node_exporter pages honour node_exporter's
``collect[]`` filter (infertop/demo/node_collectors.py), and the written layout uses it:
only the four collectors infertop reads. ``/targets`` on each port answers in Prometheus'
HTTP service-discovery format (`__metrics_path__` per node), so a real Prometheus can
scrape all nodes of a 1,024-node demo from three `http_sd_configs`.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import os
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web

from infertop.demo import diagnosis, realistic, realistic_hosts
from infertop.demo.ascend import ASCEND_ENDPOINTS, ascend_nics_toml
from infertop.demo.node_collectors import (
    INFERTOP_COLLECTORS,
    UnknownCollector,
    check_collectors,
    only_collectors,
)
from infertop.demo.render import dcgm_page, engine_page, node_exporter_page
from infertop.demo.scenario import (
    BOND_MEMBER_GBPS,
    ETH_GBPS,
    GPUS_PER_NODE,
    IB_GBPS,
    IB_PORTS,
    RESTART_EVERY_S,
    SimCluster,
    SimNode,
)
from infertop.demo.ssh_node import DemoSshNodes, SshNodeAddress, write_ssh_files

GPU_HOUR_USD = 10.582  # published Blackwell rate, per GPU-hour
RESERVATION_AGO_S = 2 * 3600.0

Render = Callable[[SimNode, float], str]  # a page of a node at an instant
AnyRender = Callable[[Any, float], str]  # the default scenario's SimNode or the drill's DiagnosisNode

ENDPOINTS: dict[str, Render] = {
    "engine": engine_page,
    "dcgm": dcgm_page,
    "node": node_exporter_page,
}
# what real exporters serve (infertop/demo/realistic.py): the default
REALISTIC_ENDPOINTS: dict[str, Render] = {
    "engine": realistic.engine_page,
    "dcgm": realistic_hosts.dcgm_page,
    "node": realistic_hosts.node_exporter_page,
}
# `--scenario diagnosis`: the drill of issue 46 (infertop/demo/diagnosis.py), its own pages
DIAGNOSIS_ENDPOINTS: dict[str, Callable[[diagnosis.DiagnosisNode, float], str]] = {
    "engine": diagnosis.engine_page,
    "dcgm": diagnosis.dcgm_page,
    "node": diagnosis.node_exporter_page,
}


def collected_page(render: AnyRender) -> Callable[[Any, float, Collection[str]], str]:
    """How a page is drawn for `?collect[]=…`: the whole page through `only_collectors`,
    or, for the realistic node_exporter page, filtered as it is drawn (the same text,
    its host block filtered once a redraw instead of every request)."""
    if render is realistic_hosts.node_exporter_page:
        return realistic_hosts.collected_node_exporter_page
    return lambda node, now, collect: only_collectors(render(node, now), collect)


@dataclass(frozen=True)
class DemoAddresses:
    host: str
    ports: dict[str, int]  # endpoint type → port

    def url(self, kind: str, node: str) -> str:
        return f"http://{self.host}:{self.ports[kind]}/{node}/metrics"

    def layout_url(self, kind: str, node: str) -> str:
        """The URL a layout scrapes: node_exporter's asks only for the collectors infertop
        reads (`collect[]`), as a real deployment should (docs/exporters.md)."""
        if kind != "node":
            return self.url(kind, node)
        return self.url(kind, node) + "?" + "&".join(f"collect[]={c}" for c in INFERTOP_COLLECTORS)


class DemoServer:
    """The simulated cluster's HTTP endpoints, on the running event loop."""

    def __init__(self, nodes: int = 16, host: str = "127.0.0.1", seed: int = 7,
                 restart_every_s: float = RESTART_EVERY_S, platform: str = "nvidia",
                 pages: str = "realistic", scenario: str = "default"):
        self.scenario = scenario
        self.cluster: SimCluster | diagnosis.DiagnosisCluster
        if scenario == diagnosis.NAME:  # its own nodes (2 prefill, 6 decode) and pages
            self.cluster = diagnosis.DiagnosisCluster(restart_every_s=restart_every_s)
        else:
            self.cluster = SimCluster(nodes, started_at=time.time(), seed=seed,
                                      restart_every_s=restart_every_s)
        self.platform = platform  # "nvidia" (dcgm-exporter) or "ascend" (npu-exporter)
        # "realistic": pages of real size and shape (8 DP engines, dcgm's default
        # counters, a host with many interfaces); "small": only what infertop reads
        self.pages = pages
        if platform == "ascend":
            self.endpoints = dict(ASCEND_ENDPOINTS)
            if pages == "realistic":
                self.endpoints["engine"] = realistic.engine_page
        else:
            self.endpoints = REALISTIC_ENDPOINTS if pages == "realistic" else ENDPOINTS
        if scenario == diagnosis.NAME:
            self.endpoints = DIAGNOSIS_ENDPOINTS  # type: ignore[assignment]  # its nodes are its own
        self.host = host
        self._runners: list[web.AppRunner] = []
        self.addresses: DemoAddresses | None = None
        # the nodes read over SSH, as a node without exporters is (ssh_node.py): the
        # scripted stray process, which no exporter page carries
        self.ssh_nodes: DemoSshNodes | None = None
        self.ssh_address: SshNodeAddress | None = None
        self.serve_ssh = True  # off through a backend (--via): it scrapes every node's exporters
        self.requests = 0

    def _app(self, kind: str) -> web.Application:
        render: AnyRender = self.endpoints[kind]
        collected = collected_page(render)

        async def page(request: web.Request) -> web.Response:
            node = self.cluster.node(request.match_info["node"])
            if node is None:
                raise web.HTTPNotFound()
            # node_exporter's own filter: only the named collectors' families
            collect = request.query.getall("collect[]", []) if kind == "node" else []
            try:
                check_collectors(collect)
            except UnknownCollector as exc:
                raise web.HTTPBadRequest(text=str(exc)) from None
            self.requests += 1
            text = collected(node, time.time(), collect) if collect else render(node, time.time())
            return web.Response(text=text, content_type="text/plain", charset="utf-8",
                                headers={"X-Content-Type-Options": "nosniff"})

        async def targets(request: web.Request) -> web.Response:
            port = self.addresses.ports[kind] if self.addresses else 0
            return web.json_response([
                {
                    "targets": [f"{self.host}:{port}"],
                    "labels": {"__metrics_path__": f"/{p.name}/metrics", "node": p.name, "role": p.role},
                }
                for p in self.cluster.plans
            ])

        app = web.Application()
        app.router.add_get("/targets", targets)
        app.router.add_get("/{node}/metrics", page)
        return app

    async def start(self, ports: dict[str, int] | None = None) -> DemoAddresses:
        bound: dict[str, int] = {}
        for kind in self.endpoints:
            runner = web.AppRunner(self._app(kind), access_log=None, shutdown_timeout=0.5)
            await runner.setup()
            site = web.TCPSite(runner, self.host, (ports or {}).get(kind, 0))
            await site.start()
            self._runners.append(runner)
            bound[kind] = runner.addresses[0][1]
        self.addresses = DemoAddresses(self.host, bound)
        if (self.serve_ssh and self.platform == "nvidia" and isinstance(self.cluster, SimCluster)
                and ssh_node_names(self)):
            self.ssh_nodes = DemoSshNodes(self.cluster.node, self.endpoints["engine"])
            self.ssh_address = await self.ssh_nodes.start(self.host)
        return self.addresses

    async def stop(self) -> None:
        if self.ssh_nodes is not None:
            await self.ssh_nodes.stop()
        # together: each may wait its shutdown_timeout for requests in flight
        await asyncio.gather(*(runner.cleanup() for runner in self._runners))
        self._runners.clear()


def ssh_node_names(server: DemoServer) -> set[str]:
    """The nodes the demo serves over SSH: the scripted stray-process node, if this size has it."""
    return {p.name for p in server.cluster.plans if p.trouble == "stray_process"}


def _runs(names: list[str], apart: set[str]) -> list[list[str]]:
    """`names` cut into consecutive runs, each node of `apart` a run of its own."""
    runs: list[list[str]] = []
    for name in names:
        if name in apart or not runs or runs[-1][0] in apart:
            runs.append([name])
        else:
            runs[-1].append(name)
    return runs


def _host_range(names: list[str]) -> str:
    prefix, first = names[0].rsplit("-", 1)
    return f"{prefix}-[{first}-{names[-1].rsplit('-', 1)[1]}]"


def layout_toml(server: DemoServer, now: float | None = None, via_url: str | None = None,
                interval_s: float = 1.0, ssh_files: tuple[Path, Path] | None = None,
                window_s: float = 10.0, prom_timeout_s: float | None = None, why: str = "") -> str:
    """A layout for the served cluster: one `[[nodes]]` range per pool. With `via_url`,
    the nodes are read through the Prometheus-compatible backend there (`demo --via`),
    which scrapes them from the served `/targets` and labels each with its `node`. With
    `ssh_files` (known_hosts, ssh_config), the stray-process node is read over SSH.
    `why`: a comment on the pace chosen (infertop/demo/backends.py `via_plan`)."""
    addresses = server.addresses
    assert addresses is not None, "start the server first"
    now = time.time() if now is None else now
    start = dt.datetime.fromtimestamp(now - RESERVATION_AGO_S, dt.UTC).replace(microsecond=0)
    ascend = server.platform == "ascend"
    fabric = (
        [ascend_nics_toml()] if ascend  # the NPUs' own RoCE ports: no IB HCAs on the host
        else [f'{{ name = "{p}", expected_gbps = {IB_GBPS:g}, kind = "infiniband" }}' for p in IB_PORTS]
    )
    nics = ", ".join(
        [*fabric,
         f'{{ name = "eth0", expected_gbps = {ETH_GBPS:g}, kind = "ethernet" }}',
         # the drill's nodes have no bond (diagnosis.py)
         *([] if server.scenario == diagnosis.NAME else
           [f'{{ name = "bond0", expected_gbps = {2 * BOND_MEMBER_GBPS:g}, kind = "bond" }}'])]
    )
    lines = [
        "# Written by `infertop demo --serve-only`: a simulated DeepInfer cluster on loopback.",
        *([f"# {why}"] if why else []),
        "[cluster]",
        'name = "deepinfer-demo"',
        f"interval_s = {interval_s!r}",
        f"window_s = {window_s!r}",
        # the realistic engine page fronts 8 data-parallel engines, one GPU each (DP
        # attention): engine k holds GPU k, so the node screen shows its ranks on their GPUs
        *([f"tensor_parallel_size = {GPUS_PER_NODE // realistic.ENGINES}"]
          if server.pages == "realistic" or server.scenario == diagnosis.NAME else []),
        "",
        "[session]",
        f'reservation_start = "{start.isoformat().replace("+00:00", "Z")}"',
        "",
        "[pricing]",
        f"gpu_hour_usd = {diagnosis.GPU_HOUR_USD if server.scenario == diagnosis.NAME else GPU_HOUR_USD}",
    ]
    if server.scenario == diagnosis.NAME:  # a drill: every trouble up within 10 s of the start
        lines += ["", "[thresholds]", f"hold_s = {diagnosis.HOLD_S:g}"]
    if via_url is not None:
        # the node labels of infertop's recording rules (collectors/sources/prom_rules.py): the
        # source reads the recorded series where the backend has them
        lines += ["", "[prometheus]", f'url = "{via_url}"', 'node_label = ["node", "instance"]',
                  *([f"timeout_s = {prom_timeout_s!r}"] if prom_timeout_s is not None else [])]
    over_ssh = ssh_node_names(server) if ssh_files is not None and server.ssh_address is not None else set()
    if over_ssh and ssh_files is not None:
        lines += ["", "[ssh]", f"known_hosts = {json.dumps(str(ssh_files[0]))}",
                  f"config = {json.dumps(str(ssh_files[1]))}"]
    for role in ("prefill", "decode"):
        names = [p.name for p in server.cluster.plans if p.role == role]
        device_url = addresses.url("npu" if ascend else "dcgm", "{host}")
        pool = _host_range(names)
        for run in _runs(names, over_ssh):
            ssh = server.ssh_address if run[0] in over_ssh else None
            lines += [
                "",
                "[[nodes]]",
                *([f'name = "{run[0]}"'] if ssh is not None else [f'hosts = "{_host_range(run)}"']),
                f'role = "{role}"',
                # one fleet-map group per pool, however the pool is cut
                *([f'group = "{pool}"'] if len(names) > len(run) else []),
                f"gpus = {GPUS_PER_NODE}",
                *(['accelerator = "npu"'] if ascend else []),
                # who holds a GPU is on no exporter page: this node is read over SSH (ssh_node.py)
                *([f'ssh = "{run[0]}@{_ssh_host(ssh.host)}:{ssh.port}"'] if ssh is not None else []),
                *([
                    *([] if ssh is not None else
                      [f'metrics = ["{device_url}", "{addresses.layout_url("node", "{host}")}"]']),
                    f'engine = {{ url = "{addresses.url("engine", run[0] if ssh else "{host}")}", '
                    'profile = "deepinfer" }',
                ] if via_url is None else ['engine = { profile = "deepinfer" }']),
                f"nics = [{nics}]",
            ]
    return "\n".join(lines) + "\n"


def _ssh_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def write_layout(server: DemoServer, path: Path, via_url: str | None = None, interval_s: float = 1.0,
                 **via: Any) -> None:
    """Write atomically: a reader never sees half a layout. The SSH node's known_hosts and
    ssh_config go beside it (read over SSH only when the nodes are read directly)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    ssh_files = None
    if server.ssh_address is not None and via_url is None:
        ssh_files = write_ssh_files(path.parent.resolve(), path.stem, server.ssh_address)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(layout_toml(server, via_url=via_url, interval_s=interval_s, ssh_files=ssh_files, **via),
                   encoding="utf-8")
    tmp.replace(path)

