"""The prefill → decode path from upstream definitions with their truth: vLLM 0.33 NIXL
pages (tests/support/vllm_info_page.py), node_exporter 1.12.1's ethtool collector names
and the mlx5 driver's sysfs hw_counters read by the probe (tests/support/roce_pages.py).
A congested pair shows pause and CNP evidence on both ends; a KV rate above the ports'
line rate is flagged as a measurement problem."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from infertop.collectors.pages.exporters import EXPORTER_WANTED, parts_from_exporter
from infertop.collectors.pages.exposition import parse_exposition
from infertop.collectors.pages.profiles import engine_sample_from_text
from infertop.collectors.probe.host import read_ib, read_net
from infertop.collectors.sample import GpuSample, NicSample, NodeSample
from infertop.layouts import load_layout
from infertop.monitor.monitor import Monitor
from infertop.monitor.snapshot import Snapshot
from tests.support.roce_pages import ROCE_GBPS, RoceNode, ethtool_fq_name
from tests.support.vllm_info_page import VllmInfoServer

START = dt.datetime(2026, 11, 30, 12, tzinfo=dt.UTC).timestamp()
STEP_S = 5.0
LAYOUT = """
[cluster]
name = "pd"
interval_s = 5
window_s = 20
[pricing]
gpu_hour_usd = 2.0
[thresholds]
hold_s = 5
""" + "".join(
    f'[[nodes]]\nname = "{n}"\nrole = "{r}"\ngpus = 8\n' for n, r in (("p1", "prefill"), ("d1", "decode"))
)


def test_ethtool_names_are_node_exporters() -> None:
    assert ethtool_fq_name("rx_prio3_pause") == "node_ethtool_received_prio3_pause"
    assert ethtool_fq_name("tx_pause_ctrl_phy") == "node_ethtool_transmitted_pause_ctrl_phy"


def test_node_exporter_pause_frames_are_summed_per_device() -> None:
    nic = RoceNode()
    nic.advance(10.0, pause_per_s=1000.0)
    parts = parts_from_exporter(parse_exposition(nic.node_exporter_page(), "ne", wanted=EXPORTER_WANTED))
    eth = {n.name: n for n in parts["nics"]}["eth2"]  # type: ignore[union-attr]
    # the per-priority frames, each once (not again as the 802.3 pause_ctrl_phy)
    assert eth.rx_pause_total == nic.stats["rx_prio3_pause"] + nic.stats["rx_prio0_pause"] == 10_000
    assert eth.tx_pause_total == nic.stats["tx_prio3_pause"] + nic.stats["tx_prio0_pause"] == 5_000
    # and each priority on its own, for the congested verdict to tell and judge per priority
    assert eth.pause_by_priority_total == {f"{side}{p}": nic.stats[f"{side}_prio{p}_pause"]
                                           for side in ("rx", "tx") for p in (0, 3)}


def test_ecn_marks_are_read_from_ethtool_through_node_exporter_and_from_hw_counters(tmp_path: Path) -> None:
    nic = RoceNode()
    nic.advance(10.0, ecn_per_s=1000.0)
    parts = parts_from_exporter(parse_exposition(nic.node_exporter_page(), "ne", wanted=EXPORTER_WANTED))
    eth = {n.name: n for n in parts["nics"]}["eth2"]  # type: ignore[union-attr]
    assert eth.ecn_marked_total == nic.stats["rx_ecn_mark"] == 1_000
    (port,) = read_ib(str(nic.sysfs(tmp_path / "ib")))
    assert port["ecn_marked_total"] == nic.hw_counters["np_ecn_marked_roce_packets"] == 10_000


def test_node_exporter_reads_802_3_pause_where_no_priority_is_served() -> None:
    nic = RoceNode()
    nic.advance(10.0, pause_per_s=1000.0)
    # firmware serving only the 802.3 counters (no PFC-enabled priority listed)
    nic.stats = {k: v for k, v in nic.stats.items() if "prio" not in k}
    parts = parts_from_exporter(parse_exposition(nic.node_exporter_page(), "ne", wanted=EXPORTER_WANTED))
    eth = {n.name: n for n in parts["nics"]}["eth2"]  # type: ignore[union-attr]
    assert (eth.rx_pause_total, eth.tx_pause_total) == (10_000, 5_000)
    assert eth.pause_by_priority_total is None  # no priority served: no per-priority figure


def test_probe_reads_cnp_counters_from_hw_counters(tmp_path: Path) -> None:
    nic = RoceNode()
    nic.advance(10.0, cnp_sent_per_s=300.0, cnp_handled_per_s=40.0)
    (port,) = read_ib(str(nic.sysfs(tmp_path)))
    assert port["kind"] == "roce" and port["netdev"] == "eth2"
    assert port["cnp_sent_total"] == nic.hw_counters["np_cnp_sent"] == 3000
    assert port["cnp_handled_total"] == nic.hw_counters["rp_cnp_handled"] == 400


class DriverStats:
    """The mlx5 driver's `ethtool -S` answer for the node's netdev (the probe's ioctl
    reader stands on a real veth in tests/collectors/test_ethtool_stats.py; no mlx5 here)."""

    def __init__(self, nic: RoceNode) -> None:
        self.nic = nic

    def read(self, ifname: str) -> dict[str, int] | None:
        return dict(self.nic.stats) if ifname == self.nic.netdev else None


def probe_netdev(nic: RoceNode, root: Path) -> list[NicSample]:
    """The probe's /sys/class/net reading of the netdev, its pause frames from ethtool."""
    base = root / "net" / nic.netdev
    (base / "statistics").mkdir(parents=True, exist_ok=True)
    for leaf, text in (("type", "1"), ("operstate", "up"), ("speed", str(ROCE_GBPS * 1000)),
                       ("statistics/rx_bytes", str(nic.rx_bytes)), ("statistics/tx_bytes", str(nic.tx_bytes))):
        (base / leaf).write_text(text + "\n")
    return [NicSample(**{k: v for k, v in p.items() if k in NicSample.model_fields})
            for p in read_net(str(root / "net"), ethtool=DriverStats(nic))]


