"""node_exporter pages → `NicSample`s.

Ethernet / bond devices (netdev, netclass, bonding collectors) and InfiniBand ports
(infiniband collector; its byte counters are already ×4, unlike sysfs). Container / virtual
plumbing (pod veths, CNI bridges: see collectors.virtual_nics) is left out unless the layout
expects the port by name. Takes an `Exposition`, so a Prometheus source can build one from
query results and reuse it. Unknown stays `None`. Registered in collectors/pages/exporters.py.
"""

from __future__ import annotations

from collections.abc import Container, Sequence

from infertop.collectors.pages.exposition import Exposition, clean_label, label_text
from infertop.collectors.probe.ethtool_stats import pause_by_priority, pause_frames
from infertop.collectors.probe.host import port_state
from infertop.collectors.sample import NicKind, NicSample
from infertop.collectors.virtual_nics import keeps_nic

# /sys/class/infiniband/<dev>/ports/<n>/state ids
_IB_STATES = {0: "nop", 1: "down", 2: "init", 3: "armed", 4: "active", 5: "active_defer"}
# …/phys_state ids (node_exporter 1.12.1's HELP text of node_infiniband_physical_state_id)
_IB_PHYS_STATES = {
    0: "no_change", 1: "sleep", 2: "polling", 3: "disabled", 4: "shift", 5: "link_up",
    6: "link_error_recover", 7: "phytest",
}
# NicSample counter field → node_exporter names (netdev: the default "legacy" names, then
# those of --collector.netdev.enable-detailed-metrics)
_NETDEV_ERRORS: dict[str, tuple[str, ...]] = {
    "rx_errors_total": ("node_network_receive_errs_total", "node_network_receive_errors_total"),
    "tx_errors_total": ("node_network_transmit_errs_total", "node_network_transmit_errors_total"),
    "rx_drops_total": ("node_network_receive_drop_total", "node_network_receive_dropped_total"),
    "tx_drops_total": ("node_network_transmit_drop_total", "node_network_transmit_dropped_total"),
}
_IB_ERRORS: dict[str, str] = {
    "rx_errors_total": "node_infiniband_port_errors_received_total",
    "link_recoveries_total": "node_infiniband_link_error_recovery_total",
    "link_integrity_errors_total": "node_infiniband_local_link_integrity_errors_total",
    "rx_drops_total": "node_infiniband_port_discards_received_total",
    "tx_drops_total": "node_infiniband_port_discards_transmitted_total",
}
# Pause frames by direction: node_exporter's ethtool collector (off by default:
# --collector.ethtool) names each `ethtool -S` stat node_ethtool_<stat>, with `rx` / `tx`
# written `received` / `transmitted` since 1.5 (buildEthtoolFQName), the stat's own name
# before. The mlx5 stats read are those of collectors.probe.ethtool_stats (per priority
# `rx_prio<N>_pause`, link-level `rx_global_pause`, else 802.3 `rx_pause_ctrl_phy`, and the
# tx ones), counted by the same rule (`pause_frames`) so both sources agree.
_PAUSE_STATS = (
    *(f"{side}_{which}_pause" for side in ("rx", "tx")
      for which in (*(f"prio{p}" for p in range(8)), "global")),
    "rx_pause_ctrl_phy", "tx_pause_ctrl_phy",
)
ETHTOOL_PAUSE: dict[str, str] = {
    f"node_ethtool_{word}{stat[2:]}": stat
    for stat in _PAUSE_STATS
    for word in (("received", "rx") if stat.startswith("rx") else ("transmitted", "tx"))
}


# ECN-marked packets the netdev received: mlx5's software stat rx_ecn_mark (en_stats.c,
# mlx5e_sw_stats), node_ethtool_received_ecn_mark through the ethtool collector. RoCE
# packets bypass the netdev; their marks are hw_counters' np_ecn_marked_roce_packets,
# which node_exporter does not serve (its infiniband collector reads counters/ only).
ETHTOOL_ECN = "node_ethtool_received_ecn_mark"


