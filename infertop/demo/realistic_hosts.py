"""Real-size exporter pages for the demo: dcgm-exporter and node_exporter of a DGX-class host.

See `infertop/demo/realistic.py` (the engine page, and why). dcgm-exporter serves its
default counter set (`etc/default-counters.csv` of dcgm-exporter 4.x) for 8 GPUs, plus
the fields a trial deployment adds (throttle reasons, NVLink CRC errors, tensor-pipe
activity): ~240 lines. node_exporter serves a host with many interfaces (bond, storage
NICs, a container bridge and a veth per pod), 224 logical CPUs, disks, filesystems and
4 InfiniBand ports: ~3,300 lines. The demo's own links and GPUs carry the scenario's
figures exactly as the small pages do; everything else is steady, made-up and redrawn
every `REFRESH_S`. Nothing here draws from the node's random stream.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from functools import partial

from infertop.demo.node_collectors import only_collectors
from infertop.demo.pd_trouble import ethtool_families, xmit_wait_total
from infertop.demo.realistic import Page, cached
from infertop.demo.render import dcgm_gpu_values, dcgm_labels
from infertop.demo.scenario import (
    BOND_MEMBER_GBPS,
    ETH_GBPS,
    GPUS_PER_NODE,
    IB_GBPS,
    IB_PORTS,
    SimNode,
)

# ---------------------------------------------------------------------------- dcgm-exporter

# etc/default-counters.csv of dcgm-exporter 4.x, then what a trial deployment adds
DCGM_DEFAULT: tuple[tuple[str, str, str], ...] = (
    ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz)."),
    ("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz)."),
    ("DCGM_FI_DEV_MEMORY_TEMP", "gauge", "Memory temperature (in C)."),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C)."),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W)."),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", "Total energy consumption since boot (in mJ)."),
    (
        "DCGM_FI_DEV_PCIE_TX_THROUGHPUT",
        "counter",
        "Total number of bytes transmitted through PCIe TX (in KB) via NVML.",
    ),
    (
        "DCGM_FI_DEV_PCIE_RX_THROUGHPUT",
        "counter",
        "Total number of bytes received through PCIe RX (in KB) via NVML.",
    ),
    ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "Total number of PCIe retries."),
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %)."),
    ("DCGM_FI_DEV_ENC_UTIL", "gauge", "Encoder utilization (in %)."),
    ("DCGM_FI_DEV_DEC_UTIL", "gauge", "Decoder utilization (in %)."),
    ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered."),
    ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB)."),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB)."),
    (
        "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
        "counter",
        "Total number of NVLink bandwidth counters for all lanes",
    ),
    ("DCGM_FI_DEV_VGPU_LICENSE_STATUS", "gauge", "vGPU License status"),
    (
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
        "counter",
        "Number of remapped rows for uncorrectable errors",
    ),
    ("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "counter", "Number of remapped rows for correctable errors"),
    ("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "Whether remapping of rows has failed"),
    # added by the trial's counters file (docs/dcgm-counters.csv: without them the nodes
    # are blind on throttling, ECC and NVLink errors)
    ("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "gauge", "Current clock throttle reasons."),
    ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter", "Total number of double-bit volatile ECC errors."),
    (
        "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
        "counter",
        "Total number of NVLink flow-control CRC errors.",
    ),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge", "Ratio of cycles the tensor (HMMA) pipe is active."),
    ("DCGM_FI_PROF_SM_ACTIVE", "gauge", "The ratio of cycles an SM has at least 1 warp assigned."),
)


def dcgm_page(node: SimNode, now: float) -> str:
    """dcgm-exporter's default counters (and the trial's additions) for the node's 8 GPUs."""
    g = node.advance(now)
    up = max(now - node.started_at, 0.0)
    rows: dict[str, list[str]] = {name: [] for name, _, _ in DCGM_DEFAULT}
    for gpu in range(GPUS_PER_NODE):
        values: dict[str, object] = dict(dcgm_gpu_values(node, g, gpu))  # the scenario's figures
        util = float(values["DCGM_FI_DEV_GPU_UTIL"])  # type: ignore[arg-type]
        values |= {
            "DCGM_FI_DEV_MEM_CLOCK": 3996,
            "DCGM_FI_DEV_MEMORY_TEMP": round(30 + 0.3 * util),
            "DCGM_FI_DEV_PCIE_TX_THROUGHPUT": round(2.1e9 + 18_000 * up + gpu * 1e6),
            "DCGM_FI_DEV_PCIE_RX_THROUGHPUT": round(3.4e9 + 26_000 * up + gpu * 1e6),
            "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": 0,
            "DCGM_FI_DEV_MEM_COPY_UTIL": round(util * 0.6),
            "DCGM_FI_DEV_ENC_UTIL": 0,
            "DCGM_FI_DEV_DEC_UTIL": 0,
            "DCGM_FI_DEV_VGPU_LICENSE_STATUS": 0,
            "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": 0,
            "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS": 0,
            "DCGM_FI_DEV_ROW_REMAP_FAILURE": 0,
        }
        labels = dcgm_labels(node, gpu)
        for name, rows_of in rows.items():
            rows_of.append(f"{name}{{{labels}}} {values[name]}")
    page = Page()
    for name, kind, help_ in DCGM_DEFAULT:
        page.family(name, help_, kind)
        page.out.extend(rows[name])
    return page.text()


