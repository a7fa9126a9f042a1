"""Exporter pages → the GPU and NIC parts of a sample.

- dcgm-exporter → `GpuSample`s, one per `gpu` label;
- node_exporter → `NicSample`s: Ethernet / bond devices (netdev, netclass, bonding
  collectors) and InfiniBand ports (infiniband collector; its byte counters are already
  ×4, unlike sysfs). Container / virtual plumbing (pod veths, CNI bridges: see
  collectors.virtual_nics) is left out unless the layout expects the port by name.

Both take an `Exposition` (samples by exact name), so a Prometheus source can build one
from query results and reuse them. Unknown stays `None`; a page that simply lacks a
family yields fewer fields, never zeros.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Container, Sequence

from collectors.ascend import ASCEND_WANTED, ascend_parts
from collectors.bounds import whole
from collectors.exposition import MAX_LABEL_CHARS, Exposition, clean_label
from collectors.sample import GpuSample, NicKind, NicSample
from collectors.virtual_nics import keeps_nic

MIB = 1024 * 1024


def label_text(value: str | None) -> str | None:
    """`clean_label` of a label value. A page names the same devices, GPU models and
    UUIDs round after round: a short value is made inert once (a bounded cache, as the
    values come from the page; a long one, cut anyway, every time)."""
    if value is None or len(value) > MAX_LABEL_CHARS:
        return clean_label(value)
    return _short_label_text(value)


@functools.lru_cache(maxsize=4096)
def _short_label_text(value: str) -> str | None:
    return clean_label(value)

# ---------------------------------------------------------------------------- dcgm

# GpuSample field → (exporter names, newest first; factor to the field's unit)
_DCGM_GAUGES: dict[str, tuple[tuple[str, ...], float]] = {
    "util_pct": (("DCGM_FI_DEV_GPU_UTIL",), 1.0),
    "power_w": (("DCGM_FI_DEV_POWER_USAGE",), 1.0),
    "temp_c": (("DCGM_FI_DEV_GPU_TEMP",), 1.0),
    "sm_clock_mhz": (("DCGM_FI_DEV_SM_CLOCK",), 1.0),
    "energy_j_total": (("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",), 1e-3),  # mJ
}
_DCGM_UTIL_RATIO = "DCGM_FI_DEV_GPU_UTIL_RATIO"  # newer builds: 0–1 instead of %
_DCGM_XID = ("DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_XID_ERROR")
_DCGM_CLOCK_REASONS = ("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS")
_DCGM_ECC_DBE = ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL")

# NVLink traffic, best first. Each entry: (tx names, rx names, factor to bytes/s); a GPU
# takes the first entry it has a series for. The profiling fields are bytes/s per GPU;
# their per-link twins (label `nvlink`, one series per link) are summed over the links.
# DCGM_FI_DEV_NVLINK_{TX,RX}_THROUGHPUT_TOTAL share the unit of the total below.
NVLINK_TOTAL_BYTES_PER_UNIT = 1000.0 * 1024.0
_DCGM_NVLINK_DIRECTED: tuple[tuple[str, str, float], ...] = (
    ("DCGM_FI_PROF_NVLINK_TX_BYTES", "DCGM_FI_PROF_NVLINK_RX_BYTES", 1.0),
    ("DCGM_FI_PROF_NVLINK_TX_BYTES_PER_LINK", "DCGM_FI_PROF_NVLINK_RX_BYTES_PER_LINK", 1.0),
    ("DCGM_FI_DEV_NVLINK_TX_THROUGHPUT_TOTAL", "DCGM_FI_DEV_NVLINK_RX_THROUGHPUT_TOTAL",
     NVLINK_TOTAL_BYTES_PER_UNIT),
)
# The one NVLink traffic field in dcgm-exporter's default counters (4.5.3-4.8.2):
# DCGM field 449, alias of DCGM_FI_DEV_NVLINK_THROUGHPUT_TOTAL. Declared a "counter" in
# the CSV, it is a rate: DCGM reads NVML's cumulative data TX + RX counters (KiB), takes
# the difference to its previous reading over the elapsed seconds and divides by 1000
# (DcgmCacheManager::ReadAndCacheNvLinkBandwidth), an integer of 1000 KiB/s units
# (labelled "MB/s"). Both directions together, payload only: it fills
# `nvlink_bytes_per_s`, never the per-direction fields.
_DCGM_NVLINK_TOTAL = ("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "DCGM_FI_DEV_NVLINK_THROUGHPUT_TOTAL")
# NVLink error counters, summed per GPU: the per-GPU totals, else their per-link twins
# (summed over every link, not the first series only)
_DCGM_NVLINK_ERRORS = (
    "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
    "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL",
    "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL",
    "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL",
)
_DCGM_NVLINK_ERRORS_PER_LINK = (
    "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_PER_LINK_TOTAL",
    "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_PER_LINK_TOTAL",
    "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_PER_LINK_TOTAL",
    "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_PER_LINK_TOTAL",
)
HOSTNAME_LABELS = ("Hostname", "hostname")  # renamed in newer dcgm-exporter builds
# `UUID` by default, `uuid` with --use-old-namespace, `gpu_uuid` on per-link series
UUID_LABELS = ("UUID", "uuid", "gpu_uuid")
# what infertop reads that dcgm-exporter's default counters do not collect: capability
# key → (names that would give it, the reason shown when none is on the page)
DCGM_COUNTERS_DOC = "docs/dcgm-counters.csv"
_DCGM_UNSEEN: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("clock_events", _DCGM_CLOCK_REASONS,
     "dcgm-exporter does not collect DCGM_FI_DEV_CLOCKS_EVENT_REASONS"),
    ("ecc", _DCGM_ECC_DBE, "dcgm-exporter does not collect DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"),
    # a GPU without NVLink (PCIe cards) has these blank, and dcgm-exporter skips blanks
    ("nvlink_errors", (*_DCGM_NVLINK_ERRORS, *_DCGM_NVLINK_ERRORS_PER_LINK),
     "dcgm-exporter does not collect the NVLink error counters "
     "(DCGM_FI_DEV_NVLINK_*_ERROR_COUNT_TOTAL), or the GPUs have no NVLink"),
    ("nvlink", (*(n for t in _DCGM_NVLINK_DIRECTED for n in t[:2]), *_DCGM_NVLINK_TOTAL),
     "dcgm-exporter does not collect NVLink traffic (DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL), "
     "or the GPUs have no NVLink"),
)

# the fields docs/dcgm-counters.csv switches on for each key above: the fix a blind spot
# that every node shares is told with (monitor/evaluation/shared_gaps.py)
DCGM_UNSEEN_FIELDS: dict[str, tuple[str, ...]] = {
    "clock_events": _DCGM_CLOCK_REASONS[:1],
    "ecc": _DCGM_ECC_DBE[:1],
    "nvlink_errors": _DCGM_NVLINK_ERRORS,
    "nvlink": _DCGM_NVLINK_TOTAL[:1],
}


def label_hostname(labels: dict[str, str]) -> str | None:
    for key in HOSTNAME_LABELS:
        if labels.get(key):
            return labels[key]
    return None


def _label_uuid(labels: dict[str, str]) -> str | None:
    for key in UUID_LABELS:
        if labels.get(key):
            return labels[key]
    return None


def _gpu_series(
    families: Exposition, name: str, hostname: str | None
) -> list[tuple[int, dict[str, str], float]]:
    """(gpu index, labels, value) of every per-GPU series of `name` (of `hostname`)."""
    out = []
    for labels, value in families.series(name):
        if hostname is not None and label_hostname(labels) not in (None, hostname):
            continue
        try:
            index = int(labels.get("gpu", ""))
        except ValueError:
            continue  # not a per-GPU series (or a MIG instance without a GPU index)
        out.append((index, labels, value))
    return out


def _per_gpu(
    families: Exposition, names: Sequence[str], hostname: str | None
) -> dict[int, tuple[dict[str, str], float]]:
    """gpu index → (labels, value) of the first present name; the first series wins."""
    found = families.first_present(names)
    out: dict[int, tuple[dict[str, str], float]] = {}
    if found is None:
        return out
    for index, labels, value in _gpu_series(families, found, hostname):
        out.setdefault(index, (labels, value))
    return out


def _per_gpu_sum(
    families: Exposition, name: str, hostname: str | None
) -> dict[int, tuple[dict[str, str], float]]:
    """gpu index → (labels of its first series, sum over all its series): for per-link
    fields, one series per NVLink (label `nvlink`) of the GPU."""
    out: dict[int, tuple[dict[str, str], float]] = {}
    for index, labels, value in _gpu_series(families, name, hostname):
        first, total = out.get(index, (labels, 0.0))
        out[index] = (first, total + value)
    return out


def dcgm_unseen(families: Exposition) -> dict[str, str]:
    """What a dcgm-exporter page does not let infertop see, and why (`NodeSample.unseen`)."""
    return {
        key: f"{reason} (add it: {DCGM_COUNTERS_DOC})"
        for key, names, reason in _DCGM_UNSEEN
        if families.first_present(names) is None
    }


def gpu_samples_from_dcgm(families: Exposition, hostname: str | None = None) -> list[GpuSample]:
    """dcgm-exporter families → one `GpuSample` per GPU, sorted by index.

    `hostname` keeps only series whose `Hostname` / `hostname` label is that host (or
    absent): for pages that hold several hosts' GPUs.
    """
    fields: dict[int, dict[str, object]] = {}
    labels_of: dict[int, dict[str, str]] = {}

    def put(index: int, labels: dict[str, str], field: str, value: object) -> None:
        fields.setdefault(index, {})[field] = value
        labels_of.setdefault(index, labels)

    for field, (names, factor) in _DCGM_GAUGES.items():
        for index, (labels, value) in _per_gpu(families, names, hostname).items():
            put(index, labels, field, value * factor)
    for index, (labels, value) in _per_gpu(families, (_DCGM_UTIL_RATIO,), hostname).items():
        if "util_pct" not in fields.get(index, {}):
            put(index, labels, "util_pct", value * 100.0)
    used = _per_gpu(families, ("DCGM_FI_DEV_FB_USED",), hostname)
    free = _per_gpu(families, ("DCGM_FI_DEV_FB_FREE",), hostname)
    reserved = _per_gpu(families, ("DCGM_FI_DEV_FB_RESERVED",), hostname)
    total = _per_gpu(families, ("DCGM_FI_DEV_FB_TOTAL",), hostname)
    for index, (labels, value) in used.items():
        put(index, labels, "mem_used_bytes", whole(value * MIB))
        if index in total:
            put(index, labels, "mem_total_bytes", whole(total[index][1] * MIB))
        elif index in free:
            # FB_USED + FB_FREE (+ FB_RESERVED where reported) is the framebuffer
            extra = reserved[index][1] if index in reserved else 0.0
            put(index, labels, "mem_total_bytes", whole((value + free[index][1] + extra) * MIB))
    for field, names, convert in (
        ("xid_last", _DCGM_XID, int),
        ("clock_event_reasons", _DCGM_CLOCK_REASONS, int),
        ("ecc_uncorrected_total", _DCGM_ECC_DBE, int),
    ):
        for index, (labels, value) in _per_gpu(families, names, hostname).items():
            put(index, labels, field, convert(value))
    _put_nvlink_traffic(families, hostname, put)
    errors: dict[int, float] = {}
    for per_gpu, per_link in zip(_DCGM_NVLINK_ERRORS, _DCGM_NVLINK_ERRORS_PER_LINK, strict=True):
        found = _per_gpu(families, (per_gpu,), hostname) or _per_gpu_sum(families, per_link, hostname)
        for index, (labels, value) in found.items():
            errors[index] = errors.get(index, 0.0) + value
            labels_of.setdefault(index, labels)
    for index, count in errors.items():
        put(index, labels_of[index], "nvlink_errors_total", whole(count))
    samples = []
    for index in sorted(fields):
        labels = labels_of[index]
        samples.append(
            GpuSample(
                index=index,
                kind="gpu",
                name=label_text(labels.get("modelName")),
                uuid=label_text(_label_uuid(labels)),
                **fields[index],  # type: ignore[arg-type]
            )
        )
    return samples


def _put_nvlink_traffic(
    families: Exposition,
    hostname: str | None,
    put: Callable[[int, dict[str, str], str, object], None],
) -> None:
    """NVLink bytes/s per GPU: per direction from the best entry the GPU has a series of
    (both directions from that one entry), else both directions together from
    DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL (the default counters' only NVLink traffic field)."""
    done: set[int] = set()
    for tx_name, rx_name, factor in _DCGM_NVLINK_DIRECTED:
        tx = _per_gpu_sum(families, tx_name, hostname)
        rx = _per_gpu_sum(families, rx_name, hostname)
        for index in sorted((set(tx) | set(rx)) - done):
            done.add(index)
            for field, found in (("nvlink_tx_bytes_per_s", tx), ("nvlink_rx_bytes_per_s", rx)):
                if index in found:
                    labels, value = found[index]
                    put(index, labels, field, value * factor)
    for index, (labels, value) in _per_gpu(families, _DCGM_NVLINK_TOTAL, hostname).items():
        if index not in done:
            put(index, labels, "nvlink_bytes_per_s", value * NVLINK_TOTAL_BYTES_PER_UNIT)


# ---------------------------------------------------------------------------- node_exporter

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
    arp_type = _by_label(families, "node_network_protocol_type", "device")
    slaves = _by_label(families, "node_bonding_slaves", "master")
    active = _by_label(families, "node_bonding_active", "master")
    netdev_errors = {
        field: _by_label(families, families.first_present(names) or names[0], "device")
        for field, names in _NETDEV_ERRORS.items()
    }
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
        state: str | None = operstate.lower() if operstate else None
        if state is None and dev in up:
            state = "up" if up[dev][1] >= 1 else "down"
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


# ---------------------------------------------------------------------------- detection

#: (page, the port names the layout expects on the node) → parts
Extractor = Callable[[Exposition, Container[str]], dict[str, object]]


def _dcgm_parts(families: Exposition, keep_nics: Container[str] = ()) -> dict[str, object]:
    if not families.has_prefix("DCGM_FI_"):
        return {}
    parts: dict[str, object] = {"gpus": gpu_samples_from_dcgm(families)}
    unseen = dcgm_unseen(families)
    if unseen:
        parts["unseen"] = unseen
    return parts


def _node_parts(families: Exposition, keep_nics: Container[str] = ()) -> dict[str, object]:
    if not (families.has_prefix("node_network_") or families.has_prefix("node_infiniband_")):
        return {}
    nics = nic_samples_from_node_exporter(families, keep_nics)
    parts: dict[str, object] = {"nics": nics, "notes": bond_notes(families, nics)}
    unseen = node_exporter_unseen(families, nics)
    if unseen:
        parts["unseen"] = unseen
    return parts


#: Recognisers for exporter pages, tried in order on every `metrics` URL of a node, with
#: the port names the layout expects there (kept whatever their name). Each
#: returns the parts it found ("gpus", "nics", "notes", "unseen"); other exporters (npu-exporter)
#: append theirs here.
EXPORTER_EXTRACTORS: list[Extractor] = [_dcgm_parts, _node_parts]


#: Every sample name the extractors read: exporter pages are parsed for these only
#: (a real node_exporter page has thousands of lines). Extractors added to
#: `EXPORTER_EXTRACTORS` add their names to it (a frozenset: the parser's compiled scanner
#: is cached by it, and converting a set each page costs a little each time).
_EXPORTER_NAMES: set[str] = {
    *(n for names, _ in _DCGM_GAUGES.values() for n in names),
    _DCGM_UTIL_RATIO, *_DCGM_XID, *_DCGM_CLOCK_REASONS, *_DCGM_ECC_DBE, *_DCGM_NVLINK_ERRORS,
    *_DCGM_NVLINK_ERRORS_PER_LINK, *(n for entry in _DCGM_NVLINK_DIRECTED for n in entry[:2]),
    *_DCGM_NVLINK_TOTAL,
    "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_RESERVED", "DCGM_FI_DEV_FB_TOTAL",
    "node_network_receive_bytes_total", "node_network_transmit_bytes_total", "node_network_up",
    "node_network_speed_bytes", "node_network_info", "node_network_protocol_type",
    "node_bonding_slaves", "node_bonding_active",
    "node_infiniband_state_id", "node_infiniband_rate_bytes_per_second",
    "node_infiniband_port_data_received_bytes_total", "node_infiniband_port_data_transmitted_bytes_total",
    "node_infiniband_port_transmit_wait_total", "node_infiniband_link_downed_total",
    "node_infiniband_symbol_error_total", "node_infiniband_physical_state_id",
    *(n for names in _NETDEV_ERRORS.values() for n in names), *_IB_ERRORS.values(),
}


# Huawei npu-exporter: mapped in its own module, registered here so every page is tried
EXPORTER_EXTRACTORS.append(ascend_parts)
EXPORTER_WANTED: frozenset[str] = frozenset(_EXPORTER_NAMES | ASCEND_WANTED)


def parts_from_exporter(families: Exposition, keep_nics: Container[str] = ()) -> dict[str, object]:
    """Every part any known exporter contributes from one page (empty if none).
    `keep_nics`: the ports the layout expects on the node, read even when named like
    container / virtual plumbing (which is otherwise left out)."""
    parts: dict[str, object] = {}
    for extract in EXPORTER_EXTRACTORS:
        for key, value in extract(families, keep_nics).items():
            if isinstance(value, list) and isinstance(parts.get(key), list):
                parts[key] = [*parts[key], *value]  # type: ignore[misc]
            elif isinstance(value, dict) and isinstance(parts.get(key), dict):
                parts[key] = {**parts[key], **value}  # type: ignore[dict-item]
            else:
                parts[key] = value
    return parts
