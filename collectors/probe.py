#!/usr/bin/env python3
"""infertop probe: reads one node, read-only, and prints one JSON object per reading.

Self-contained on purpose: standard library only (plus `pynvml` when the node has it),
so that infertop can send this file's text with the SSH command and nothing has to be
installed on the node. The same reading functions serve the local source (imported as a
module), so local and remote nodes are read by one code path.

Every figure that cannot be read is left out or null; the probe never writes anything.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time

PROBE_VERSION = 1
SYS_NET = "/sys/class/net"
SYS_IB = "/sys/class/infiniband"
PROC_BONDING = "/proc/net/bonding"


def _read(path, default=None):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read().strip()
    except (OSError, ValueError):
        return default


def _read_int(path):
    text = _read(path)
    if text is None:
        return None
    try:
        return int(text.split()[0])
    except (ValueError, IndexError):
        return None


def _listdir(path):
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


# ---------------------------------------------------------------------------- NICs


def _net_kind(name, root):
    if name == "lo":
        return "loopback"
    if os.path.isdir(os.path.join(root, name, "bonding")):
        return "bond"
    arp_type = _read_int(os.path.join(root, name, "type"))
    if arp_type == 32:  # ARPHRD_INFINIBAND: IPoIB
        return "infiniband"
    if arp_type == 1:
        return "ethernet"
    return "other"


def read_net(root=SYS_NET):
    """Every interface in /sys/class/net: state, speed, byte counters, bond members."""
    nics = []
    for name in _listdir(root):
        base = os.path.join(root, name)
        speed = _read_int(os.path.join(base, "speed"))
        nic = {
            "name": name,
            "kind": _net_kind(name, root),
            "state": _read(os.path.join(base, "operstate")),
            # speed is Mbit/s; -1 or unreadable when the link is down or virtual
            "speed_gbps": speed / 1000.0 if speed is not None and speed > 0 else None,
            "rx_bytes_total": _read_int(os.path.join(base, "statistics", "rx_bytes")),
            "tx_bytes_total": _read_int(os.path.join(base, "statistics", "tx_bytes")),
        }
        errors = [
            _read_int(os.path.join(base, "statistics", c)) for c in ("rx_errors", "tx_errors")
        ]
        if all(e is not None for e in errors):
            nic["errors_total"] = sum(errors)
        if nic["kind"] == "bond":
            members = (_read(os.path.join(base, "bonding", "slaves")) or "").split()
            nic["members"] = members
            up = 0
            for member in members:
                if _read(os.path.join(root, member, "operstate")) == "up":
                    up += 1
            nic["members_up"] = up
        nics.append(nic)
    return nics


def parse_bonding(text):
    """/proc/net/bonding/<bond>: members and how many have MII status up."""
    members = []
    up = 0
    current = None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key, value = key.strip(), value.strip()
        if key == "Slave Interface":
            current = value
            members.append(value)
        elif key == "MII Status" and current is not None:
            up += value == "up"
    return {"members": members, "members_up": up}


_RATE = re.compile(r"([\d.]+)\s*Gb/sec")


def read_ib(root=SYS_IB):
    """InfiniBand / RoCE ports: state, rate, data counters (octets ÷ 4 → ×4), waits."""
    ports = []
    for dev in _listdir(root):
        ports_dir = os.path.join(root, dev, "ports")
        for port in _listdir(ports_dir):
            base = os.path.join(ports_dir, port)
            counters = os.path.join(base, "counters")
            state = _read(os.path.join(base, "state")) or ""  # "4: ACTIVE"
            rate = _RATE.search(_read(os.path.join(base, "rate")) or "")
            link_layer = (_read(os.path.join(base, "link_layer")) or "").lower()
            xmit = _read_int(os.path.join(counters, "port_xmit_data"))
            rcv = _read_int(os.path.join(counters, "port_rcv_data"))
            netdevs = _listdir(os.path.join(root, dev, "device", "net"))
            name = dev if len(_listdir(ports_dir)) == 1 else f"{dev}/{port}"
            ports.append(
                {
                    "name": name,
                    "kind": "roce" if link_layer == "ethernet" else "infiniband",
                    "state": state.split(":", 1)[-1].strip().lower() or None,
                    "phys_state": (_read(os.path.join(base, "phys_state")) or "").split(":", 1)[-1].strip() or None,
                    "speed_gbps": float(rate.group(1)) if rate else None,
                    # port_{xmit,rcv}_data count octets divided by 4
                    "tx_bytes_total": xmit * 4 if xmit is not None else None,
                    "rx_bytes_total": rcv * 4 if rcv is not None else None,
                    "xmit_wait_total": _read_int(os.path.join(counters, "port_xmit_wait")),
                    "link_downed_total": _read_int(os.path.join(counters, "link_downed")),
                    "errors_total": _read_int(os.path.join(counters, "symbol_error")),
                    "netdev": netdevs[0] if netdevs else None,
                }
            )
    return ports


def read_nics():
    nics = read_net()
    by_name = {n["name"]: n for n in nics}
    for bond in _listdir(PROC_BONDING):
        text = _read(os.path.join(PROC_BONDING, bond))
        if text and bond in by_name:
            by_name[bond].update(parse_bonding(text))
    return nics + read_ib()


# ---------------------------------------------------------------------------- host


def read_host(prev_cpu=None):
    """CPU % since the previous call (from /proc/stat) and memory (from /proc/meminfo)."""
    host = {}
    stat = _read("/proc/stat") or ""
    cpu = None
    for line in stat.splitlines():
        if line.startswith("cpu "):
            fields = [int(x) for x in line.split()[1:]]
            idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
            cpu = (sum(fields), idle)
            break
    if cpu and prev_cpu:
        total = cpu[0] - prev_cpu[0]
        host["cpu_pct"] = 100.0 * (1 - (cpu[1] - prev_cpu[1]) / total) if total > 0 else None
    mem = {}
    for line in (_read("/proc/meminfo") or "").splitlines():
        key, _, value = line.partition(":")
        parts = value.split()
        if parts and parts[0].isdigit():
            mem[key] = int(parts[0]) * 1024
    if "MemTotal" in mem and "MemAvailable" in mem:
        host["mem_total_bytes"] = mem["MemTotal"]
        host["mem_used_bytes"] = mem["MemTotal"] - mem["MemAvailable"]
    return host, cpu


# ---------------------------------------------------------------------------- GPUs (NVML)


class NvmlReader:
    """Reads GPUs through pynvml. Handles are looked up once; only cheap calls per tick.

    Never calls nvmlDeviceGetPcieThroughput (it blocks ~20 ms sampling).
    """

    def __init__(self):
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
            mem = self._try(nv.nvmlDeviceGetMemoryInfo, h)
            if mem is not None:
                gpu["mem_used_bytes"] = int(mem.used)
                gpu["mem_total_bytes"] = int(mem.total)
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
            energy = self._opt("energy", nv.nvmlDeviceGetTotalEnergyConsumption, h)
            gpu["energy_j_total"] = energy / 1000.0 if energy is not None else None
            gpu["healthy"] = True
            gpus.append(gpu)
        return gpus

    def close(self):
        try:
            self.nvml.nvmlShutdown()
        except Exception:
            pass


def open_gpus():
    """(reader, note): an NVML reader, or None and a note saying why there are no GPUs."""
    try:
        return NvmlReader(), None
    except ImportError:
        return None, "pynvml not installed: no GPU figures"
    except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded, …
        return None, "no NVIDIA driver: no GPU figures (%s)" % (exc.__class__.__name__,)


# ---------------------------------------------------------------------------- main loop


def reading(gpu_reader, gpu_note, prev_cpu):
    host, cpu = read_host(prev_cpu)
    out = {
        "v": PROBE_VERSION,
        "t": time.time(),
        "gpus": gpu_reader.read() if gpu_reader is not None else [],
        "nics": read_nics(),
        "host": host,
        "notes": [gpu_note] if gpu_note else [],
    }
    return out, cpu


def main(argv):
    interval = float(argv[1]) if len(argv) > 1 else 1.0
    count = int(argv[2]) if len(argv) > 2 else 0  # 0 = until the session closes
    gpu_reader, gpu_note = open_gpus()
    prev_cpu = None
    n = 0
    next_at = time.monotonic()
    try:
        while True:
            out, prev_cpu = reading(gpu_reader, gpu_note, prev_cpu)
            sys.stdout.write(json.dumps(out, separators=(",", ":")) + "\n")
            sys.stdout.flush()
            n += 1
            if count and n >= count:
                return 0
            next_at += interval
            time.sleep(max(next_at - time.monotonic(), 0.0))
    except (BrokenPipeError, KeyboardInterrupt):
        return 0
    finally:
        if gpu_reader is not None:
            gpu_reader.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
