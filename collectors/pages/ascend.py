"""Huawei npu-exporter pages → the accelerator and link parts of a sample.

Each NPU chip becomes a `GpuSample` with ``kind="npu"`` (screens, verdicts and money do
not care which kind of accelerator it is) and, when the page has network figures for
it, one `NicSample` with ``kind="npu-roce"`` for the chip's own RoCE port, tied to the
chip by `accelerator_index`: those ports count as links for the link-starved verdict.

Label names changed between npu-exporter generations: current builds label a chip
``id`` / ``model_name`` / ``vdie_id`` / ``pcie_bus_info`` (plus ``namespace``,
``pod_name``, ``container_name``), older ones ``npuID`` / ``modelName`` / ``uuid`` /
``pcie``. Both are read. Units follow the exporter's HELP texts: memory in MB (MiB),
power in W, link speed in Mb/s (``npu_chip_link_speed``) or G (``npu_chip_info_link_speed``
per port on 910A5 / Atlas 350), bandwidth in MB/s (hccn_tool's "MB/sec", read as 10^6
bytes/s: a gauge, so it fills the ports' as-read rates, never byte counters), HCCS
bandwidth in GB/s (10^9 bytes/s).

A failed read (a DCMI or hccn_tool call that failed) is printed as -1 by npu-exporter
v26.1 (`FailedValue` → `FailedMetricValue`): every -1 here is unknown (None), never
"unhealthy", "down" or -1 W.

910A5 (Atlas 350 and later) pages carry the network figures per port, with the labels
``udie`` and ``port``: every port is a `NicSample` of its own (``npu<id>-d<udie>p<port>``).
"""

from __future__ import annotations

from collections.abc import Container

from infertop.collectors.bounds import whole
from infertop.collectors.pages.exposition import Exposition, clean_label
from infertop.collectors.safe_text import whole_number
from infertop.collectors.sample import GpuSample, NicSample

# what npu-exporter prints for a read that failed (FailedValue → FailedMetricValue)
FAILED_READ = -1.0
MB = 1e6  # hccn_tool's "MB/sec"
GB = 1e9

MIB = 1024 * 1024
ID_LABELS = ("id", "npuID")
MODEL_LABELS = ("model_name", "modelName")
UUID_LABELS = ("vdie_id", "uuid")

# GpuSample field → npu-exporter names, preferred first
_NPU_GAUGES: dict[str, tuple[str, ...]] = {
    "util_pct": ("npu_chip_info_utilization", "npu_chip_info_overall_utilization"),
    "power_w": ("npu_chip_info_power",),
    "temp_c": ("npu_chip_info_temperature",),
    "sm_clock_mhz": ("npu_chip_info_aicore_current_freq",),  # the AI-core clock
}
# (used, total) in MB: HBM on 910-class chips, DDR on 310-class ones
_NPU_MEMORY = (
    ("npu_chip_info_hbm_used_memory", "npu_chip_info_hbm_total_memory"),
    ("npu_chip_info_used_memory", "npu_chip_info_total_memory"),
)
_NPU_HEALTH = "npu_chip_info_health_status"  # 1 healthy, 0 not
_NPU_ERROR_CODE = "npu_chip_info_error_code"
_NPU_NAME = "npu_chip_info_name"  # value 1, the name in its `name` label
_NPU_LINK_STATUS = "npu_chip_info_link_status"  # 1 up, 0 down, -1 unknown
_NPU_LINK_SPEED = "npu_chip_link_speed"  # Mb/s
_NPU_PORT_SPEED = "npu_chip_info_link_speed"  # G (Gb/s), per (udie, port) on 910A5
_NPU_BANDWIDTH_TX = "npu_chip_info_bandwidth_tx"  # MB/s, per chip (or per port on 910A5)
_NPU_BANDWIDTH_RX = "npu_chip_info_bandwidth_rx"
# HCCS (chip-to-chip, 910B / A3): totals in GB/s, else per link X in GB/s; CRC errors per link
_HCCS_BW = "npu_chip_info_hccs_bandwidth_info_"
_HCCS_TOTAL_TX = _HCCS_BW + "total_tx"
_HCCS_TOTAL_RX = _HCCS_BW + "total_rx"
_HCCS_LINKS = range(8)  # npu-exporter's MaxHccsNum; links begin at 1 or 2
_HCCS_TX = tuple(f"{_HCCS_BW}tx_{i}" for i in _HCCS_LINKS)
_HCCS_RX = tuple(f"{_HCCS_BW}rx_{i}" for i in _HCCS_LINKS)
_HCCS_CRC = tuple(f"npu_chip_info_hccs_statistic_info_crc_err_cnt_{i}" for i in _HCCS_LINKS)
_NPU_LINK_UP_NUM = "npu_chip_link_up_num"  # times the link came up (flaps)
# error-like RoCE counters summed into errors_total: their rise is what matters
_NPU_ROCE_ERRORS = (
    "npu_chip_roce_rx_err_pkt_num",
    "npu_chip_roce_tx_err_pkt_num",
    "npu_chip_roce_out_of_order_num",
)
_NPU_NETWORK = (
    _NPU_LINK_STATUS, _NPU_LINK_SPEED, _NPU_PORT_SPEED, _NPU_LINK_UP_NUM, *_NPU_ROCE_ERRORS,
    _NPU_BANDWIDTH_TX, _NPU_BANDWIDTH_RX,
)
_NPU_HCCS = (_HCCS_TOTAL_TX, _HCCS_TOTAL_RX, *_HCCS_TX, *_HCCS_RX, *_HCCS_CRC)