def node_sample(name: str, at: float, engine: VllmInfoServer, nic: RoceNode, root: Path,
                probe_only: bool = False) -> NodeSample:
    """node_exporter's netdev ports (pause frames) beside the probe's RDMA port (CNPs); or,
    `probe_only`, the SSH probe's reading of both (pause frames through ethtool stats)."""
    if probe_only:
        netdevs = probe_netdev(nic, root / name)
    else:
        exporter = parts_from_exporter(parse_exposition(nic.node_exporter_page(), "ne", wanted=EXPORTER_WANTED))
        netdevs = exporter["nics"]  # type: ignore[assignment]
    rdma = [NicSample(**{k: v for k, v in p.items() if k in NicSample.model_fields})
            for p in read_ib(str(nic.sysfs(root / name / "ib")))]
    return NodeSample(
        node=name, source="ssh" if probe_only else "scrape", taken_at=at,
        gpus=[GpuSample(index=i, util_pct=20.0) for i in range(8)],  # the GPUs wait
        nics=[*netdevs, *rdma],
        engine=engine_sample_from_text(engine.page(), "vllm"),
    )


def run(tmp_path: Path, ticks: int, congested: bool, kv_bytes_per_s: float, probe_only: bool = False) -> Snapshot:
    layout_file = tmp_path / "layout.toml"
    layout_file.write_text(LAYOUT)
    monitor = Monitor(load_layout(layout_file), sources=[], clock=lambda: START)
    emit = monitor.fleet.ingest
    engines = {"p1": VllmInfoServer(engines=2), "d1": VllmInfoServer(engines=2, seed=1)}
    nics = {"p1": RoceNode(), "d1": RoceNode()}
    per_transfer_bytes = 64 * 2**20
    transfers = round(kv_bytes_per_s * STEP_S / per_transfer_bytes / 2)  # per engine
    snap = None
    for i in range(ticks):
        now = START + i * STEP_S
        for name in ("p1", "d1"):
            engines[name].advance(STEP_S)
            if congested:
                # the prefill side is told to slow down (handles CNPs), the decode side
                # sees ECN-marked KV arriving (sends them); both see PFC pause
                nics[name].advance(STEP_S, pause_per_s=2000.0,
                                   cnp_sent_per_s=500.0 if name == "d1" else 0.0,
                                   cnp_handled_per_s=500.0 if name == "p1" else 0.0,
                                   bytes_per_s=kv_bytes_per_s)
            else:
                nics[name].advance(STEP_S, bytes_per_s=kv_bytes_per_s)
        # NIXL counts the transfers on the decode side (it reads from the prefill node)
        engines["d1"].transfer(transfers, 0.4 if congested else 0.02, per_transfer_bytes)
        if congested:
            engines["p1"].expire(3)  # 3 a step on each of 2 engines: 1.2 requests/s
        for name in ("p1", "d1"):
            emit(node_sample(name, now, engines[name], nics[name], tmp_path, probe_only))
        snap = monitor.tick(now)
    assert snap is not None
    return snap


