"""Huawei npu-exporter pages → the accelerator and link parts of a sample.

Each NPU chip becomes a `GpuSample` with ``kind="npu"`` (screens, verdicts and money do
not care which kind of accelerator it is) and, when the page has network figures for
it, one `NicSample` with ``kind="npu-roce"`` for the chip's own RoCE port, tied to the
chip by `accelerator_index`: those ports count as links for the link-starved verdict.

Label names changed between npu-exporter generations: current builds label a chip
``id`` / ``model_name`` / ``vdie_id`` / ``pcie_bus_info`` (plus ``namespace``,
``pod_name``, ``container_name``), older ones ``npuID`` / ``modelName`` / ``uuid`` /
``pcie``. Both are read. Units follow the exporter's HELP texts: memory in MB (MiB),
power in W, link speed in Mb/s, bandwidth in MB/s (a gauge, not a counter, so it is not
turned into byte counters here).
"""

from __future__ import annotations

from collectors.bounds import whole
from collectors.exposition import Exposition, clean_label
from collectors.sample import GpuSample, NicSample

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
_NPU_LINK_STATUS = "npu_chip_info_link_status"  # 1 up, 0 down
_NPU_LINK_SPEED = "npu_chip_link_speed"  # Mb/s
_NPU_LINK_UP_NUM = "npu_chip_link_up_num"  # times the link came up (flaps)
# error-like RoCE counters summed into errors_total: their rise is what matters
_NPU_ROCE_ERRORS = (
    "npu_chip_roce_rx_err_pkt_num",
    "npu_chip_roce_tx_err_pkt_num",
    "npu_chip_roce_out_of_order_num",
)
_NPU_NETWORK = (_NPU_LINK_STATUS, _NPU_LINK_SPEED, _NPU_LINK_UP_NUM, *_NPU_ROCE_ERRORS)

#: every sample name read here (the scrape source parses only these)
ASCEND_WANTED: frozenset[str] = frozenset(
    {
        *(n for names in _NPU_GAUGES.values() for n in names),
        *(n for pair in _NPU_MEMORY for n in pair),
        _NPU_HEALTH, _NPU_ERROR_CODE, _NPU_NAME, *_NPU_NETWORK, "machine_npu_nums",
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


def _per_chip(families: Exposition, name: str) -> dict[int, tuple[dict[str, str], float]]:
    """chip id → (labels, value) of the first series for it (later duplicates ignored)."""
    out: dict[int, tuple[dict[str, str], float]] = {}
    for labels, value in families.series(name):
        chip = _chip_id(labels)
        if chip is not None and chip not in out:
            out[chip] = (labels, value)
    return out


def _first(families: Exposition, names: tuple[str, ...], chip: int) -> float | None:
    for name in names:
        found = _per_chip(families, name).get(chip)
        if found is not None:
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
        healthy = None if chip not in health else health[chip][1] == 1
        error = None
        if healthy is False:
            code = errors.get(chip)
            error = "unhealthy" + (f" (error code {int(code[1]):#x})" if code and code[1] else "")
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


def nic_samples_from_npu_exporter(families: Exposition) -> list[NicSample]:
    """Each chip's own RoCE port, when the page carries its network figures."""
    status = _per_chip(families, _NPU_LINK_STATUS)
    speed = _per_chip(families, _NPU_LINK_SPEED)
    up_num = _per_chip(families, _NPU_LINK_UP_NUM)
    roce = [_per_chip(families, n) for n in _NPU_ROCE_ERRORS]
    chips = sorted(set(status) | set(speed) | set(up_num) | {c for r in roce for c in r})
    ports = []
    for chip in chips:
        error_values = [r[chip][1] for r in roce if chip in r]
        state = None
        if chip in status:
            state = "up" if status[chip][1] == 1 else "down"
        ups = up_num[chip][1] if chip in up_num else None
        ports.append(
            NicSample(
                name=f"npu{chip}-roce",
                kind="npu-roce",
                state=state,
                speed_gbps=speed[chip][1] / 1000.0 if chip in speed and speed[chip][1] > 0 else None,
                errors_total=sum(error_values) if error_values else None,
                # each re-up follows a down; the first up is the bring-up
                link_downed_total=max(ups - 1, 0) if ups is not None else None,
                accelerator_index=chip,
            )
        )
    return ports


def ascend_notes(families: Exposition, gpus: list[GpuSample]) -> list[str]:
    expected = families.series("machine_npu_nums")
    if expected and gpus and len(gpus) < expected[0][1]:
        return [f"npu-exporter reports {len(gpus)} of {int(expected[0][1])} NPUs"]
    return []


def ascend_parts(families: Exposition) -> dict[str, object]:
    """The parts an npu-exporter page gives (for `exporters.EXPORTER_EXTRACTORS`)."""
    if not families.has_prefix("npu_chip_"):
        return {}
    gpus = gpu_samples_from_npu_exporter(families)
    parts: dict[str, object] = {"gpus": gpus}
    nics = nic_samples_from_npu_exporter(families)
    if nics:
        parts["nics"] = nics
    notes = ascend_notes(families, gpus)
    if notes:
        parts["notes"] = notes
    return parts
