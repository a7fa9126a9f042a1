"""The node's NVIDIA GPUs: through NVML (`pynvml`) when the node has it, else `nvidia-smi`.

Standard library only (plus `pynvml` when present): bundled into the probe that runs on
the node (`collectors/probe/bundle.py`); the local source imports it directly. Read-only; a
figure that cannot be read is left out or null.
"""

from __future__ import annotations

import time

# Stdlib-only helpers; the SSH bundle pastes their text above this file instead.
# bundle: strip-begin
from infertop.collectors.probe.gpm import GpmReader
from infertop.collectors.probe.gpu_processes import read_gpu_processes

# bundle: strip-end

# ---------------------------------------------------------------------------- GPUs (NVML)

# NVML field ids and codes from nvml.h, spelled out so that an older pynvml that lacks
# the names still reads what the driver has.
_FI_NVLINK_TX_KIB = 138  # NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX: KiB, cumulative
_FI_NVLINK_RX_KIB = 139  # NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX
# NVML_FI_DEV_NVLINK_ERROR_DL_{REPLAY,RECOVERY,CRC} (Hopper and later drivers), and the
# older per-device totals (CRC flit, CRC data, replay, recovery) used when those fail.
_FI_NVLINK_ERRORS = (161, 162, 163)
_FI_NVLINK_ERRORS_LEGACY = (38, 45, 52, 59)
_SCOPE_ALL_LINKS = 0xFFFFFFFF  # a field's scope: UINT_MAX sums every link; a bare id reads link 0 only
_NVML_SUCCESS = 0
_NVML_ERROR_NOT_SUPPORTED = 3
_NVLINK_MAX_LINKS = 18  # used only when pynvml does not name NVML_NVLINK_MAX_LINKS
_VALUE_MEMBERS = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}


def _field_number(fv):
    """The number in an nvmlFieldValue_t, or None when the driver answered an error for it."""
    if getattr(fv, "nvmlReturn", _NVML_SUCCESS) != _NVML_SUCCESS:
        return None
    member = _VALUE_MEMBERS.get(getattr(fv, "valueType", 3), "ullVal")
    return getattr(fv.value, member, None)


def memory_info(nv, h, unsupported):
    """{"mem_used_bytes", "mem_total_bytes", "mem_info_version"} of one GPU ({} when even
    v1 fails). `unsupported` (a set) remembers that v2 is missing, so it is asked once."""
    version = getattr(nv, "nvmlMemory_v2", None)
    if version is not None and "mem_v2" not in unsupported:
        try:
            mem = nv.nvmlDeviceGetMemoryInfo(h, version=version)
            return {"mem_used_bytes": int(mem.used), "mem_total_bytes": int(mem.total),
                    "mem_info_version": 2}
        except TypeError:
            unsupported.add("mem_v2")  # bindings whose call takes no version
        except nv.NVMLError as exc:
            if isinstance(exc, _v2_missing_errors(nv)):
                unsupported.add("mem_v2")  # the driver has no v2: do not ask again
            # any other error (a lost GPU, a timeout) falls to v1 for this reading only
        except Exception:
            pass
    try:
        mem = nv.nvmlDeviceGetMemoryInfo(h)
    except Exception:
        return {}
    return {"mem_used_bytes": int(mem.used), "mem_total_bytes": int(mem.total), "mem_info_version": 1}


def _v2_missing_errors(nv):
    """The NVML errors that mean "this driver has no v2 memory info"."""
    names = ("NVMLError_FunctionNotFound", "NVMLError_NotSupported", "NVMLError_ArgumentVersionMismatch")
    found = (getattr(nv, name, None) for name in names)  # no walrus: 3.6+ on nodes
    return tuple(cls for cls in found if cls is not None)


