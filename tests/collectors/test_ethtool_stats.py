"""The probe's `ethtool -S` reader (SIOCETHTOOL: ETHTOOL_GSSET_INFO, GSTRINGS, GSTATS)
against a real veth pair in a network namespace, and its pause-frame rule on the mlx5
driver's stat names (`drivers/net/ethernet/mellanox/mlx5/core/en_stats.c`: per-priority
traffic `rx_prio%d_bytes` …, PFC `rx_%s_pause` / `_pause_duration` / `_pause_transition`
with %s = prio<N> or global, 802.3 `rx_pause_ctrl_phy`)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from infertop.collectors.probe.bundle import probe_script
from infertop.collectors.probe.ethtool_stats import EthtoolStats, pause_by_priority, pause_frames
from tests.support.netns import PYTHON
from tests.support.paths import REPO

# veth's own stats (drivers/net/veth.c: ethtool_stats_keys, then per-queue rx / tx XDP stats)
VETH_STATS = {"peer_ifindex", "rx_queue_0_xdp_packets", "rx_queue_0_xdp_bytes", "rx_queue_0_drops"}


def _netns_missing() -> str | None:
    if os.geteuid() != 0 or shutil.which("ip") is None:
        return "needs root and iproute2 for a network namespace"
    return None


def mlx5_stats(pfc_prios: tuple[int, ...], global_pause: bool, frames: dict[str, int]) -> dict[str, int]:
    """What mlx5 serves to `ethtool -S`, in its order, for the PFC setting given; `frames`
    sets some counters (all others 0)."""
    names = ["rx_bytes", "tx_bytes", "rx_pause_ctrl_phy", "tx_pause_ctrl_phy", "rx_mac_control_phy"]
    for prio in range(8):  # pport_per_prio_traffic_stats_desc, every priority
        names += [f"rx_prio{prio}_bytes", f"rx_prio{prio}_packets", f"rx_prio{prio}_discards",
                  f"tx_prio{prio}_bytes", f"tx_prio{prio}_packets"]
    which = [f"prio{p}" for p in pfc_prios] + (["global"] if global_pause else [])
    for w in which:  # pport_per_prio_pfc_stats_desc
        names += [f"rx_{w}_pause", f"rx_{w}_pause_duration", f"tx_{w}_pause",
                  f"tx_{w}_pause_duration", f"rx_{w}_pause_transition"]
    names += ["tx_pause_storm_warning_events", "tx_pause_storm_error_events"]
    unknown = set(frames) - set(names)
    assert not unknown, unknown
    return {n: frames.get(n, 0) for n in names}


def test_pfc_frames_are_counted_once_not_their_duration_or_traffic() -> None:
    stats = mlx5_stats((3,), False, {
        "rx_prio3_pause": 1200, "tx_prio3_pause": 300, "rx_prio3_pause_duration": 987654,
        "rx_prio3_pause_transition": 77, "rx_prio3_packets": 10**9,
        # this firmware's 802.3 counters see the same PFC frames
        "rx_pause_ctrl_phy": 1200, "tx_pause_ctrl_phy": 300,
    })
    assert pause_frames(stats) == (1200, 300)


def test_several_priorities_and_link_level_pause_are_summed() -> None:
    stats = mlx5_stats((3, 4), True, {"rx_prio3_pause": 5, "rx_prio4_pause": 7, "rx_global_pause": 11,
                                      "tx_prio4_pause": 2})
    assert pause_frames(stats) == (23, 2)
    # each PFC priority on its own as well (link-level global pause belongs to none)
    assert pause_by_priority(stats) == {"rx3": 5, "rx4": 7, "tx4": 2, "tx3": stats["tx_prio3_pause"]}


def test_firmware_without_priority_counters_gives_the_802_3_ones() -> None:
    stats = mlx5_stats((), False, {"rx_pause_ctrl_phy": 42, "tx_pause_ctrl_phy": 9})
    assert pause_frames(stats) == (42, 9)
    assert pause_by_priority(stats) is None


def test_a_driver_without_pause_counters_is_unknown_not_zero() -> None:
    assert pause_frames({"peer_ifindex": 7, "rx_queue_0_xdp_packets": 0}) == (None, None)
    assert pause_frames(None) == (None, None)


def test_interfaces_that_cannot_answer_are_unknown() -> None:
    reader = EthtoolStats()
    try:
        assert reader.read("lo") is None  # the loopback driver serves no statistics
        assert reader.read("no-such-if0") is None  # ENODEV
        assert reader.read("x" * 40) is None  # longer than IFNAMSIZ: never sent
    finally:
        reader.close()


_READ_IN_NS = """
import json, sys
sys.path.insert(0, sys.argv[1])
from infertop.collectors.probe.ethtool_stats import EthtoolStats
reader = EthtoolStats()
out = {name: reader.read(name) for name in sys.argv[2:]}
out["again"] = reader.read(sys.argv[2])  # the cached names, a second GSTATS
reader.close()
print(json.dumps(out))
"""


@pytest.mark.skipif(_netns_missing() is not None, reason=str(_netns_missing()))
def test_a_real_veth_answers_the_ioctls_with_its_own_stats(tmp_path: Path) -> None:
    ns = f"itet{os.getpid()}"
    subprocess.run(["ip", "netns", "add", ns], check=True, capture_output=True)
    try:
        subprocess.run(["ip", "-n", ns, "link", "add", "kv0", "type", "veth", "peer", "name", "kv1"],
                       check=True, capture_output=True)
        for name in ("kv0", "kv1"):
            subprocess.run(["ip", "-n", ns, "link", "set", name, "up"], check=True, capture_output=True)

        def ifindex(name: str) -> int:
            out = subprocess.run(["ip", "-n", ns, "-j", "link", "show", name], check=True,
                                 capture_output=True, text=True).stdout
            return int(json.loads(out)[0]["ifindex"])

        script = tmp_path / "read.py"
        script.write_text(_READ_IN_NS)
        result = subprocess.run(["ip", "netns", "exec", ns, PYTHON, "-I", str(script), str(REPO),
                                 "kv0", "kv1", "lo"], capture_output=True, text=True, timeout=30, check=False)
        assert result.returncode == 0, result.stderr
        got = json.loads(result.stdout)
        # each end names its peer: the kernel's answer, through the ioctl path
        assert got["kv0"]["peer_ifindex"] == ifindex("kv1")
        assert got["kv1"]["peer_ifindex"] == ifindex("kv0")
        assert VETH_STATS <= set(got["kv0"])
        assert got["again"].keys() == got["kv0"].keys() and got["again"]["peer_ifindex"] == ifindex("kv1")
        assert got["lo"] is None
        assert pause_frames(got["kv0"]) == (None, None)
    finally:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


@pytest.mark.skipif(_netns_missing() is not None, reason=str(_netns_missing()))
def test_the_bundled_probe_reads_ethtool_stats_and_leaves_unserved_pause_unknown(tmp_path: Path) -> None:
    """The real bundled probe on a host whose Ethernet port is a veth: it reads the port's
    ethtool statistics every tick without failing, and a driver serving no pause counter
    gives no pause figure (unknown), not 0."""
    ns = f"itep{os.getpid()}"
    subprocess.run(["ip", "netns", "add", ns], check=True, capture_output=True)
    try:
        subprocess.run(["ip", "-n", ns, "link", "add", "data0", "type", "veth", "peer", "name", "data1"],
                       check=True, capture_output=True)
        script = tmp_path / "probe.py"
        script.write_text(probe_script())
        config = {"interval_s": 0.05, "count": 2, "npu_smi": False}
        result = subprocess.run(["ip", "netns", "exec", ns, PYTHON, "-I", str(script), json.dumps(config)],
                                capture_output=True, text=True, timeout=30, check=False)
        assert result.returncode == 0, result.stderr
        readings = [json.loads(line) for line in result.stdout.splitlines()]
        assert len(readings) == 2
        for reading in readings:
            ports = {n["name"]: n for n in reading["nics"]}
            assert ports["data0"]["kind"] == "ethernet"
            assert "rx_pause_total" not in ports["data0"] and "tx_pause_total" not in ports["data0"]
    finally:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
