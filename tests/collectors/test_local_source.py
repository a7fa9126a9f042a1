"""The local source on this machine (real psutil, real /sys/class/net, real loopback traffic)
and the NIC readers against sysfs-shaped fixture trees built in tmp_path.

This machine has no NVIDIA GPU: the no-GPU path must give `gpus == []` and a visible note,
never an error. (With a GPU the same source is proven by tests/test_gpu.py.)
"""

from __future__ import annotations

import asyncio
import os
import socket
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infertop.collectors.probe import host as probe_host
from infertop.collectors.probe import nvidia_gpus as probe_gpus
from infertop.collectors.probe.schema import sample_from_reading
from infertop.collectors.rates import counter_rate
from infertop.collectors.sample import NodeSample
from infertop.collectors.sources.local import LocalSource
from tests.support.waiting import until_async

SYS_NET = Path("/sys/class/net")


def _has_gpu() -> bool:
    reader, _ = probe_gpus.open_gpus()
    if reader is None:
        return False
    reader.close()
    return True


# ---------------------------------------------------------------------------- this machine


async def test_no_gpu_gives_empty_list_and_a_note() -> None:
    if _has_gpu():
        pytest.skip("this machine has a GPU: tests/test_gpu.py covers it")
    source = LocalSource("here", interval_s=1.0)
    try:
        [sample] = await source.poll()
    finally:
        await source.close()
    assert sample.error is None and sample.ok
    assert sample.gpus == []
    assert len(sample.notes) == 1 and "no GPU figures" in sample.notes[0]


async def test_host_and_nics_are_read_from_the_real_machine() -> None:
    source = LocalSource("here", interval_s=1.0)
    try:
        [sample] = await source.poll()
    finally:
        await source.close()
    assert sample.node == "here" and sample.source == "local"
    assert sample.host is not None
    assert sample.host.mem_total_bytes and 0 < sample.host.mem_used_bytes <= sample.host.mem_total_bytes
    assert sample.host.cpu_pct is not None and 0 <= sample.host.cpu_pct <= 100
    assert sample.host.load1 is not None and sample.host.load1 >= 0
    assert sample.nics is not None
    names = {n.name for n in sample.nics}
    assert set(os.listdir(SYS_NET)) <= names  # every interface (plus any IB ports)
    lo = next(n for n in sample.nics if n.name == "lo")
    assert lo.kind == "loopback" and lo.rx_bytes_total is not None