@pytest.mark.parametrize("probe_only", [False, True], ids=["node_exporter+probe", "ssh-probe"])
def test_the_congested_pair_shows_pause_and_cnp_on_both_ends(tmp_path: Path, probe_only: bool) -> None:
    snap = run(tmp_path, ticks=5, congested=True, kv_bytes_per_s=5e9, probe_only=probe_only)
    (path,) = snap.pd_paths
    assert (path.prefill_pool, path.decode_pool, path.kv_counted_by) == ("prefill", "decode", "decode")
    for end in (path.prefill, path.decode):
        assert end is not None
        assert end.rx_pause_per_s == pytest.approx(2000.0, rel=0.02)
        assert end.tx_pause_per_s == pytest.approx(1000.0, rel=0.02)
        assert end.line_rate_bytes_per_s == pytest.approx(ROCE_GBPS * 1e9 / 8)
        # pause frames on the netdev (ethtool), CNPs on the RDMA port (hw_counters)
        said = " ".join(end.congested_ports)
        assert "eth2: prio 3 pause rx" in said and "mlx5_0: CNP" in said
    assert path.decode is not None and path.prefill is not None
    assert path.decode.cnp_sent_per_s == pytest.approx(500.0, rel=0.02)
    assert path.prefill.cnp_handled_per_s == pytest.approx(500.0, rel=0.02)
    assert path.congested is True and path.evidence == "congestion counters (CNP, pause)"
    assert path.kv_bytes_per_s == pytest.approx(5e9, rel=0.05) and path.above_line_rate is False
    # 0.4 s transfers fall in NIXL's 0.3–0.5 s bucket
    assert path.kv_transfer_mean_s == pytest.approx(0.4)
    assert path.kv_transfer_expired_per_s == pytest.approx(2 * 3 / STEP_S)
    assert path.kv_transfer_p50_s is not None and 0.3 <= path.kv_transfer_p50_s <= 0.5
    verdicts = {v.kind: v.detail for n in snap.nodes if n.name == "d1" for v in n.verdicts}
    # the node's own counters make the congested verdict (link-starved leaves them to it)
    assert "link-starved" not in verdicts
    assert "eth2 prio 3 pause rx 2.0k/s (no pool baseline)" in verdicts["congested"]
    assert "mlx5_0 CNP sent 500.0/s (no pool baseline)" in verdicts["congested"]
    assert "KV transfers 0.4 s" in verdicts["congested"]


