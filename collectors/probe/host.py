"""The node's host and NIC figures, read from /proc and /sys (the probe's sysfs readers).

Standard library only: bundled into the probe that runs on the node
(`collectors/probe/bundle.py`); the local source imports it directly. Read-only; a figure
that cannot be read is left out or null.
"""

from __future__ import annotations

import os
import re

# Stdlib-only helper; the SSH bundle pastes its text above this file instead.
# bundle: strip-begin
from infertop.collectors.probe.ethtool_stats import pause_by_priority, pause_frames
from infertop.collectors.virtual_nics import keeps_nic

# bundle: strip-end

SYS_NET = "/sys/class/net"
SYS_IB = "/sys/class/infiniband"
PROC_BONDING = "/proc/net/bonding"


def _read(path, default=None):
    # raw os.open/os.read: a sysfs read is the probe's hot path (about 30 per tick), and
    # the buffered text layer of open() costs more than the read itself
    try:
        fd = os.open(path, os.O_RDONLY)
    except (OSError, ValueError):
        return default
    chunks = []
    try:
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            chunks.append(chunk)
    except OSError:
        return default
    finally:
        os.close(fd)
    return b"".join(chunks).decode("utf-8", "replace").strip()


def port_state(operstate, carrier):
    """A port's state from all the kernel says of it: `operstate`, and `carrier` (1 link,
    0 none, None unreadable: a down interface answers EINVAL).

    The one rule for every reader (this probe's sysfs, a node_exporter page, PromQL).
    `unknown` is what a driver that reports no state says — loopback, tun and many virtual
    NICs, carrying traffic all the while (Documentation/networking/operstates.rst) — so it
    is not `down`: with a carrier it is `unknown_up` (up), with none `down`, and with no
    carrier reading either, not reported (None), never a fault.
    """
    if operstate is None:
        return None
    state = operstate.strip().lower()
    if state != "unknown":
        return state or None
    if carrier is None:
        return None
    return "unknown_up" if carrier >= 1 else "down"


def _state(base):
    operstate = _read(os.path.join(base, "operstate"))
    # carrier only where operstate leaves it open: one read more for loopback, not for all
    unknown = operstate is not None and operstate.strip().lower() == "unknown"
    return port_state(operstate, _read_int(os.path.join(base, "carrier")) if unknown else None)


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


def read_net(root=SYS_NET, keep=(), ethtool=None):
    """Every interface in /sys/class/net but container / virtual plumbing (unless named in
    `keep`, the layout's expected ports): state, speed, byte counters, bond members; with
    an `ethtool` reader (collectors.probe.ethtool_stats.EthtoolStats), an Ethernet port's
    pause frames where its driver counts them (absent, i.e. unknown, where it does not)."""
    nics = []
    for name in _listdir(root):
        if not keeps_nic(name, keep):
            continue  # before any read: a pod veth costs the probe nothing
        base = os.path.join(root, name)
        speed = _read_int(os.path.join(base, "speed"))
        nic = {
            "name": name,
            "kind": _net_kind(name, root),
            "state": _state(base),
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
        if ethtool is not None and nic["kind"] == "ethernet":
            stats = ethtool.read(name)
            rx_pause, tx_pause = pause_frames(stats)
            if stats and stats.get("rx_ecn_mark") is not None:
                nic["ecn_marked_total"] = stats["rx_ecn_mark"]  # mlx5e_sw_stats
            if rx_pause is not None:
                nic["rx_pause_total"] = rx_pause
            if tx_pause is not None:
                nic["tx_pause_total"] = tx_pause
            by_priority = pause_by_priority(stats)
            if by_priority is not None:
                nic["pause_by_priority_total"] = by_priority
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
    status: dict = {}  # member -> its MII status; the bond's own status comes before any member
    current = None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key, value = key.strip(), value.strip()
        if key == "Slave Interface":
            current = value
            if value not in status:
                members.append(value)
            status[value] = None
        elif key == "MII Status" and current is not None and status[current] is None:
            status[current] = value
    return {"members": members, "members_up": sum(1 for m in members if status[m] == "up")}


_RATE = re.compile(r"([\d.]+)\s*Gb/sec")


# …/ports/<n>/phys_state ids, named as collectors.pages.node_exporter names node_exporter's
_PHYS_STATES = {0: "no_change", 1: "sleep", 2: "polling", 3: "disabled", 4: "shift", 5: "link_up",
                6: "link_error_recover", 7: "phytest"}


def _phys_state_name(text):
    """ "5: LinkUp" → "link_up" (None when unreadable)."""
    head = (text or "").split(":", 1)[0].strip()
    return _PHYS_STATES.get(int(head), "unknown") if head.isascii() and head.isdigit() else None


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
                    # the counters node_exporter's infiniband collector reads from here too
                    "rx_errors_total": _read_int(os.path.join(counters, "port_rcv_errors")),
                    "link_recoveries_total": _read_int(os.path.join(counters, "link_error_recovery")),
                    "link_integrity_errors_total": _read_int(
                        os.path.join(counters, "local_link_integrity_errors")),
                    "physical_state": _phys_state_name(_read(os.path.join(base, "phys_state"))),
                    # RoCE congestion notifications (mlx5 hw_counters; absent on IB and
                    # other drivers: unknown)
                    "cnp_sent_total": _read_int(os.path.join(base, "hw_counters", "np_cnp_sent")),
                    "cnp_handled_total": _read_int(os.path.join(base, "hw_counters", "rp_cnp_handled")),
                    "ecn_marked_total": _read_int(
                        os.path.join(base, "hw_counters", "np_ecn_marked_roce_packets")),
                    "netdev": netdevs[0] if netdevs else None,
                }
            )
    return ports


def read_nics(net_root=SYS_NET, ib_root=SYS_IB, bonding_root=PROC_BONDING, keep=(), ethtool=None):
    """Every NIC, bond and IB/RoCE port, less virtual plumbing not in `keep`
    (collectors.virtual_nics). The roots are arguments so tests can use fixture trees;
    `ethtool`: the reader of drivers' pause counters (None: not read)."""
    nics = read_net(net_root, keep, ethtool)
    by_name = {n["name"]: n for n in nics}
    for bond in _listdir(bonding_root):
        text = _read(os.path.join(bonding_root, bond))
        if text and bond in by_name:
            by_name[bond].update(parse_bonding(text))
    return nics + read_ib(ib_root)


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
        if parts and parts[0].isascii() and parts[0].isdigit():
            mem[key] = int(parts[0]) * 1024
    if "MemTotal" in mem and "MemAvailable" in mem:
        host["mem_total_bytes"] = mem["MemTotal"]
        host["mem_used_bytes"] = mem["MemTotal"] - mem["MemAvailable"]
    return host, cpu