def _push_over_loopback(n_bytes: int) -> None:
    """Send n_bytes through a real TCP connection on 127.0.0.1 (a free port, bound to 0)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    received = 0

    def drain() -> None:
        nonlocal received
        conn, _ = server.accept()
        with conn:
            while chunk := conn.recv(1 << 16):
                received += len(chunk)

    reader = threading.Thread(target=drain)
    reader.start()
    with socket.create_connection(server.getsockname()) as client:
        client.sendall(b"x" * n_bytes)
    reader.join(timeout=10)
    server.close()
    assert received == n_bytes


def test_loopback_rate_moves_with_traffic() -> None:
    source = LocalSource("here", interval_s=1.0)
    readings = []
    times = []
    for push in (0, 8 << 20):
        if push:
            _push_over_loopback(push)
        times.append(time.monotonic())
        readings.append(sample_from_reading("here", "local", source.read(), times[-1]))
    asyncio.run(source.close())

    def lo(sample: NodeSample, key: str) -> float | None:
        assert sample.nics is not None
        return next(getattr(n, key) for n in sample.nics if n.name == "lo")

    for key in ("rx_bytes_total", "tx_bytes_total"):
        before, after = lo(readings[0], key), lo(readings[1], key)
        assert before is not None and after is not None
        # other processes may use loopback too, so only a lower bound holds
        assert after - before >= 8 << 20, key
        rate = counter_rate([(times[0], before), (times[1], after)])
        assert rate is not None and rate > 0


async def test_polling_source_emits_until_cancelled() -> None:
    source = LocalSource("here", interval_s=0.2)
    got: list[NodeSample] = []
    task = asyncio.create_task(source.run(got.append))
    try:
        await until_async(lambda: len(got) >= 3, 30, "three samples")
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await source.close()
    assert len(got) >= 3
    assert all(s.ok and s.gpus is not None for s in got)
    assert got[0].taken_at <= got[1].taken_at <= got[2].taken_at


# ---------------------------------------------------------------------------- fixture trees


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


def _netdev(root: Path, name: str, *, arp_type: int = 1, state: str = "up", speed: str | None = "100000",
            rx: int | None = 1000, tx: int | None = 2000) -> None:
    base = root / name
    _write(base / "type", str(arp_type))
    _write(base / "operstate", state)
    if speed is not None:
        _write(base / "speed", speed)
    if rx is not None:
        _write(base / "statistics" / "rx_bytes", str(rx))
        _write(base / "statistics" / "rx_errors", "1")
    if tx is not None:
        _write(base / "statistics" / "tx_bytes", str(tx))
        _write(base / "statistics" / "tx_errors", "2")


@pytest.fixture
def net_tree(tmp_path: Path) -> Path:
    root = tmp_path / "sys" / "class" / "net"
    _netdev(root, "lo", arp_type=772, state="unknown", speed=None)
    _netdev(root, "eth0")
    _netdev(root, "eth1", state="down", speed="-1", rx=None)
    _netdev(root, "ib0", arp_type=32, speed="400000")
    _netdev(root, "bond0", speed="200000")
    _write(root / "bond0" / "bonding" / "slaves", "eth0 eth1")
    return root


def test_read_net_fixture(net_tree: Path) -> None:
    nics = {n["name"]: n for n in probe_host.read_net(str(net_tree))}
    assert set(nics) == {"lo", "eth0", "eth1", "ib0", "bond0"}
    assert nics["lo"]["kind"] == "loopback" and nics["lo"]["speed_gbps"] is None
    assert nics["eth0"] | {} == {
        "name": "eth0", "kind": "ethernet", "state": "up", "speed_gbps": 100.0,
        "rx_bytes_total": 1000, "tx_bytes_total": 2000, "errors_total": 3,
    }
    eth1 = nics["eth1"]
    assert eth1["speed_gbps"] is None  # -1 Mbit/s means unknown, never a negative rate
    assert eth1["rx_bytes_total"] is None and eth1["tx_bytes_total"] == 2000
    assert "errors_total" not in eth1  # one of the two error counters is missing
    assert nics["ib0"]["kind"] == "infiniband" and nics["ib0"]["speed_gbps"] == 400.0
    bond = nics["bond0"]
    assert bond["kind"] == "bond" and bond["members"] == ["eth0", "eth1"] and bond["members_up"] == 1


def _ib_port(root: Path, dev: str, port: str, *, state: str, rate: str | None, link_layer: str,
             xmit: int | None, rcv: int | None, extra: dict[str, str] | None = None) -> None:
    base = root / dev / "ports" / port
    _write(base / "state", state)
    _write(base / "phys_state", "5: LinkUp" if "ACTIVE" in state else "3: Disabled")
    if rate is not None:
        _write(base / "rate", rate)
    _write(base / "link_layer", link_layer)
    counters = base / "counters"
    if xmit is not None:
        _write(counters / "port_xmit_data", str(xmit))
    if rcv is not None:
        _write(counters / "port_rcv_data", str(rcv))
    for name, value in (extra or {}).items():
        _write(counters / name, value)


@pytest.fixture
def ib_tree(tmp_path: Path) -> Path:
    root = tmp_path / "sys" / "class" / "infiniband"
    _ib_port(root, "mlx5_0", "1", state="4: ACTIVE", rate="400 Gb/sec (4X NDR)", link_layer="InfiniBand",
             xmit=1000, rcv=250, extra={"port_xmit_wait": "7", "link_downed": "1", "symbol_error": "0",
                                        "port_rcv_errors": "12", "link_error_recovery": "3",
                                        "local_link_integrity_errors": "0"})
    (root / "mlx5_0" / "device" / "net" / "ib0").mkdir(parents=True)
    _ib_port(root, "mlx5_1", "1", state="4: ACTIVE", rate="200 Gb/sec (2X NDR)", link_layer="Ethernet",
             xmit=5, rcv=6)
    _ib_port(root, "mlx5_1", "2", state="1: DOWN", rate=None, link_layer="Ethernet", xmit=None, rcv=None)
    (root / "mlx5_1" / "device" / "net" / "ens1f0").mkdir(parents=True)
    return root


def test_read_ib_fixture(ib_tree: Path) -> None:
    ports = {p["name"]: p for p in probe_host.read_ib(str(ib_tree))}
    assert set(ports) == {"mlx5_0", "mlx5_1/1", "mlx5_1/2"}  # dev/port only when a dev has several
    ib = ports["mlx5_0"]
    assert ib["kind"] == "infiniband" and ib["state"] == "active" and ib["phys_state"] == "LinkUp"
    assert ib["speed_gbps"] == 400.0
    # port_{xmit,rcv}_data count octets divided by 4
    assert ib["tx_bytes_total"] == 4000 and ib["rx_bytes_total"] == 1000
    assert ib["xmit_wait_total"] == 7 and ib["link_downed_total"] == 1 and ib["errors_total"] == 0
    assert ib["netdev"] == "ib0"
    # the error counters node_exporter reads, named the same way (NicSample fields)
    assert ib["rx_errors_total"] == 12 and ib["link_recoveries_total"] == 3
    assert ib["link_integrity_errors_total"] == 0 and ib["physical_state"] == "link_up"
    roce = ports["mlx5_1/1"]
    assert roce["kind"] == "roce" and roce["speed_gbps"] == 200.0 and roce["tx_bytes_total"] == 20
    assert roce["netdev"] == "ens1f0"
    down = ports["mlx5_1/2"]
    assert down["state"] == "down" and down["speed_gbps"] is None
    assert down["tx_bytes_total"] is None and down["xmit_wait_total"] is None  # unknown, not 0
    assert down["rx_errors_total"] is None and down["physical_state"] == "disabled"


def test_read_ib_without_infiniband(tmp_path: Path) -> None:
    assert probe_host.read_ib(str(tmp_path / "absent")) == []


BONDING = """\
Ethernet Channel Bonding Driver: v6.1.0

