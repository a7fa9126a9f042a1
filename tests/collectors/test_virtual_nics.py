"""Container / virtual plumbing is not read as ports, unless the layout expects it.

A Kubernetes GPU host's node_exporter serves a veth per pod, the CNI's bridges and
tunnels, docker0: every source leaves them out (collectors.virtual_nics), and keeps any
device the layout names as an expected port, whatever its name.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest
from aiohttp import web

from infertop.collectors.pages.exposition import parse_exposition
from infertop.collectors.pages.node_exporter import nic_samples_from_node_exporter
from infertop.collectors.probe import host as probe_host
from infertop.collectors.probe.bundle import probe_script
from infertop.collectors.sources.registry import build_sources
from infertop.collectors.sources.scrape import ScrapeSource
from infertop.collectors.sources.ssh import ssh_source_for
from infertop.collectors.virtual_nics import is_virtual_nic, keeps_nic
from infertop.layouts import parse_layout
from tests.support.probe_run import PYTHON

REAL = ("lo", "eth0", "eth1", "eth2", "bond0", "ens5f0np0", "eno1", "ib0", "bond0.100", "enp3s0", "data0")
PLUMBING = (
    "veth3f2a1b9", "vethwe-bridge", "docker0", "br-0123456789ab", "cali1234abcd567", "0123456789abcde",
    "cni0", "cbr0", "flannel.1", "vxlan.calico", "tunl0", "kube-ipvs0", "nodelocaldns", "lxc_health",
    "lxc8a7b6c5d4e3f", "cilium_host", "genev_sys_6081", "virbr0", "vnet3", "weave", "dummy0", "tap7",
    "eni0a1b2c3d4e5", "kube-bridge", "ovn-k8s-mp0",
)


@pytest.mark.parametrize("name", REAL)
def test_real_ports_are_not_plumbing(name: str) -> None:
    assert not is_virtual_nic(name) and keeps_nic(name)


@pytest.mark.parametrize("name", PLUMBING)
def test_plumbing_is_left_out_unless_expected(name: str) -> None:
    assert is_virtual_nic(name) and not keeps_nic(name)
    assert keeps_nic(name, {name})  # the layout's word beats the rule


def node_page(devices: Sequence[str], bond_members: Sequence[str] = ("eth1", "eth2")) -> str:
    """node_exporter's netclass / netdev / bonding / infiniband families for `devices`."""
    lines = ["# TYPE node_network_info gauge"]
    for dev in devices:
        address = "b8:3f:d2:00:00:10" if dev == "bond0" or dev in bond_members else f"02:00:00:00:00:{len(dev):02x}"
        lines.append(f'node_network_info{{address="{address}",device="{dev}",operstate="up"}} 1')
    for family, value in (("node_network_up", 1), ("node_network_protocol_type", 1),
                          ("node_network_receive_bytes_total", 1e9), ("node_network_transmit_bytes_total", 2e9),
                          ("node_network_receive_errs_total", 0)):
        lines.append(f"# TYPE {family} gauge")
        lines += [f'{family}{{device="{dev}"}} {value}' for dev in devices]
    lines += [
        "# TYPE node_bonding_slaves gauge", 'node_bonding_slaves{master="bond0"} 2',
        "# TYPE node_bonding_active gauge", 'node_bonding_active{master="bond0"} 2',
        "# TYPE node_infiniband_state_id gauge", 'node_infiniband_state_id{device="mlx5_0",port="1"} 4',
        "# TYPE node_infiniband_port_data_received_bytes_total counter",
        'node_infiniband_port_data_received_bytes_total{device="mlx5_0",port="1"} 5e9',
    ]
    return "\n".join(lines) + "\n"


K8S_HOST = ("lo", "eth0", "eth1", "eth2", "bond0", "docker0", "cali1234abcd567", "0123456789abcde",
            "veth3f2a1b9", "vethab12cd3", "cni0", "flannel.1", "tap7", "kube-ipvs0", "nodelocaldns")


def test_a_kubernetes_host_page_gives_only_its_real_ports() -> None:
    nics = nic_samples_from_node_exporter(parse_exposition(node_page(K8S_HOST)))
    by_name = {n.name: n for n in nics}
    assert set(by_name) == {"lo", "eth0", "eth1", "eth2", "bond0", "mlx5_0"}
    # the bond's members are still named by their shared address
    assert by_name["bond0"].members == ["eth1", "eth2"] and by_name["bond0"].members_up == 2