#: every sample name read here (the scrape source parses only these)
ASCEND_WANTED: frozenset[str] = frozenset(
    {
        *(n for names in _NPU_GAUGES.values() for n in names),
        *(n for pair in _NPU_MEMORY for n in pair),
        _NPU_HEALTH, _NPU_ERROR_CODE, _NPU_NAME, *_NPU_NETWORK, *_NPU_HCCS, "machine_npu_nums",
    }
)


def _label(labels: dict[str, str], keys: tuple[str, ...]) -> str | None:
    for key in keys:
        if labels.get(key):
            return labels[key]
    return None


def _chip_id(labels: dict[str, str]) -> int | None:
    raw = _label(labels, ID_LABELS)
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        return None
    return value if 0 <= value < 65536 else None


def _known(value: float) -> float | None:
    """A value as read, or None for npu-exporter's failed-read marker."""
    return None if value == FAILED_READ else value


def _per_chip(families: Exposition, name: str) -> dict[int, tuple[dict[str, str], float | None]]:
    """chip id → (labels, value) of the first series for it (later duplicates ignored);
    the value is None where the exporter's read failed (-1)."""
    out: dict[int, tuple[dict[str, str], float | None]] = {}
    for labels, value in families.series(name):
        chip = _chip_id(labels)
        if chip is not None and chip not in out:
            out[chip] = (labels, _known(value))
    return out


def _first(families: Exposition, names: tuple[str, ...], chip: int) -> float | None:
    """The first known value for `chip` of `names` (a failed read falls to the next)."""
    for name in names:
        found = _per_chip(families, name).get(chip)
        if found is not None and found[1] is not None:
            return found[1]
    return None


def gpu_samples_from_npu_exporter(families: Exposition) -> list[GpuSample]:
    samples = []
    names = _per_chip(families, _NPU_NAME)
    health = _per_chip(families, _NPU_HEALTH)
    errors = _per_chip(families, _NPU_ERROR_CODE)
    chips: set[int] = set(health)
    for family in (*(n for ns in _NPU_GAUGES.values() for n in ns), *(n for p in _NPU_MEMORY for n in p)):
        chips.update(_per_chip(families, family))
    for chip in sorted(chips):  # a chip seen only in network families has no device figures
        labels: dict[str, str] = {}
        for name in (*_NPU_GAUGES["util_pct"], _NPU_HEALTH, *_NPU_GAUGES["power_w"]):
            found = _per_chip(families, name).get(chip)
            if found is not None:
                labels = found[0]
                break
        model = _label(labels, MODEL_LABELS) or (names[chip][0].get("name") if chip in names else None)
        fields: dict[str, object] = {f: _first(families, n, chip) for f, n in _NPU_GAUGES.items()}
        for used_name, total_name in _NPU_MEMORY:
            total_mb = _first(families, (total_name,), chip)
            if total_mb is not None and total_mb > 0:
                used_mb = _first(families, (used_name,), chip)
                fields["mem_total_bytes"] = whole(total_mb * MIB)
                fields["mem_used_bytes"] = whole(used_mb * MIB) if used_mb is not None else None
                break
        status = health[chip][1] if chip in health else None
        healthy = None if status is None else status == 1  # -1: the read failed, unknown
        error = None
        if healthy is False:
            code = errors.get(chip)
            error = "unhealthy" + (f" (error code {int(code[1]):#x})" if code and code[1] else "")
        fields.update(_hccs(families, chip))
        samples.append(
            GpuSample(
                index=chip,
                kind="npu",
                name=clean_label(model),
                uuid=clean_label(_label(labels, UUID_LABELS)),
                healthy=healthy,
                error=error,
                **fields,  # type: ignore[arg-type]
            )
        )
    return samples


def _hccs(families: Exposition, chip: int) -> dict[str, object]:
    """A chip's HCCS traffic (bytes/s each way) and CRC errors, where the page has them:
    the totals, else the sum over the links the exporter reports (1–7 or 2–7)."""
    out: dict[str, object] = {}
    for field, total, links in (
        ("nvlink_tx_bytes_per_s", _HCCS_TOTAL_TX, _HCCS_TX),
        ("nvlink_rx_bytes_per_s", _HCCS_TOTAL_RX, _HCCS_RX),
    ):
        value = _first(families, (total,), chip)
        if value is None:
            per_link = [v for name in links if (v := _first(families, (name,), chip)) is not None]
            value = sum(per_link) if per_link else None
        if value is not None:
            out[field] = value * GB
    crc = [v for name in _HCCS_CRC if (v := _first(families, (name,), chip)) is not None]
    if crc:
        out["nvlink_errors_total"] = whole(sum(crc))
    return out