class NvmlReader:
    """Reads GPUs through pynvml. Handles are looked up once; only cheap calls per tick.

    Never calls nvmlDeviceGetPcieThroughput (it blocks ~20 ms sampling). What a GPU does
    not support is learnt once and not asked again: a single GPU without NVLink must not
    pay for 18 failing link queries every tick.

    The total-energy counter is read only every `energy_every_s`: on an H200 it costs
    2.4 ms median, 16 ms p99 per call, against ~13 µs for all the other figures together
    (BENCHMARKS.md). In between, `energy_j_total` is left out (unknown at that instant);
    rates skip unknown points, so a window's energy rate stays right.
    """

    def __init__(self, energy_every_s=10.0):
        import pynvml  # optional on the node

        self.nvml = pynvml
        pynvml.nvmlInit()
        self.count = pynvml.nvmlDeviceGetCount()
        self.handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(self.count)]
        self.static = []
        for h in self.handles:
            self.static.append(
                {
                    "name": self._try(pynvml.nvmlDeviceGetName, h),
                    "uuid": self._try(pynvml.nvmlDeviceGetUUID, h),
                }
            )
        # which optional calls this driver supports, learnt on first use
        self.unsupported = set()
        # per GPU: None = not probed yet; [] = no NVLink; else the link indices present
        self.nvlinks = [None] * self.count
        # per GPU: the NVLink field ids this GPU answered, learnt on the first read
        self.nvlink_fields = [None] * self.count
        self.energy_every_s = energy_every_s
        self.energy_read_at = [float("-inf")] * self.count  # monotonic time of each GPU's last energy read
        # real compute activity (GPM, Hopper and later); never a reason to fail the reader
        self.gpm: GpmReader | None = None
        try:
            self.gpm = GpmReader(pynvml, self.handles)
        except Exception:
            self.gpm = None

    def _try(self, fn, *args):
        try:
            value = fn(*args)
        except Exception:
            return None
        if isinstance(value, bytes):
            value = value.decode(errors="replace")
        return value

    def _opt(self, key, fn, *args):
        if key in self.unsupported:
            return None
        try:
            return fn(*args)
        except self.nvml.NVMLError_NotSupported:
            self.unsupported.add(key)
        except Exception:
            pass
        return None

    # -- memory

    def _memory(self, h):
        """Used and total framebuffer as nvidia-smi shows them, and which NVML call said so.

        NVML's v1 memory info counts the driver's reserved memory as used (615 MiB on an
        idle H200 where nvidia-smi says 0); the v2 call (`nvmlDeviceGetMemoryInfo_v2`,
        nvidia-ml-py's `version=nvmlMemory_v2`) reports it apart, and nvidia-smi uses it.
        Drivers or bindings without v2 fall back to v1, once learnt, and the reading says
        `mem_info_version: 1`.
        """
        return memory_info(self.nvml, h, self.unsupported)

    # -- NVLink

    def _probe_links(self, h):
        """The link indices this GPU has ([] when NVLink is not supported at all)."""
        nv = self.nvml
        present = []
        for link in range(getattr(nv, "NVML_NVLINK_MAX_LINKS", _NVLINK_MAX_LINKS)):
            try:
                nv.nvmlDeviceGetNvLinkState(h, link)
            except nv.NVMLError_NotSupported:
                if link == 0:
                    return []  # no NVLink on this GPU (e.g. a single H200, or PCIe cards)
                continue
            except nv.NVMLError:
                continue  # InvalidArgument past the last link, or a link not wired
            present.append(link)
        return present

    def _probe_fields(self, h):
        """Which NVLink field ids answer on this GPU; the others are never asked again."""
        wanted = (_FI_NVLINK_TX_KIB, _FI_NVLINK_RX_KIB, *_FI_NVLINK_ERRORS, *_FI_NVLINK_ERRORS_LEGACY)
        try:
            values = self.nvml.nvmlDeviceGetFieldValues(h, [(f, _SCOPE_ALL_LINKS) for f in wanted])
        except Exception:
            return ()
        # indexing, not zip(strict=…): the probe must run on Pythons older than 3.10
        ok = [f for k, f in enumerate(wanted) if _field_number(values[k]) is not None]
        if any(f in ok for f in _FI_NVLINK_ERRORS):  # the newer counters supersede the old ones
            ok = [f for f in ok if f not in _FI_NVLINK_ERRORS_LEGACY]
        return tuple(ok)

    def _read_nvlink(self, i, h, gpu):
        nv = self.nvml
        if self.nvlinks[i] is None:
            self.nvlinks[i] = self._probe_links(h)
            self.nvlink_fields[i] = self._probe_fields(h) if self.nvlinks[i] else ()
        links = self.nvlinks[i]
        if not links:
            return  # fields stay absent: unknown, never 0
        up = 0
        known = 0
        for link in links:
            state = self._try(nv.nvmlDeviceGetNvLinkState, h, link)
            if state is None:
                continue
            known += 1
            up += state == getattr(nv, "NVML_FEATURE_ENABLED", 1)
        gpu["nvlink_links_total"] = len(links)
        gpu["nvlink_links_up"] = up if known else None
        fields = self.nvlink_fields[i]
        if not fields:
            return
        try:
            values = nv.nvmlDeviceGetFieldValues(h, [(f, _SCOPE_ALL_LINKS) for f in fields])
        except Exception:
            return
        got = {f: _field_number(values[k]) for k, f in enumerate(fields)}
        tx, rx = got.get(_FI_NVLINK_TX_KIB), got.get(_FI_NVLINK_RX_KIB)
        gpu["nvlink_tx_bytes_total"] = tx * 1024.0 if tx is not None else None
        gpu["nvlink_rx_bytes_total"] = rx * 1024.0 if rx is not None else None
        errors = [v for f, v in got.items() if f not in (_FI_NVLINK_TX_KIB, _FI_NVLINK_RX_KIB) and v is not None]
        gpu["nvlink_errors_total"] = int(sum(errors)) if errors else None

    def _energy_due(self, i):
        if self.energy_every_s is None or "energy" in self.unsupported:
            return False
        now = time.monotonic()
        if now - self.energy_read_at[i] < self.energy_every_s:
            return False
        self.energy_read_at[i] = now
        return True

    # -- one reading

    def read(self):
        nv = self.nvml
        gpus = []
        for i, h in enumerate(self.handles):
            gpu = {"index": i, "kind": "gpu"}
            gpu.update(self.static[i])
            try:
                util = nv.nvmlDeviceGetUtilizationRates(h)
                gpu["util_pct"] = float(util.gpu)
            except nv.NVMLError_GpuIsLost:
                gpu["healthy"] = False
                gpu["error"] = "GPU is lost"
                gpus.append(gpu)
                continue
            except Exception:
                pass
            gpu.update(self._memory(h))
            power_mw = self._try(nv.nvmlDeviceGetPowerUsage, h)
            gpu["power_w"] = power_mw / 1000.0 if power_mw is not None else None
            gpu["temp_c"] = self._try(nv.nvmlDeviceGetTemperature, h, nv.NVML_TEMPERATURE_GPU)
            gpu["sm_clock_mhz"] = self._try(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_SM)
            reasons_fn = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
                nv, "nvmlDeviceGetCurrentClocksThrottleReasons", None
            )
            if reasons_fn is not None:
                gpu["clock_event_reasons"] = self._opt("reasons", reasons_fn, h)
            ecc = self._opt(
                "ecc",
                nv.nvmlDeviceGetTotalEccErrors,
                h,
                nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
                nv.NVML_VOLATILE_ECC,
            )
            gpu["ecc_uncorrected_total"] = ecc
            if self._energy_due(i):
                energy = self._opt("energy", nv.nvmlDeviceGetTotalEnergyConsumption, h)
                gpu["energy_j_total"] = energy / 1000.0 if energy is not None else None
            self._read_nvlink(i, h, gpu)
            if self.gpm is not None:
                activity = self.gpm.read(i)
                if activity:
                    gpu.update(activity)
                    gpu["activity_source"] = "gpm"
            if "processes" not in self.unsupported:
                procs = read_gpu_processes(nv, h)
                if procs is None:
                    self.unsupported.add("processes")
                else:
                    gpu["processes"] = procs
            gpu["healthy"] = True
            gpus.append(gpu)
        return gpus

    def gpm_refused(self):
        """Why GPM activity is not read, per GPU index (only those refused)."""
        if self.gpm is None:
            return {}
        return {i: r for i, r in enumerate(self.gpm.refused) if r is not None}

    def close(self):
        if self.gpm is not None:
            self.gpm.close()
        try:
            self.nvml.nvmlShutdown()
        except Exception:
            pass


