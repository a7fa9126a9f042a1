"""A NIC driver's own statistics (what `ethtool -S` prints), read with the SIOCETHTOOL
ioctl, and the RoCE pause frames among them.

Standard library only: bundled into the probe (`collectors/probe/bundle.py`). No shell,
no `ethtool` binary: three ioctls on an AF_INET datagram socket (linux/ethtool.h):

- ETHTOOL_GSSET_INFO: how many stats the driver serves (string set ETH_SS_STATS);
- ETHTOOL_GSTRINGS: their names, 32 bytes each (kept while the count stays the same);
- ETHTOOL_GSTATS: their values, u64 each, in the same order.

The kernel writes as many entries as the driver counts *at that call*, not as many as
asked, so a count that grows between two calls (mlx5's per-priority stats follow the PFC
setting) would write past a buffer sized to the earlier count: every buffer has room for
`_SLACK` more entries and an answer longer than the buffer is thrown away.

Pause frames: mlx5 (`drivers/net/ethernet/mellanox/mlx5/core/en_stats.c`,
`pport_per_prio_pfc_stats_desc`, torvalds/linux at 01dd74246c75) names them
`rx_%s_pause` / `tx_%s_pause` with %s = `prio<N>` for each PFC-enabled priority, or
`global` when link-level pause is on; the 802.3 group (`pport_802_3_stats_desc`) has
`rx_pause_ctrl_phy` / `tx_pause_ctrl_phy`, which some firmware serves alone. The per
priority and global counters are summed when any is served, else the 802.3 ones are read
(both at once would count one frame twice where the 802.3 counter includes PFC frames).
`*_pause_duration` and `*_pause_transition` are not frames and are not counted.
"""

from __future__ import annotations

import array
import fcntl
import re
import socket
import struct

SIOCETHTOOL = 0x8946
ETHTOOL_GSTRINGS = 0x1B
ETHTOOL_GSTATS = 0x1D
ETHTOOL_GSSET_INFO = 0x37
ETH_SS_STATS = 1
ETH_GSTRING_LEN = 32
_IFNAMSIZ = 16
_IFREQ_SIZE = 40  # struct ifreq on 64-bit Linux: the name, then a 24-byte union
_SLACK = 64  # entries of room past the count asked for (see the module docstring)
_MAX_STATS = 1 << 16  # a driver claiming more is not believed

_PFC_PAUSE = re.compile(r"^(rx|tx)_(?:prio[0-7]|global)_pause$")
_PHY_PAUSE = {"rx_pause_ctrl_phy": "rx", "tx_pause_ctrl_phy": "tx"}


class EthtoolStats:
    """Reads `ethtool -S` statistics of named interfaces; one socket, names cached per
    interface while the driver's count stays the same. Close it when done."""

    def __init__(self):
        self._sock = None
        self._names = {}  # interface -> (count, names)

    def _socket(self):
        if self._sock is None:
            self._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        return self._sock

    def close(self):
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def _ioctl(self, ifname, buf):
        name = ifname.encode("utf-8", "replace")
        if not name or len(name) >= _IFNAMSIZ:
            raise OSError("interface name too long for ifreq")
        address = buf.buffer_info()[0]
        ifreq = struct.pack("16sP", name, address).ljust(_IFREQ_SIZE, b"\0")
        fcntl.ioctl(self._socket().fileno(), SIOCETHTOOL, ifreq)

    def _count(self, ifname):
        # struct ethtool_sset_info {u32 cmd; u32 reserved; u64 sset_mask; u32 data[];}
        buf = array.array("B", struct.pack("=IIQI", ETHTOOL_GSSET_INFO, 0, 1 << ETH_SS_STATS, 0))
        self._ioctl(ifname, buf)
        mask, count = struct.unpack_from("=QI", buf, 8)
        if not mask & (1 << ETH_SS_STATS) or count > _MAX_STATS:
            return None
        return count

    def _strings(self, ifname, count):
        # struct ethtool_gstrings {u32 cmd; u32 string_set; u32 len; u8 data[];}
        room = count + _SLACK
        buf = array.array("B", struct.pack("=III", ETHTOOL_GSTRINGS, ETH_SS_STATS, count))
        buf.extend(bytes(room * ETH_GSTRING_LEN))
        self._ioctl(ifname, buf)
        (got,) = struct.unpack_from("=I", buf, 8)
        if got != count:
            return None  # the driver's count moved between the calls
        raw = buf.tobytes()[12:12 + got * ETH_GSTRING_LEN]
        return [raw[i:i + ETH_GSTRING_LEN].split(b"\0", 1)[0].decode("ascii", "replace")
                for i in range(0, len(raw), ETH_GSTRING_LEN)]

    def _values(self, ifname, count):
        # struct ethtool_stats {u32 cmd; u32 n_stats; u64 data[];}
        room = count + _SLACK
        buf = array.array("B", struct.pack("=II", ETHTOOL_GSTATS, count))
        buf.extend(bytes(room * 8))
        self._ioctl(ifname, buf)
        (got,) = struct.unpack_from("=I", buf, 4)
        if got != count:
            return None
        return list(struct.unpack_from(f"={got}Q", buf, 8))

    def read(self, ifname):
        """{stat name: value} as `ethtool -S <ifname>` prints it; None where the interface
        or its driver serves none (or the ioctl is refused)."""
        try:
            count = self._count(ifname)
            if not count:
                return None
            cached = self._names.get(ifname)
            if cached is None or cached[0] != count:
                names = self._strings(ifname, count)
                if names is None:
                    return None
                cached = (count, names)
                self._names[ifname] = cached
            values = self._values(ifname, count)
        except OSError:
            return None
        if values is None:
            self._names.pop(ifname, None)
            return None
        return dict(zip(cached[1], values))  # noqa: B905 (the node's python3 may predate strict=)


_PRIO_PAUSE = re.compile(r"^(rx|tx)_prio([0-7])_pause$")


def pause_by_priority(stats):
    """{"rx3": frames, "tx3": frames, …}: the PFC pause frames of each priority the driver
    serves (mlx5 serves the priorities with PFC on); None when it serves none."""
    out = {}
    for name, value in (stats or {}).items():
        match = _PRIO_PAUSE.match(name)
        if match:
            out[match.group(1) + match.group(2)] = value
    return out or None


def pause_frames(stats):
    """(rx, tx) pause frames from a driver's statistics; each None when not served."""
    if not stats:
        return None, None
    totals = {"rx": None, "tx": None}
    for name, value in stats.items():
        match = _PFC_PAUSE.match(name)
        if match:
            side = match.group(1)
            totals[side] = (totals[side] or 0) + value
    for name, side in _PHY_PAUSE.items():
        if totals[side] is None and name in stats:
            totals[side] = stats[name]
    return totals["rx"], totals["tx"]