def test_an_expected_port_is_kept_whatever_its_name() -> None:
    nics = nic_samples_from_node_exporter(parse_exposition(node_page(K8S_HOST)), keep={"tap7", "cni0"})
    assert {n.name for n in nics} == {"lo", "eth0", "eth1", "eth2", "bond0", "tap7", "cni0", "mlx5_0"}


LAYOUT = """
[cluster]
name = "k8s"
[[nodes]]
name = "gpu-01"
metrics = ["{url}"]
nics = [{{ name = "tap7", expected_gbps = 100 }}, {{ name = "bond0", expected_gbps = 200 }}]
"""


@pytest.fixture
async def page_url() -> AsyncIterator[str]:
    async def page(request: web.Request) -> web.Response:
        return web.Response(text=node_page(K8S_HOST), content_type="text/plain")

    app = web.Application()
    app.router.add_get("/metrics", page)
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}/metrics"
    finally:
        await runner.cleanup()


async def test_a_layout_expecting_a_port_named_like_plumbing_keeps_it(page_url: str) -> None:
    """Through the layout, the registry and a real HTTP scrape: the expected `tap7` is
    read; the pod plumbing the layout does not name is not."""
    layout = parse_layout(LAYOUT.format(url=page_url), "k8s.toml")
    [source] = [s for s in build_sources(layout) if isinstance(s, ScrapeSource)]
    try:
        [sample] = await source.poll()
    finally:
        await source.close()
    assert sample.nics is not None
    assert {n.name for n in sample.nics} == {"lo", "eth0", "eth1", "eth2", "bond0", "tap7", "mlx5_0"}


def _netdev(root: Path, name: str) -> None:
    for rel, text in (("type", "1"), ("operstate", "up"), ("statistics/rx_bytes", "10"),
                      ("statistics/tx_bytes", "20")):
        (root / name / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / name / rel).write_text(text + "\n")


def test_the_probe_reads_no_plumbing_but_what_the_layout_expects(tmp_path: Path) -> None:
    root = tmp_path / "net"
    for name in ("lo", "eth0", "veth3f2a1b9", "docker0", "tap7"):
        _netdev(root, name)
    names = [n["name"] for n in probe_host.read_nics(str(root), str(tmp_path / "ib"), str(tmp_path / "bonding"))]
    assert names == ["eth0", "lo"]
    kept = probe_host.read_nics(str(root), str(tmp_path / "ib"), str(tmp_path / "bonding"), keep=frozenset({"tap7"}))
    assert [n["name"] for n in kept] == ["eth0", "lo", "tap7"]


def test_the_ssh_probe_is_told_the_expected_ports() -> None:
    layout = parse_layout(LAYOUT.format(url="http://x:9100/metrics").replace(
        'metrics = ["http://x:9100/metrics"]', 'ssh = "gpu-01"'), "k8s.toml")
    source = ssh_source_for(layout)
    assert source is not None
    [node] = source.ssh_nodes
    assert node.keep_nics == ("tap7", "bond0")


def _netns_missing() -> str | None:
    if os.geteuid() != 0 or shutil.which("ip") is None:
        return "needs root and iproute2 for a network namespace"
    return None


@pytest.mark.skipif(_netns_missing() is not None, reason=str(_netns_missing()))
def test_the_bundled_probe_on_a_host_with_pod_veths(tmp_path: Path) -> None:
    """The real bundled probe in a network namespace holding a pod veth, a bridge and a
    tap the layout expects: its config's `keep_nics` keeps the tap, the rest is left out."""
    ns = f"itvn{os.getpid()}"
    subprocess.run(["ip", "netns", "add", ns], check=True, capture_output=True)
    try:
        for args in (("veth3f2a1b9", "type", "veth", "peer", "name", "data0"),
                     ("docker0", "type", "bridge"), ("tap7", "type", "veth", "peer", "name", "data1")):
            subprocess.run(["ip", "-n", ns, "link", "add", *args], check=True, capture_output=True)
        script = tmp_path / "probe.py"
        script.write_text(probe_script())
        config = {"interval_s": 0.05, "count": 1, "npu_smi": False, "keep_nics": ["tap7"]}
        result = subprocess.run(["ip", "netns", "exec", ns, PYTHON, "-I", str(script), json.dumps(config)],
                                capture_output=True, text=True, timeout=30, check=False)
        assert result.returncode == 0, result.stderr
        reading = json.loads(result.stdout.splitlines()[0])
        assert {n["name"] for n in reading["nics"] if n["kind"] != "infiniband"} == {"lo", "data0", "data1", "tap7"}
    finally:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
