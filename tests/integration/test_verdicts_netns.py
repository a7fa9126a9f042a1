"""A real link set down on a real host: the node turns link-starved within the hold time
and clears once the link is back. Hosts are network namespaces with their own sshd; the
SSH source streams the probe from each, so the port state comes from the host's sysfs.

A node's node_exporter page killed while its dcgm-exporter page answers: the node turns
blind, with the dead page as the reason, within the hold time, and clears once the page
is back. Each page is its own process inside the host's namespace (tests/support/netns_exporter.py)
serving the host's real sysfs counters; the scrape source reads them over the mgmt net."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from infertop.layouts import parse_layout
from infertop.monitor.monitor import Monitor
from infertop.monitor.snapshot import NodeView, Snapshot
from tests.support.netns import PYTHON, NetnsCluster, NsHost, missing_requirements
from tests.support.port_file_process import stop, wait_for_port
from tests.support.waiting import until_async

pytestmark = [pytest.mark.netns, pytest.mark.integration]

HOLD_S = 1.5
CLEAR_S = 1.5
INTERVAL_S = 0.5


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NetnsCluster]:
    why = missing_requirements()
    if why is not None:
        pytest.skip(why)
    built = NetnsCluster(size=2, workdir=tmp_path_factory.mktemp("verdict-netns")).build()
    try:
        yield built
    finally:
        built.teardown()


def layout_text(cluster: NetnsCluster) -> str:
    # json.dumps writes a valid TOML basic string for a path
    return f"""
[cluster]
name = "netns-verdicts"
interval_s = {INTERVAL_S}
window_s = 2

[thresholds]
hold_s = {HOLD_S}
clear_s = {CLEAR_S}

[ssh]
config = {json.dumps(str(cluster.ssh_config))}
known_hosts = {json.dumps(str(cluster.known_hosts))}
python = {json.dumps(PYTHON)}
connect_timeout_s = 5

[[nodes]]
hosts = "h[0-1]"
ssh = "{{host}}"
nics = [{{ name = "data0" }}]
"""


async def watch(
    monitor: Monitor, until: Callable[[Snapshot], bool], timeout_s: float, on_frame: Callable[[Snapshot], None]
) -> tuple[Snapshot, float]:
    """Tick every interval until `until` holds; every frame goes through `on_frame` first."""
    frames: list[Snapshot] = []

    def reached() -> bool:
        frames.append(monitor.tick())
        on_frame(frames[-1])
        return until(frames[-1])

    await until_async(reached, timeout_s, "the frame", every_s=INTERVAL_S / 2, detail=lambda: verdicts(frames[-1]))
    return frames[-1], time.time()


def verdicts(frame: Snapshot) -> dict[str, list[str]]:
    return {n.name: [f"{v.kind}: {v.detail}" for v in n.verdicts] for n in frame.nodes}


def node(frame: Snapshot, name: str) -> NodeView:
    return next(n for n in frame.nodes if n.name == name)


async def test_link_down_makes_the_node_link_starved_until_restored(cluster: NetnsCluster) -> None:
    h0 = cluster.hosts[0]
    monitor = Monitor(parse_layout(layout_text(cluster)))
    await monitor.start(tick=False)

    def h1_stays_clean(frame: Snapshot) -> None:
        h1 = node(frame, "h1")
        assert h1.status != "ok" or h1.verdicts == [], verdicts(frame)

    def ready(frame: Snapshot) -> bool:
        return all(n.status == "ok" and any(x.name == "data0" for x in n.nics) for n in frame.nodes)

    try:
        frame, _ = await watch(monitor, ready, 45.0, lambda f: None)
        assert verdicts(frame) == {"h0": [], "h1": []}
        cluster.send(cluster.hosts[1], h0, 2_000_000)  # traffic on the data link, both ends

        cluster.set_link(h0, up=False)
        down_at = time.time()
        frame, seen_at = await watch(
            monitor, lambda f: bool(node(f, "h0").verdicts), 20.0, h1_stays_clean
        )
        v = node(frame, "h0").verdicts
        assert [(x.kind, x.detail) for x in v] == [("link-starved", "data0 down")]
        assert v[0].severity == "critical"
        # never sooner than the hold time (it counts from the first sample that saw it down)
        assert seen_at - down_at >= HOLD_S

        cluster.set_link(h0, up=True)
        up_at = time.time()
        frame, cleared_at = await watch(
            monitor, lambda f: node(f, "h0").verdicts == [] and node(f, "h0").status == "ok", 20.0,
            h1_stays_clean,
        )
        assert cleared_at - up_at >= CLEAR_S
        assert verdicts(frame) == {"h0": [], "h1": []}
    finally:
        cluster.set_link(h0, up=True)
        await monitor.stop()


EXPORTER = Path(__file__).parent.parent / "support" / "netns_exporter.py"
PAGE_PORTS = {"dcgm": 9400, "node": 9100}


def start_page(cluster: NetnsCluster, host: NsHost, kind: str) -> subprocess.Popen[bytes]:
    """One exporter page inside the host's namespace, on the host's mgmt address."""
    port_file = cluster.workdir / f"{host.alias}-{kind}.port"
    port_file.unlink(missing_ok=True)
    proc = subprocess.Popen(
        ["ip", "netns", "exec", host.ns, sys.executable, str(EXPORTER), kind, host.mgmt_ip,
         str(PAGE_PORTS[kind]), str(port_file)],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(proc, port_file, f"{kind} page on {host.alias}")
    except AssertionError:
        stop(proc)
        raise
    return proc


def page_url(host: NsHost, kind: str) -> str:
    return f"http://{host.mgmt_ip}:{PAGE_PORTS[kind]}/metrics"


def scrape_layout_text(cluster: NetnsCluster) -> str:
    nodes = "".join(
        f"""