# ---------------------------------------------------------------------------- GPUs (nvidia-smi)

# Fixed argument list: nothing from a layout or a metric ever reaches this command line.
NVIDIA_SMI_QUERY = (
    "index,name,uuid,utilization.gpu,memory.used,memory.total,power.draw,temperature.gpu,clocks.sm"
)
NVIDIA_SMI_ARGS = ("nvidia-smi", "--query-gpu=" + NVIDIA_SMI_QUERY, "--format=csv,noheader,nounits")
_SMI_MISSING = ("", "n/a", "[n/a]", "[not supported]", "not supported", "[unknown error]", "[gpu is lost]")


def _smi_number(text):
    text = text.strip()
    if text.lower() in _SMI_MISSING:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if value == value else None  # NaN is unknown too


def parse_nvidia_smi_csv(text):
    """`nvidia-smi --query-gpu=<NVIDIA_SMI_QUERY> --format=csv,noheader,nounits` → GPU dicts.

    Defensive: "[N/A]" / "[Not Supported]" become None, a name holding a comma is
    rejoined, and a line that does not parse is skipped rather than guessed at.
    """
    gpus = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 9:
            continue
        # index, name…, uuid, then 6 numbers: a comma inside the name leaves extra parts
        tail = parts[-7:]
        name = ", ".join(parts[1:-7]).strip()
        index = _smi_number(parts[0])
        if index is None or index < 0 or index != int(index):
            continue
        mem_used_mib = _smi_number(tail[2])
        mem_total_mib = _smi_number(tail[3])
        uuid = tail[0]
        gpus.append(
            {
                "index": int(index),
                "kind": "gpu",
                "name": None if name.lower() in _SMI_MISSING else name,
                "uuid": None if uuid.lower() in _SMI_MISSING else uuid,
                "util_pct": _smi_number(tail[1]),
                "mem_used_bytes": int(mem_used_mib * 1048576) if mem_used_mib is not None else None,
                "mem_total_bytes": int(mem_total_mib * 1048576) if mem_total_mib is not None else None,
                "power_w": _smi_number(tail[4]),
                "temp_c": _smi_number(tail[5]),
                "sm_clock_mhz": _smi_number(tail[6]),
            }
        )
    return gpus


