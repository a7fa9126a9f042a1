"""dcgm-exporter and node_exporter pages → GPU and NIC samples (fixtures in real format)."""

from __future__ import annotations

from pathlib import Path

import pytest

from infertop.collectors.pages.dcgm import gpu_samples_from_dcgm
from infertop.collectors.pages.exporters import parts_from_exporter
from infertop.collectors.pages.exposition import parse_exposition
from infertop.collectors.pages.node_exporter import nic_samples_from_node_exporter

FIXTURES = Path(__file__).parent.parent / "fixtures" / "exposition"


def page(name: str):  # type: ignore[no-untyped-def]
    return parse_exposition((FIXTURES / name).read_text(encoding="utf-8"))


def test_dcgm_default_counters() -> None:
    gpus = gpu_samples_from_dcgm(page("dcgm.txt"))
    assert [g.index for g in gpus] == [0, 1]
    g0, g1 = gpus
    assert g0.name == "NVIDIA H200" and g0.uuid == "GPU-1a2b3c4d-0000-1111-2222-333344445555"
    assert g0.util_pct == 97 and g1.util_pct == 3
    assert g0.power_w == pytest.approx(512.345)
    assert g0.temp_c == 61 and g0.sm_clock_mhz == 1980
    assert g0.mem_used_bytes == 130_000 * 1024 * 1024
    # used + free + reserved, MiB → bytes
    assert g0.mem_total_bytes == (130_000 + 10_000 + 1000) * 1024 * 1024
    # a counter exposed without `_total`: mJ → J
    assert g0.energy_j_total == pytest.approx(123_456_789.012)
    assert g1.xid_last == 79 and g1.clock_event_reasons == 64
    # NVLink error families summed per GPU
    assert g0.nvlink_errors_total == 0 and g1.nvlink_errors_total == 5
    # no per-direction NVLink byte counters in dcgm-exporter's defaults: unknown
    assert g0.nvlink_tx_bytes_total is None


def test_dcgm_newer_names_and_lowercase_hostname() -> None:
    idx = page("dcgm_new.txt")
    g0, g1 = gpu_samples_from_dcgm(idx)
    assert g0.util_pct == 50 and g1.util_pct == 25  # _UTIL_RATIO × 100
    assert g0.mem_total_bytes == 183_359 * 1024 * 1024  # FB_TOTAL when present
    assert g0.xid_last == 13  # DCGM_FI_DEV_XID_ERROR
    assert g0.clock_event_reasons == 4  # DCGM_FI_DEV_CLOCKS_EVENT_REASONS
    assert g0.temp_c is None  # not on the page: unknown, not 0
    assert gpu_samples_from_dcgm(idx, hostname="prefill-02") == [g0, g1]
    # NVLink throughput from the profiling fields (bytes/s as read); a GPU without the
    # RX series keeps it unknown, and 0 stays a real 0
    assert g0.nvlink_tx_bytes_per_s == 297134999230 and g0.nvlink_rx_bytes_per_s == 297129417814
    assert g1.nvlink_tx_bytes_per_s == 0 and g1.nvlink_rx_bytes_per_s is None
    assert g0.nvlink_tx_bytes_total is None  # no cumulative counter from dcgm
    assert gpu_samples_from_dcgm(idx, hostname="elsewhere") == []


def test_nvlink_rate_reaches_the_gpu_view() -> None:
    from infertop.collectors.sample import NodeSample
    from infertop.monitor.evaluation.figures import gpu_views

    gpus = gpu_samples_from_dcgm(page("dcgm_new.txt"))
    [v0, v1] = gpu_views([NodeSample(node="n", source="scrape", taken_at=1.0, gpus=gpus)])
    assert v0.nvlink_tx_bytes_per_s == 297134999230 and v1.nvlink_rx_bytes_per_s is None


def test_dcgm_hostile_labels_are_kept_as_inert_text() -> None:
    [gpu] = gpu_samples_from_dcgm(page("dcgm_hostile.txt"))
    assert gpu.name is not None
    assert "\x1b" not in gpu.name  # control characters replaced
    assert gpu.name.startswith("[bold red]H200[/]")  # markup kept, as text, for the view to escape


def test_node_exporter_nics() -> None:
    nics = {n.name: n for n in nic_samples_from_node_exporter(page("node_exporter.txt"))}
    ib0, ib1 = nics["mlx5_0"], nics["mlx5_1"]
    assert ib0.kind == "infiniband" and ib0.state == "active" and ib0.is_up
    assert ib0.speed_gbps == 400  # 5e10 bytes/s
    # node_exporter's IB byte counters are already ×4: taken as they are
    assert ib0.rx_bytes_total == 8.123456789012e12 and ib0.tx_bytes_total == 7.9e12
    assert ib0.xmit_wait_total == 12345
    assert ib1.state == "down" and ib1.is_up is False
    assert ib1.link_downed_total == 3 and ib1.errors_total == 17
    eth0 = nics["eth0"]
    assert eth0.kind == "ethernet" and eth0.state == "up" and eth0.speed_gbps == 100
    assert nics["lo"].kind == "loopback"
    assert nics["ib0"].kind == "infiniband"  # IPoIB netdev, ARPHRD 32
    assert nics["eth2"].state == "down" and nics["eth2"].speed_gbps is None
    bond0 = nics["bond0"]
    assert bond0.kind == "bond"
    # members named by the address bonding gives them; the VLAN bond0.100 is not one
    assert bond0.members == ["eth1", "eth2"] and bond0.members_up == 1
    # bond1's members cannot be named: counts only
    assert nics["bond1"].members is None and nics["bond1"].members_up == 1
    assert nics["bond0.100"].kind == "ethernet"


def test_exporter_detection() -> None:
    dcgm = parts_from_exporter(page("dcgm.txt"))
    # this page has clock reasons, NVLink errors and traffic (the default total), no ECC
    assert set(dcgm) == {"gpus", "unseen"}
    assert sorted(dcgm["unseen"]) == ["ecc"]  # type: ignore[call-overload]
    node = parts_from_exporter(page("node_exporter.txt"))
    # this page carries no port error counters: said, not silently clean
    assert set(node) == {"nics", "notes", "unseen"}
    assert set(node["unseen"]) == {"nic_errors"}  # type: ignore[arg-type]
    assert node["notes"] == ["bond1: 1 of 2 bond members active"]
    assert parts_from_exporter(page("vllm_v1.txt")) == {}