Bonding Mode: IEEE 802.3ad Dynamic link aggregation
Transmit Hash Policy: layer3+4 (1)
MII Status: up
MII Polling Interval (ms): 100

Slave Interface: eth0
MII Status: up
Speed: 100000 Mbps
Duplex: full
Link Failure Count: 0

Slave Interface: eth1
MII Status: down
Speed: Unknown
Duplex: Unknown
Link Failure Count: 3
"""


def test_parse_bonding_counts_members_by_their_own_mii_status() -> None:
    # the bond's own "MII Status: up" comes before any member and must not count
    assert probe_host.parse_bonding(BONDING) == {"members": ["eth0", "eth1"], "members_up": 1}
    assert probe_host.parse_bonding("") == {"members": [], "members_up": 0}


@given(st.lists(st.sampled_from(["Slave Interface: a", "Slave Interface: b", "MII Status: up",
                                 "MII Status: down", "garbage", "", ":", "Speed: 1"]), max_size=30))
def test_parse_bonding_never_counts_more_up_than_members(lines: list[str]) -> None:
    got = probe_host.parse_bonding("\n".join(lines))
    assert 0 <= got["members_up"] <= len(got["members"]) == len(set(got["members"]))


def test_read_nics_merges_bonding_and_ib(net_tree: Path, ib_tree: Path, tmp_path: Path) -> None:
    bonding = tmp_path / "proc" / "net" / "bonding"
    _write(bonding / "bond0", BONDING)
    # sysfs says eth1 is down too; /proc/net/bonding's per-member MII status is authoritative
    nics = probe_host.read_nics(str(net_tree), str(ib_tree), str(bonding))
    by_name = {n["name"]: n for n in nics}
    assert by_name["bond0"]["members"] == ["eth0", "eth1"] and by_name["bond0"]["members_up"] == 1
    assert {"mlx5_0", "mlx5_1/1", "mlx5_1/2", "eth0"} <= set(by_name)
    sample = sample_from_reading("n", "local", {"nics": nics, "gpus": [], "host": {}}, 1.0)
    assert sample.error is None and sample.nics is not None
    kinds = {n.name: (n.kind, n.is_up) for n in sample.nics}
    assert kinds["mlx5_0"] == ("infiniband", True)  # "active" counts as up
    assert kinds["mlx5_1/2"] == ("roce", False)
    assert kinds["bond0"] == ("bond", True)