def _by_device(families: Exposition, name: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for labels, value in families.series(name):
        dev = labels.get("device")
        if dev:
            out.setdefault(dev, value)
    return out


def _pause_stats(families: Exposition) -> dict[str, dict[str, float]]:
    """device → its pause stats by ethtool name (`rx_prio3_pause`, …), for each device with any."""
    stats: dict[str, dict[str, float]] = {}
    for name, stat in ETHTOOL_PAUSE.items():
        for labels, value in families.series(name):
            dev = labels.get("device")
            if dev:
                stats.setdefault(dev, {})[stat] = value
    return stats


# ARPHRD_* of /sys/class/net/<if>/type
_ARPHRD_KINDS: dict[int, NicKind] = {1: "ethernet", 32: "infiniband", 772: "loopback"}


def ib_physical_state(state_id: float | None) -> str | None:
    """node_infiniband_physical_state_id → its name (None when not reported)."""
    return None if state_id is None else _IB_PHYS_STATES.get(int(state_id), "unknown")


def _by_label(families: Exposition, name: str, label: str) -> dict[str, tuple[dict[str, str], float]]:
    out: dict[str, tuple[dict[str, str], float]] = {}
    for labels, value in families.series(name):
        key = labels.get(label)
        if key and key not in out:  # the first series of a device wins
            out[key] = (labels, value)
    return out


def _gbps(bytes_per_s: float | None) -> float | None:
    return bytes_per_s * 8 / 1e9 if bytes_per_s is not None and bytes_per_s > 0 else None


def _ib_ports(families: Exposition) -> list[NicSample]:
    def per_port(name: str) -> dict[tuple[str, str], float]:
        out: dict[tuple[str, str], float] = {}
        for labels, value in families.series(name):
            dev, port = labels.get("device"), labels.get("port")
            if dev and port:
                out.setdefault((dev, port), value)
        return out

    state = per_port("node_infiniband_state_id")
    rate = per_port("node_infiniband_rate_bytes_per_second")
    rx = per_port("node_infiniband_port_data_received_bytes_total")
    tx = per_port("node_infiniband_port_data_transmitted_bytes_total")
    wait = per_port("node_infiniband_port_transmit_wait_total")
    downed = per_port("node_infiniband_link_downed_total")
    symbol = per_port("node_infiniband_symbol_error_total")
    phys = per_port("node_infiniband_physical_state_id")
    ib_errors = {field: per_port(name) for field, name in _IB_ERRORS.items()}
    keys = sorted({*state, *rate, *rx, *tx})
    ports_per_dev: dict[str, int] = {}
    for dev, _ in keys:
        ports_per_dev[dev] = ports_per_dev.get(dev, 0) + 1
    nics = []
    for dev, port in keys:
        key = (dev, port)
        state_id = state.get(key)
        nics.append(
            NicSample(
                # same naming as the probe: the device alone when it has one port
                name=label_text(dev if ports_per_dev[dev] == 1 else f"{dev}/{port}") or dev,
                kind="infiniband",
                state=None if state_id is None else _IB_STATES.get(int(state_id), "unknown"),
                speed_gbps=_gbps(rate.get(key)),
                rx_bytes_total=rx.get(key),
                tx_bytes_total=tx.get(key),
                xmit_wait_total=wait.get(key),
                link_downed_total=downed.get(key),
                errors_total=symbol.get(key),
                physical_state=ib_physical_state(phys.get(key)),
                **{field: table.get(key) for field, table in ib_errors.items()},
            )
        )
    return nics


def _bond_members(
    bond: str, slaves: int | None, info: dict[str, tuple[dict[str, str], float]]
) -> list[str] | None:
    """Bond members by MAC address: bonding sets every member's address to the bond's.

    node_exporter does not say which device belongs to which bond; the shared address
    does, and the count must match `node_bonding_slaves` before the names are trusted
    (VLANs on the bond share its address too, and are excluded by name).
    """
    address = info.get(bond, ({}, 0.0))[0].get("address")
    if not address or slaves is None:
        return None
    members = sorted(
        dev for dev, (labels, _) in info.items()
        if dev != bond and not dev.startswith(f"{bond}.") and labels.get("address") == address
    )
    return members if len(members) == int(slaves) else None


def nic_samples_from_node_exporter(families: Exposition, keep: Container[str] = ()) -> list[NicSample]:
    """node_exporter families → NICs (netdev / netclass / bonding) and IB ports.

    Network devices that are container / virtual plumbing (`collectors.virtual_nics`) are
    left out, unless named in `keep` (the ports the layout expects on the node): a
    Kubernetes host serves a veth per pod, each of which would otherwise be carried as a
    port through evaluation, the record and the screen."""
    rx = _by_label(families, "node_network_receive_bytes_total", "device")
    tx = _by_label(families, "node_network_transmit_bytes_total", "device")
    up = _by_label(families, "node_network_up", "device")
    speed = _by_label(families, "node_network_speed_bytes", "device")
    info = _by_label(families, "node_network_info", "device")
    carrier = _by_label(families, "node_network_carrier", "device")
    arp_type = _by_label(families, "node_network_protocol_type", "device")
    slaves = _by_label(families, "node_bonding_slaves", "master")
    active = _by_label(families, "node_bonding_active", "master")
    netdev_errors = {
        field: _by_label(families, families.first_present(names) or names[0], "device")
        for field, names in _NETDEV_ERRORS.items()
    }
    pause_stats = _pause_stats(families)
    pause = {dev: pause_frames(table) for dev, table in pause_stats.items()}
    ecn = _by_device(families, ETHTOOL_ECN)
    # bond members are still found through every device's address (`info`, unfiltered)
    devices = sorted(d for d in {*rx, *tx, *up, *info, *slaves} if keeps_nic(d, keep))
    nics: list[NicSample] = []
    for dev in devices:
        kind: NicKind
        if dev in slaves:
            kind = "bond"
        elif dev == "lo":
            kind = "loopback"
        elif dev in arp_type:
            kind = _ARPHRD_KINDS.get(int(arp_type[dev][1]), "other")
        else:
            kind = "ethernet"
        operstate = info.get(dev, ({}, 0.0))[0].get("operstate")
        if not operstate and dev in up:  # no netclass info: node_network_up is operstate == up
            operstate = "up" if up[dev][1] >= 1 else "down"
        state = port_state(operstate, int(carrier[dev][1]) if dev in carrier else None)
        members: list[str] | None = None
        members_up: int | None = None
        if kind == "bond":
            count = slaves[dev][1]
            members = _bond_members(dev, int(count), info)
            members_up = int(active[dev][1]) if dev in active else None

        def value(table: dict[str, tuple[dict[str, str], float]], d: str = dev) -> float | None:
            return table[d][1] if d in table else None

        nics.append(
            NicSample(
                name=label_text(dev) or dev,
                kind=kind,
                state=label_text(state),
                speed_gbps=_gbps(value(speed)),
                rx_bytes_total=value(rx),
                tx_bytes_total=value(tx),
                members=members,
                members_up=members_up,
                **{field: value(table) for field, table in netdev_errors.items()},
                rx_pause_total=pause.get(dev, (None, None))[0],
                tx_pause_total=pause.get(dev, (None, None))[1],
                pause_by_priority_total=pause_by_priority(pause_stats.get(dev)),
                ecn_marked_total=ecn.get(dev),
            )
        )
    return nics + _ib_ports(families)


def node_exporter_unseen(families: Exposition, nics: Sequence[NicSample]) -> dict[str, str]:
    """What a node_exporter page does not let infertop see about its ports' errors."""
    ib = [n for n in nics if n.kind == "infiniband" and n.rx_bytes_total is not None]
    if ib and all(n.rx_errors_total is None and n.link_recoveries_total is None for n in ib):
        return {"nic_errors": "node_exporter reports no InfiniBand error counters "
                "(node_infiniband_port_errors_received_total): is the infiniband collector's "
                "counters directory readable?"}
    netdev = [n for n in nics if n.kind != "infiniband" and n.rx_bytes_total is not None]
    if netdev and all(n.rx_errors_total is None for n in netdev):
        return {"nic_errors": "node_exporter reports no network device error counters "
                "(node_network_receive_errs_total)"}
    return {}


def bond_notes(families: Exposition, nics: Sequence[NicSample]) -> list[str]:
    """Degraded bonds whose members could not be named, as one-line notes: a `NicSample`
    counts members by name, so without names the views would not see the shortfall."""
    slaves = _by_label(families, "node_bonding_slaves", "master")
    active = _by_label(families, "node_bonding_active", "master")
    named = {n.name for n in nics if n.kind == "bond" and n.members is not None}
    notes = []
    for bond, (_, count) in sorted(slaves.items()):
        if bond not in named and bond in active and active[bond][1] < count:
            notes.append(f"{clean_label(bond)}: {int(active[bond][1])} of {int(count)} bond members active")
    return notes


def node_parts(families: Exposition, keep_nics: Container[str] = ()) -> dict[str, object]:
    """The parts a node_exporter page gives ("nics", "notes", "unseen"); {} for any other page."""
    if not (families.has_prefix("node_network_") or families.has_prefix("node_infiniband_")):
        return {}
    nics = nic_samples_from_node_exporter(families, keep_nics)
    parts: dict[str, object] = {"nics": nics, "notes": bond_notes(families, nics)}
    unseen = node_exporter_unseen(families, nics)
    if unseen:
        parts["unseen"] = unseen
    return parts


#: every sample name `node_parts` reads (a real node_exporter page has thousands of lines)
NODE_EXPORTER_WANTED: frozenset[str] = frozenset({
    "node_network_receive_bytes_total", "node_network_transmit_bytes_total", "node_network_up",
    "node_network_speed_bytes", "node_network_info", "node_network_carrier", "node_network_protocol_type",
    "node_bonding_slaves", "node_bonding_active",
    "node_infiniband_state_id", "node_infiniband_rate_bytes_per_second",
    "node_infiniband_port_data_received_bytes_total", "node_infiniband_port_data_transmitted_bytes_total",
    "node_infiniband_port_transmit_wait_total", "node_infiniband_link_downed_total",
    "node_infiniband_symbol_error_total", "node_infiniband_physical_state_id",
    *(n for names in _NETDEV_ERRORS.values() for n in names), *_IB_ERRORS.values(),
    *ETHTOOL_PAUSE, ETHTOOL_ECN,
})