# ---------------------------------------------------------------------------- node_exporter

CPUS = 224  # 2 × 56 cores, hyper-threaded (a DGX-class host)
CPU_MODES = ("idle", "iowait", "irq", "nice", "softirq", "steal", "system", "user")
PODS = 24  # one veth per pod on the host
DISKS = ("nvme0n1", "nvme1n1", "nvme2n1", "nvme3n1", "nvme4n1", "nvme5n1", "nvme6n1", "nvme7n1", "sda", "sdb")
MOUNTS = (
    ("/", "/dev/md0", "ext4"),
    ("/boot", "/dev/sda1", "ext4"),
    ("/raid", "/dev/md1", "ext4"),
    ("/run", "tmpfs", "tmpfs"),
    ("/dev/shm", "tmpfs", "tmpfs"),
    ("/var/lib/kubelet", "/dev/md0", "ext4"),
)
_NETDEV_STATS = ("bytes", "compressed", "drop", "errs", "fifo", "frame", "multicast", "packets")
_NETDEV_TX_STATS = ("bytes", "carrier", "colls", "compressed", "drop", "errs", "fifo", "packets")
_IB_COUNTERS = (
    "excessive_buffer_overrun_errors",
    "link_error_recovery",
    "local_link_integrity_errors",
    "multicast_packets_received",
    "multicast_packets_transmitted",
    "port_constraint_errors_received",
    "port_constraint_errors_transmitted",
    "port_discards_received",
    "port_discards_transmitted",
    "port_errors_received",
    "port_packets_received",
    "port_packets_transmitted",
    "unicast_packets_received",
    "unicast_packets_transmitted",
    "vl15_dropped",
)


# the collectors of the families in the host block (`host` in node_exporter_page)
_HOST_COLLECTORS = frozenset({"cpu", "meminfo", "diskstats", "filesystem"})
# the collectors whose families this page serves, and a typical run time of each
_COLLECTOR_SECONDS: tuple[tuple[str, float], ...] = (
    ("bonding", 0.000182), ("cpu", 0.00512), ("diskstats", 0.000631), ("filesystem", 0.000894),
    ("infiniband", 0.00241), ("loadavg", 4.1e-05), ("meminfo", 0.000233), ("netclass", 0.0187),
    ("netdev", 0.00127), ("stat", 0.000412), ("time", 3.3e-05),
)


def _interfaces(node: SimNode) -> dict[str, tuple[str, str, int, float | None]]:
    """name → (MAC, operstate, ARPHRD type, Gb/s): the demo's own ports first, then the
    storage NICs, the container bridge and a veth per pod (none of them expected)."""
    i = node.plan.index
    mac = f"b8:3f:d2:{i >> 8 & 0xFF:02x}:{i & 0xFF:02x}"
    bond = f"{mac}:10"
    devices: dict[str, tuple[str, str, int, float | None]] = {
        "lo": ("00:00:00:00:00:00", "unknown", 772, None),
        "eth0": (f"{mac}:01", "up", 1, ETH_GBPS),
        "eth1": (bond, "up", 1, BOND_MEMBER_GBPS),
        "eth2": (bond, "up", 1, BOND_MEMBER_GBPS),
        "bond0": (bond, "up", 1, 2 * BOND_MEMBER_GBPS),
        "eno1": (f"{mac}:21", "up", 1, 200.0),
        "eno2": (f"{mac}:22", "up", 1, 200.0),
        "docker0": (f"02:42:ac:{i & 0xFF:02x}:00:01", "up", 1, None),
    }
    for pod in range(PODS):
        devices[f"veth{pod:02d}{i:04x}"] = (f"ee:ee:{i & 0xFF:02x}:00:{pod:02x}:01", "up", 1, 10.0)
    return devices