def test_a_quiet_pair_is_not_congested_and_says_it_read_the_counters(tmp_path: Path) -> None:
    snap = run(tmp_path, ticks=4, congested=False, kv_bytes_per_s=5e9)
    (path,) = snap.pd_paths
    assert path.congested is False and path.evidence == "congestion counters (none rising)"
    assert path.kv_transfer_p99_s is not None and path.kv_transfer_p99_s <= 0.025


def test_a_kv_rate_above_line_rate_is_flagged_not_shown_as_speed(tmp_path: Path) -> None:
    # 400 Gb/s ports carry 50 GB/s; the engines claim 80 GB/s (SGLang #31993's symptom)
    snap = run(tmp_path, ticks=4, congested=False, kv_bytes_per_s=80e9)
    (path,) = snap.pd_paths
    assert path.above_line_rate is True
    assert path.kv_bytes_per_s is None
    assert path.kv_bytes_per_s_reported == pytest.approx(80e9, rel=0.05)
    assert "ABOVE LINE RATE" in path.detail
    assert snap.to_json_dict()["pd_paths"][0]["above_line_rate"] is True  # type: ignore[index]


def test_the_path_figures_are_exported(tmp_path: Path) -> None:
    from infertop.monitor.exporter import metric_names, snapshot_families

    snap = run(tmp_path, ticks=4, congested=True, kv_bytes_per_s=80e9)
    got = {f.name: f for f in snapshot_families(snap)}
    assert {n for n in got if n.startswith("infertop_pd")} <= metric_names()
    flagged = got["infertop_pd_above_line_rate"].samples
    assert [(s.labels, s.value) for s in flagged] == [({"prefill_pool": "prefill", "decode_pool": "decode"}, 1.0)]
    assert not got["infertop_pd_kv_bytes_per_second"].samples  # not shown as a speed
    pause = {s.labels["end"]: s.value for s in got["infertop_pd_end_pause_received_per_second"].samples}
    assert pause == {"prefill": pytest.approx(2000.0, rel=0.02), "decode": pytest.approx(2000.0, rel=0.02)}


def test_the_node_screen_port_rows_show_pause_and_cnp_rates(tmp_path: Path) -> None:
    from infertop.tui.node_rows import NIC_COLUMNS, nic_row

    snap = run(tmp_path, ticks=5, congested=True, kv_bytes_per_s=5e9, probe_only=True)
    keys = [key for key, _, _ in NIC_COLUMNS]
    rows = {n.name: nic_row(n) for node in snap.nodes if node.name == "d1" for n in node.nics}
    # eth2: 2,000 pause frames/s received, 1,000 sent; mlx5_0: 500 CNPs/s sent, none handled
    assert rows["eth2"][keys.index("pause")].plain == "2.0k/1.0k"
    assert rows["eth2"][keys.index("cnp")].plain == "—"  # the netdev has no hw_counters: unknown
    assert rows["mlx5_0"][keys.index("cnp")].plain == "500/0"
    assert rows["mlx5_0"][keys.index("pause")].plain == "—"


def test_each_ports_pause_and_cnp_rates_are_exported(tmp_path: Path) -> None:
    from infertop.monitor.exporter import metric_names, snapshot_families

    snap = run(tmp_path, ticks=5, congested=True, kv_bytes_per_s=5e9, probe_only=True)
    got = {f.name: f for f in snapshot_families(snap)}
    assert {n for n in got if n.startswith("infertop_port")} <= metric_names()

    def series(name: str) -> dict[tuple[str, str], float]:
        return {(s.labels["node"], s.labels["port"]): s.value for s in got[name].samples}

    pause = series("infertop_port_pause_received_per_second")
    assert pause == {("p1", "eth2"): pytest.approx(2000.0, rel=0.02), ("d1", "eth2"): pytest.approx(2000.0, rel=0.02)}
    cnp = series("infertop_port_cnp_sent_per_second")
    assert cnp == {("p1", "mlx5_0"): 0.0, ("d1", "mlx5_0"): pytest.approx(500.0, rel=0.02)}