class NvidiaSmiReader:
    """The fallback when pynvml is missing: one `nvidia-smi` run per reading.

    About a thousand times dearer than NVML (a process start per tick), so only used
    when nothing better exists on the node. Same read()/close() shape as NvmlReader.
    """

    def __init__(self, path, timeout_s=5.0):
        self.path = path
        self.timeout_s = timeout_s
        self.last = []  # the GPUs seen last, to mark them failed when a run breaks
        first = self.run()
        if first is None:
            raise RuntimeError("nvidia-smi gave no readable answer")
        self.last = first

    def run(self):
        import subprocess

        try:
            done = subprocess.run(
                (self.path, *NVIDIA_SMI_ARGS[1:]),
                capture_output=True,
                timeout=self.timeout_s,
                check=False,
            )
        except (OSError, subprocess.SubprocessError):
            return None
        if done.returncode != 0:
            return None
        return parse_nvidia_smi_csv(done.stdout.decode("utf-8", errors="replace"))

    def read(self):
        gpus = self.run()
        if gpus is None:
            # keep the GPUs on screen as failed rather than dropping them silently
            return [
                {"index": g["index"], "kind": "gpu", "name": g.get("name"), "error": "nvidia-smi failed"}
                for g in self.last
            ]
        self.last = gpus
        return gpus

    def close(self):
        pass


def open_gpus():
    """(reader, note): a GPU reader (NVML, else nvidia-smi), or None and a note saying why not."""
    try:
        return NvmlReader(), None
    except ImportError:
        import shutil

        smi = shutil.which("nvidia-smi")
        if smi is None:
            return None, "pynvml not installed: no GPU figures"
        try:
            return NvidiaSmiReader(smi), "pynvml not installed: GPU figures from nvidia-smi (slow)"
        except Exception as exc:
            return None, "pynvml not installed and nvidia-smi failed: no GPU figures (%s)" % (
                exc.__class__.__name__,
            )
    except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded, …
        return None, "no NVIDIA driver: no GPU figures (%s)" % (exc.__class__.__name__,)