[[nodes]]
name = "{h.alias}"
role = "decode"
gpus = 2
metrics = ["{page_url(h, 'dcgm')}", "{page_url(h, 'node')}"]
nics = [{{ name = "data0" }}]
"""
        for h in cluster.hosts
    )
    return f"""
[cluster]
name = "netns-blind"
interval_s = {INTERVAL_S}
window_s = 2

[thresholds]
hold_s = {HOLD_S}
clear_s = {CLEAR_S}
{nodes}"""


async def test_dead_node_exporter_page_makes_the_node_blind_until_restored(cluster: NetnsCluster) -> None:
    h0, h1 = cluster.hosts[0], cluster.hosts[1]
    pages = {(h.alias, kind): start_page(cluster, h, kind) for h in (h0, h1) for kind in PAGE_PORTS}
    monitor = Monitor(parse_layout(scrape_layout_text(cluster)))
    await monitor.start(tick=False)

    def h1_stays_clean(frame: Snapshot) -> None:
        assert node(frame, "h1").verdicts == [], verdicts(frame)

    def ready(frame: Snapshot) -> bool:
        return all(
            n.status == "ok" and len(n.gpus) == 2 and any(x.name == "data0" and x.state for x in n.nics)
            for n in frame.nodes
        )

    try:
        frame, _ = await watch(monitor, ready, 30.0, lambda f: None)
        assert verdicts(frame) == {"h0": [], "h1": []}
        assert frame.cluster.blind_nodes == 0

        stop(pages[("h0", "node")])
        dead_at = time.time()
        frame, seen_at = await watch(monitor, lambda f: bool(node(f, "h0").verdicts), 20.0, h1_stays_clean)
        h0_view = node(frame, "h0")
        reason = f"links unknown: node_exporter page failed (cannot connect to {page_url(h0, 'node')})"
        # its dcgm-exporter page answers: the node is ok, and blind on its links
        assert h0_view.status == "ok"
        assert [(v.kind, v.detail, v.severity) for v in h0_view.verdicts] == [("blind", reason, "warning")]
        assert seen_at - dead_at >= HOLD_S
        assert frame.cluster.blind_nodes == 1
        assert frame.to_json_dict()["nodes"][0]["verdicts"][0]["kind"] == "blind"  # type: ignore[index]

        pages[("h0", "node")] = start_page(cluster, h0, "node")
        back_at = time.time()
        frame, cleared_at = await watch(
            monitor, lambda f: node(f, "h0").verdicts == [], 20.0, h1_stays_clean
        )
        assert cleared_at - back_at >= CLEAR_S
        assert verdicts(frame) == {"h0": [], "h1": []} and frame.cluster.blind_nodes == 0
    finally:
        await monitor.stop()
        for proc in pages.values():
            if proc.poll() is None:
                stop(proc)