def family_text(name: str, help_: str, kind: str, rows: Sequence[tuple[str, object]]) -> str:
    """One family's HELP, TYPE and sample lines, joined."""
    return "\n".join([f"# HELP {name} {help_}", f"# TYPE {name} {kind}",
                      *(f"{name}{{{labels}}} {value}" for labels, value in rows)])


def _netclass_families(devices: dict[str, tuple[str, str, int, float | None]]) -> str:
    """The interfaces' properties: the same every request."""
    properties = (
        ("mtu_bytes", 9000),
        ("carrier", 1),
        ("carrier_changes_total", 2),
        ("dormant", 0),
        ("flags", 4099),
        ("iface_id", 2),
        ("iface_link", 2),
        ("iface_link_mode", 0),
        ("net_dev_group", 0),
        ("transmit_queue_length", 1000),
        ("address_assign_type", 0),
        ("name_assign_type", 4),
        ("device_id", 0),
    )
    return "\n".join([
        family_text(
            "node_network_info",
            "Non-numeric data from /sys/class/net/<iface>, value is always 1.",
            "gauge",
            [
                (
                    f'address="{mac}",adminstate="up",broadcast="ff:ff:ff:ff:ff:ff",device="{dev}",duplex="full",'
                    f'ifalias="",operstate="{state}"',
                    1,
                )
                for dev, (mac, state, _, _) in devices.items()
            ],
        ),
        family_text(
            "node_network_protocol_type",
            "Network device property: protocol_type.",
            "gauge",
            [(f'device="{dev}"', arp) for dev, (_, _, arp, _) in devices.items()],
        ),
        *(
            family_text(
                f"node_network_{prop}",
                f"Network device property: {prop}.",
                "counter" if prop.endswith("_total") else "gauge",
                [(f'device="{dev}"', value) for dev in devices],
            )
            for prop, value in properties
        ),
    ])


def _steady_families(devices: dict[str, tuple[str, str, int, float | None]]) -> str:
    """Link speeds and states, and node_exporter's account of each collector it ran (kept
    by a `collect[]` filter for the collectors it names: infertop/demo/node_collectors.py):
    the same every request."""
    return "\n".join([
        family_text(
            "node_network_speed_bytes",
            "Network device property: speed_bytes.",
            "gauge",
            [(f'device="{dev}"', f"{gbps * 1e9 / 8:.0f}") for dev, (_, _, _, gbps) in devices.items()
             if gbps is not None],
        ),
        family_text(
            "node_network_up",
            "Value is 1 if operstate is 'up', 0 otherwise.",
            "gauge",
            [(f'device="{dev}"', 1 if state == "up" else 0) for dev, (_, state, _, _) in devices.items()],
        ),
        family_text(  # as node_exporter: none for a down device (its carrier answers EINVAL)
            "node_network_carrier",
            "Network device property: carrier.",
            "gauge",
            [(f'device="{dev}"', 1) for dev, (_, state, _, _) in devices.items() if state != "down"],
        ),
        family_text(
            "node_scrape_collector_duration_seconds",
            "node_exporter: Duration of a collector scrape.",
            "gauge",
            [(f'collector="{c}"', f"{seconds:g}") for c, seconds in _COLLECTOR_SECONDS],
        ),
        family_text(
            "node_scrape_collector_success",
            "node_exporter: Whether a collector succeeded.",
            "gauge",
            [(f'collector="{c}"', 1) for c, _ in _COLLECTOR_SECONDS],
        ),
    ])


def node_exporter_page(node: SimNode, now: float) -> str:
    """node_exporter on a DGX-class host: the demo's links plus everything else it serves."""
    return _node_exporter_page(node, now, None)