PortKey = tuple[int, str | None, str | None]  # (chip, udie, port); udie/port None before 910A5


def _per_port(families: Exposition, name: str) -> dict[PortKey, float | None]:
    """(chip, udie, port) → value (None: failed read) of every series of `name`."""
    out: dict[PortKey, float | None] = {}
    for labels, value in families.series(name):
        chip = _chip_id(labels)
        if chip is None:
            continue
        key = (chip, labels.get("udie"), labels.get("port"))
        out.setdefault(key, _known(value))
    return out


def _port_order(key: PortKey) -> tuple[int, str, int, str]:
    chip, udie, port = key
    port_text = port or ""
    return chip, udie or "", -1 if (number := whole_number(port_text)) is None else number, port_text


def _port_name(key: PortKey) -> str:
    chip, udie, port = key
    if udie is None and port is None:
        return f"npu{chip}-roce"
    return clean_label(f"npu{chip}-d{udie}p{port}") or f"npu{chip}"


def nic_samples_from_npu_exporter(families: Exposition) -> list[NicSample]:
    """Each chip's own RoCE port (910B / A3), or every (udie, port) of a 910A5 chip, when
    the page carries its network figures."""
    status = _per_port(families, _NPU_LINK_STATUS)
    speed_mbps = _per_port(families, _NPU_LINK_SPEED)
    speed_g = _per_port(families, _NPU_PORT_SPEED)
    up_num = _per_port(families, _NPU_LINK_UP_NUM)
    tx = _per_port(families, _NPU_BANDWIDTH_TX)
    rx = _per_port(families, _NPU_BANDWIDTH_RX)
    roce = [_per_port(families, n) for n in _NPU_ROCE_ERRORS]
    keys = sorted(
        {*status, *speed_mbps, *speed_g, *up_num, *tx, *rx, *(k for r in roce for k in r)},
        key=_port_order,
    )
    ports = []
    for key in keys:
        error_values = [v for r in roce if (v := r.get(key)) is not None]
        link = status.get(key)
        state = None if link is None else ("up" if link == 1 else "down")
        ups = up_num.get(key)
        speed: float | None = None
        if speed_g.get(key) is not None:
            speed = speed_g[key]
        elif speed_mbps.get(key) is not None:
            speed = speed_mbps[key] / 1000.0  # type: ignore[operator]
        ports.append(
            NicSample(
                name=_port_name(key),
                kind="npu-roce",
                state=state,
                speed_gbps=speed if speed else None,
                rx_bytes_per_s=None if rx.get(key) is None else rx[key] * MB,  # type: ignore[operator]
                tx_bytes_per_s=None if tx.get(key) is None else tx[key] * MB,  # type: ignore[operator]
                errors_total=sum(error_values) if error_values else None,
                # each re-up follows a down; the first up is the bring-up
                link_downed_total=max(ups - 1, 0) if ups is not None else None,
                accelerator_index=key[0],
            )
        )
    return ports


def ascend_unseen(nics: list[NicSample]) -> dict[str, str]:
    """What an npu-exporter page does not let infertop see about the NPUs' own ports."""
    unseen: dict[str, str] = {}
    if nics and all(n.speed_gbps is None for n in nics):
        unseen["npu_link_speed"] = (
            "npu-exporter reports no NPU link speed (npu_chip_link_speed / "
            "npu_chip_info_link_speed): hccn_tool failed or the network group is off"
        )
    if nics and all(n.rx_bytes_per_s is None and n.tx_bytes_per_s is None for n in nics):
        unseen["npu_traffic"] = (
            "npu-exporter reports no NPU RoCE traffic (npu_chip_info_bandwidth_tx/rx)"
        )
    return unseen


def ascend_notes(families: Exposition, gpus: list[GpuSample]) -> list[str]:
    expected = families.series("machine_npu_nums")
    if expected and gpus and len(gpus) < expected[0][1]:
        return [f"npu-exporter reports {len(gpus)} of {int(expected[0][1])} NPUs"]
    return []


def ascend_parts(families: Exposition, keep_nics: Container[str] = ()) -> dict[str, object]:
    """The parts an npu-exporter page gives (for `exporters.EXPORTER_EXTRACTORS`); its
    ports are the NPUs' own, never virtual, so `keep_nics` changes nothing here."""
    if not families.has_prefix("npu_chip_"):
        return {}
    gpus = gpu_samples_from_npu_exporter(families)
    parts: dict[str, object] = {"gpus": gpus}
    nics = nic_samples_from_npu_exporter(families)
    if nics:
        parts["nics"] = nics
    unseen = ascend_unseen(nics)
    if unseen:
        parts["unseen"] = unseen
    notes = ascend_notes(families, gpus)
    if notes:
        parts["notes"] = notes
    return parts
