"""dcgm-exporter pages → `GpuSample`s, one per `gpu` label.

Takes an `Exposition` (samples by exact name), so a Prometheus source can build one from
query results and reuse it. Unknown stays `None`; a page that simply lacks a family yields
fewer fields, never zeros. Registered with the other exporters in collectors/pages/exporters.py.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Sequence

from infertop.collectors.bounds import whole
from infertop.collectors.pages.exposition import Exposition, label_text
from infertop.collectors.sample import GpuSample

MIB = 1024 * 1024

# GpuSample field → (exporter names, newest first; factor to the field's unit)
_DCGM_GAUGES: dict[str, tuple[tuple[str, ...], float]] = {
    "util_pct": (("DCGM_FI_DEV_GPU_UTIL",), 1.0),
    "power_w": (("DCGM_FI_DEV_POWER_USAGE",), 1.0),
    "temp_c": (("DCGM_FI_DEV_GPU_TEMP",), 1.0),
    "sm_clock_mhz": (("DCGM_FI_DEV_SM_CLOCK",), 1.0),
    "energy_j_total": (("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",), 1e-3),  # mJ
    # profiling (DCP) ratios 0–1 → percent: real compute activity beside util
    "sm_active_pct": (("DCGM_FI_PROF_SM_ACTIVE",), 100.0),
    "sm_occupancy_pct": (("DCGM_FI_PROF_SM_OCCUPANCY",), 100.0),
    "tensor_active_pct": (("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",), 100.0),
    "dram_active_pct": (("DCGM_FI_PROF_DRAM_ACTIVE",), 100.0),
}
_DCGM_ACTIVITY_FIELDS = ("sm_active_pct", "sm_occupancy_pct", "tensor_active_pct", "dram_active_pct")
# GpuSample field → its profiling field (a 0–1 ratio): the prom source asks for the same
ACTIVITY_METRICS = {f: _DCGM_GAUGES[f][0][0] for f in _DCGM_ACTIVITY_FIELDS}
ACTIVITY_FACTOR = _DCGM_GAUGES["sm_active_pct"][1]  # ratio → percent
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
        if any(f in fields[index] for f in _DCGM_ACTIVITY_FIELDS):
            fields[index]["activity_source"] = "dcgm"
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


def dcgm_parts(families: Exposition, keep_nics: Container[str] = ()) -> dict[str, object]:
    """The parts a dcgm-exporter page gives ("gpus", "unseen"); {} for any other page."""
    if not families.has_prefix("DCGM_FI_"):
        return {}
    parts: dict[str, object] = {"gpus": gpu_samples_from_dcgm(families)}
    unseen = dcgm_unseen(families)
    if unseen:
        parts["unseen"] = unseen
    return parts


#: every sample name `dcgm_parts` reads (the page is parsed for these only)
DCGM_WANTED: frozenset[str] = frozenset({
    *(n for names, _ in _DCGM_GAUGES.values() for n in names),
    _DCGM_UTIL_RATIO, *_DCGM_XID, *_DCGM_CLOCK_REASONS, *_DCGM_ECC_DBE, *_DCGM_NVLINK_ERRORS,
    *_DCGM_NVLINK_ERRORS_PER_LINK, *(n for entry in _DCGM_NVLINK_DIRECTED for n in entry[:2]),
    *_DCGM_NVLINK_TOTAL,
    "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_RESERVED", "DCGM_FI_DEV_FB_TOTAL",
})