def collected_node_exporter_page(node: SimNode, now: float, collect: Collection[str]) -> str:
    """The page node_exporter serves for `?collect[]=…`: `only_collectors` of the whole
    page, worked out part by part so the host block (most of the page, and none of the
    collectors infertop asks for) is filtered once per redraw, not on every request."""
    return _node_exporter_page(node, now, tuple(collect))


def _node_exporter_page(node: SimNode, now: float, collect: tuple[str, ...] | None) -> str:
    g = node.advance(now)
    nb = node.nic_bytes
    up = max(now - node.started_at, 0.0) + 86_400.0 * 3  # booted three days before the demo
    devices = _interfaces(node)
    page = Page()
    out = page.out

    def series(name: str, help_: str, kind: str, rows: Sequence[tuple[str, object]]) -> None:
        out.append(family_text(name, help_, kind, rows))

    page.family("node_boot_time_seconds", "Node boot time, in unixtime.", "gauge")
    out.append(f"node_boot_time_seconds {now - up:.0f}")
    for name, help_, value in (
        ("node_load1", "1m load average.", 40 + 60 * g.load),
        ("node_load5", "5m load average.", 40 + 55 * g.load),
        ("node_load15", "15m load average.", 42 + 50 * g.load),
    ):
        page.family(name, help_, "gauge")
        out.append(f"{name} {value:.2f}")
    busy = 0.25 + 0.5 * g.load

    def host() -> str:
        """CPUs, memory, disks, filesystems: read by no profile, redrawn every REFRESH_S."""
        block = Page()

        def series(name: str, help_: str, kind: str, rows: Sequence[tuple[str, object]]) -> None:
            block.out.append(family_text(name, help_, kind, rows))

        series(
            "node_cpu_seconds_total",
            "Seconds the CPUs spent in each mode.",
            "counter",
            [
                (f'cpu="{c}",mode="{mode}"', f"{up * share:.2f}")
                for c in range(CPUS)
                for mode, share in zip(
                    CPU_MODES, (1 - busy, 0.002, 0.0, 0.0005, 0.01, 0.0, busy * 0.3, busy * 0.7), strict=True
                )
            ],
        )
        for name, value in (
            ("MemTotal_bytes", 2.0e12),
            ("MemFree_bytes", 6.1e11),
            ("MemAvailable_bytes", 1.2e12),
            ("Buffers_bytes", 2.1e9),
            ("Cached_bytes", 5.5e11),
            ("SwapTotal_bytes", 0.0),
            ("SwapFree_bytes", 0.0),
            ("Shmem_bytes", 3.2e10),
            ("HugePages_Total", 0.0),
            ("Dirty_bytes", 1.1e6),
            ("Mapped_bytes", 4.2e9),
            ("Slab_bytes", 1.6e10),
        ):
            series(f"node_memory_{name}", f"Memory information field {name}.", "gauge",
                   [("", f"{value:.6e}")])
        for stat in (
            "reads_completed_total",
            "writes_completed_total",
            "read_bytes_total",
            "written_bytes_total",
            "io_time_seconds_total",
            "read_time_seconds_total",
            "write_time_seconds_total",
            "io_now",
            "discards_completed_total",
        ):
            series(
                f"node_disk_{stat}",
                f"The total number of {stat.replace('_', ' ')}.",
                "counter",
                [(f'device="{d}"', f"{up * (k + 1) * 13.0:.1f}") for k, d in enumerate(DISKS)],
            )
        for stat, value in (
            ("avail_bytes", 2.9e12),
            ("files", 1.2e8),
            ("files_free", 1.1e8),
            ("free_bytes", 3.0e12),
            ("readonly", 0),
            ("size_bytes", 7.6e12),
        ):
            series(
                f"node_filesystem_{stat}",
                f"Filesystem {stat.replace('_', ' ')}.",
                "gauge",
                [(f'device="{dev}",fstype="{fs}",mountpoint="{mount}"', value) for mount, dev, fs in MOUNTS],
            )
        return "\n".join(block.out)

    if collect is None:
        out.append(cached(node, "host", now, host))
        parts: list[str] = []
    else:
        # only_collectors works family by family, so filtering the parts (each a run of
        # whole families) and joining what is left is filtering the page
        # (none of the host block's collectors asked for, as infertop asks: nothing to draw)
        host_of_collect = "" if not _HOST_COLLECTORS.intersection(collect) else cached(
            node, "host?" + "&".join(collect), now, lambda: only_collectors(host() + "\n", collect))
        parts = [only_collectors(page.text(), collect), host_of_collect]
        out.clear()
    # the demo's own figures, as render.py serves them
    series(
        "node_bonding_active",
        "Number of active slaves per bonding interface.",
        "gauge",
        [('master="bond0"', 2)],
    )
    series(
        "node_bonding_slaves",
        "Number of configured slaves per bonding interface.",
        "gauge",
        [('master="bond0"', 2)],
    )
    ib_rows: list[tuple[str, str, str, Callable[[str], object]]] = [
        (
            "node_infiniband_state_id",
            "State of the InfiniBand port (0: no change, 1: down, 2: init, 3: armed, "
            "4: active, 5: act defer)",
            "gauge",
            lambda p: 1 if node.port_down(p) else 4,
        ),
        (
            "node_infiniband_physical_state_id",
            "Physical state of the InfiniBand port (0: no change, 1: sleep, "
            "2: polling, 3: disable, 4: shift, 5: link up, 6: link error recover, 7: phytest)",
            "gauge",
            lambda p: 3 if node.port_down(p) else 5,
        ),
        (
            "node_infiniband_rate_bytes_per_second",
            "Maximum signal transfer rate",
            "gauge",
            lambda p: f"{IB_GBPS * 1e9 / 8:.0f}",
        ),
        (
            "node_infiniband_port_data_received_bytes_total",
            "Number of data octets received on all links",
            "counter",
            lambda p: f"{nb[p][0]:.0f}",
        ),
        (
            "node_infiniband_port_data_transmitted_bytes_total",
            "Number of data octets transmitted on all links",
            "counter",
            lambda p: f"{nb[p][1]:.0f}",
        ),
        (
            "node_infiniband_link_downed_total",
            "Number of times the link failed to recover from an error state and went down",
            "counter",
            lambda p: 1 if node.port_down(p) else 0,
        ),
        (
            "node_infiniband_port_transmit_wait_total",
            "Number of ticks during which the port had data to "
            "transmit but no data was sent during the entire tick",
            "counter",
            lambda p: f"{xmit_wait_total(node, p, now):.0f}",  # rises on a congested pair
        ),
        *(
            (
                f"node_infiniband_{c}_total",
                f"Number of {c.replace('_', ' ')}",
                "counter",
                lambda p, k=k, c=c: f"{up * k * 3.0:.0f}" if "packets" in c else 0,
            )
            for k, c in enumerate(_IB_COUNTERS)
        ),
    ]
    for name, help_, kind, value_of in ib_rows:
        series(name, help_, kind, [(f'device="{p}",port="1"', value_of(p)) for p in IB_PORTS])

    out.append(cached(node, "netclass", now, partial(_netclass_families, devices)))
    out.append(ethtool_families(node, now))  # pause frames (pd_trouble.py)

    def traffic(dev: str, direction: int) -> float:
        if dev in nb:  # the scenario's own ports
            return nb[dev][direction]
        k = sum(map(ord, dev)) % 97  # other devices: steady, made-up traffic
        return 1e9 * (k + 1) + up * (2e5 + 1e3 * k) * (1.3 if direction else 1.0)

    for direction, (word, stats) in enumerate((("receive", _NETDEV_STATS), ("transmit", _NETDEV_TX_STATS))):
        moved = [traffic(dev, direction) for dev in devices]
        for stat in stats:
            name, help_ = f"node_network_{word}_{stat}_total", f"Network device statistic {word}_{stat}."
            if stat in ("bytes", "packets"):
                per = 1500 if stat == "packets" else 1
                series(name, help_, "counter",
                       [(f'device="{dev}"', f"{b / per:.0f}") for dev, b in zip(devices, moved, strict=True)])
            else:  # nothing dropped, no errors: the same every request, redrawn every REFRESH_S
                out.append(cached(node, name, now, partial(family_text, name, help_, "counter",
                                                            [(f'device="{dev}"', 0) for dev in devices])))
    out.append(cached(node, "steady", now, partial(_steady_families, devices)))
    page.family("node_time_seconds", "System time in seconds since epoch (1970).", "gauge")
    out.append(f"node_time_seconds {now:.9e}")
    if collect is None:
        return page.text()
    return "".join([*parts, only_collectors(page.text(), collect)])
