"""Real compute activity from NVML GPU Performance Monitoring (GPM, Hopper and later).

Utilisation (`nvmlDeviceGetUtilizationRates`) counts a GPU busy while any kernel is
resident: a rank spinning in an all-to-all or an NCCL wait reads ~100 %. GPM counts
what the SMs actually did between two samples: the share of SMs busy, of warps
resident, of time in tensor pipes, of DRAM bandwidth used.

Each reading takes a fresh GPM sample per GPU and measures it against the previous one
(the first reading of a GPU has nothing to measure against: its figures are absent).
What the driver refuses is learnt once and said once (`refused`), never asked again.

Stdlib + pynvml only: the SSH bundle pastes this file into the probe.
"""

from __future__ import annotations

# NVML_GPM_METRIC_* ids (nvml.h), spelled out for bindings that predate them
_GPM_SM_UTIL = 2  # % of SMs busy
_GPM_SM_OCCUPANCY = 3  # % of warps resident vs the maximum
_GPM_ANY_TENSOR_UTIL = 5  # % of time any tensor pipe was active
_GPM_DRAM_BW_UTIL = 10  # % of DRAM bandwidth used
GPM_FIELDS = (
    ("sm_active_pct", _GPM_SM_UTIL),
    ("sm_occupancy_pct", _GPM_SM_OCCUPANCY),
    ("tensor_active_pct", _GPM_ANY_TENSOR_UTIL),
    ("dram_active_pct", _GPM_DRAM_BW_UTIL),
)
_GPM_METRICS_GET_VERSION = 1


def _error_text(exc):
    return "%s: %s" % (exc.__class__.__name__, str(exc)[:120])


class GpmReader:
    """GPM activity of each GPU handle; `read(i, h)` → {field: pct} (may be empty)."""

    def __init__(self, nvml, handles):
        self.nvml = nvml
        self.handles = handles
        self.samples: list = [None] * len(handles)  # the previous sample of each GPU
        # why GPM is not read on that GPU, once known
        self.refused: list[str | None] = [None] * len(handles)
        missing = [n for n in ("nvmlGpmSampleAlloc", "nvmlGpmSampleGet", "nvmlGpmMetricsGet")
                   if not hasattr(nvml, n)]
        for i, h in enumerate(handles):
            if missing:
                self.refused[i] = "pynvml lacks %s" % missing[0]
                continue
            self.refused[i] = self._support(h)

    def _support(self, h):
        query = getattr(self.nvml, "nvmlGpmQueryDeviceSupport", None)
        if query is None:
            return None  # older bindings: try a sample and learn from its answer
        try:
            support = query(h)
        except Exception as exc:
            return "nvmlGpmQueryDeviceSupport: " + _error_text(exc)
        if not getattr(support, "isSupportedDevice", 0):
            return "GPM not supported on this GPU (isSupportedDevice=0)"
        return None

    def read(self, i):
        """The activity of GPU `i` since its previous call ({} when unknown)."""
        if self.refused[i] is not None:
            return {}
        nv = self.nvml
        try:
            sample = nv.nvmlGpmSampleAlloc()
            nv.nvmlGpmSampleGet(self.handles[i], sample)
        except Exception as exc:
            self.refused[i] = "nvmlGpmSampleGet: " + _error_text(exc)
            return {}
        previous, self.samples[i] = self.samples[i], sample
        if previous is None:
            return {}
        try:
            return self._metrics(previous, sample)
        except Exception as exc:
            self.refused[i] = "nvmlGpmMetricsGet: " + _error_text(exc)
            return {}
        finally:
            self._free(previous)

    def _metrics(self, first, second):
        nv = self.nvml
        request = nv.c_nvmlGpmMetricsGet_t()
        request.version = getattr(nv, "NVML_GPM_METRICS_GET_VERSION", _GPM_METRICS_GET_VERSION)
        request.numMetrics = len(GPM_FIELDS)
        request.sample1 = first
        request.sample2 = second
        for k, (_, metric_id) in enumerate(GPM_FIELDS):
            request.metrics[k].metricId = metric_id
        nv.nvmlGpmMetricsGet(request)
        out = {}
        for k, (name, _) in enumerate(GPM_FIELDS):
            metric = request.metrics[k]
            value = float(metric.value)
            if metric.nvmlReturn == 0 and value == value and 0.0 <= value <= 100.0 + 1e-6:
                out[name] = min(value, 100.0)
        return out

    def _free(self, sample):
        try:
            self.nvml.nvmlGpmSampleFree(sample)
        except Exception:
            pass

    def close(self):
        for k, sample in enumerate(self.samples):
            if sample is not None:
                self._free(sample)
            self.samples[k] = None
