"""node_exporter's `collect[]` filter, as the demo's node_exporter pages honour it.

Stock node_exporter ("Filtering enabled collectors" in its README) serves only the named
collectors' families for ``/metrics?collect[]=netdev&collect[]=netclass``, and answers
HTTP 400 ("Couldn't create filtered metrics handler: missing collector: NAME") for a name
it does not know. Its own families stay: `node_scrape_collector_*` (rows of the chosen
collectors only), `node_exporter_build_info`, and go_* / process_* / promhttp_*.

infertop reads five collectors' families (collectors.pages.exporters.EXPORTER_WANTED):
netdev (node_network_{receive,transmit}_*_total), netclass (node_network_info, _up,
_speed_bytes, _protocol_type …), bonding (node_bonding_*) and infiniband
(node_infiniband_*), and ethtool (node_ethtool_*: RoCE pause frames; opt-in upstream,
--collector.ethtool): `INFERTOP_COLLECTORS`, what the demo's layout asks for.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Collection

#: the collectors infertop reads, in the order the demo's layout names them
INFERTOP_COLLECTORS: tuple[str, ...] = ("netdev", "netclass", "bonding", "infiniband", "ethtool")

# node_exporter 1.x's Linux collectors (default and opt-in): a name outside these is
# "missing collector" to it, and so to the demo
KNOWN_COLLECTORS = frozenset({
    "arp", "bcache", "bonding", "btrfs", "buddyinfo", "cgroups", "conntrack", "cpu", "cpu_vulnerabilities",
    "cpufreq", "diskstats", "dmi", "drbd", "drm", "edac", "entropy", "ethtool", "fibrechannel", "filefd",
    "filesystem", "hwmon", "infiniband", "interrupts", "ipvs", "ksmd", "lnstat", "loadavg", "logind",
    "mdadm", "meminfo", "meminfo_numa", "mountstats", "netclass", "netdev", "netstat", "network_route",
    "nfs", "nfsd", "nvme", "os", "perf", "powersupplyclass", "pressure", "processes", "qdisc", "rapl",
    "runit", "schedstat", "selinux", "slabinfo", "sockstat", "softirqs", "softnet", "stat", "supervisord",
    "sysctl", "systemd", "tapestats", "tcpstat", "textfile", "thermal_zone", "time", "timex", "udp_queues",
    "uname", "vmstat", "watchdog", "wifi", "xfs", "zfs", "zoneinfo",
})

# family name → its collector, first match wins (netdev's counters before netclass's
# other node_network_* properties, e.g. node_network_transmit_queue_length)
_FAMILY_COLLECTORS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), collector)
    for pattern, collector in (
        (r"node_network_(?:receive|transmit)_\w+_total", "netdev"),
        (r"node_network_\w+", "netclass"),
        (r"node_bonding_\w+", "bonding"),
        (r"node_infiniband_\w+", "infiniband"),
        (r"node_ethtool_\w+", "ethtool"),
        (r"node_cpu_\w+", "cpu"),
        (r"node_load(?:1|5|15)", "loadavg"),
        (r"node_memory_\w+", "meminfo"),
        (r"node_disk_\w+", "diskstats"),
        (r"node_filesystem_\w+", "filesystem"),
        (r"node_(?:boot_time_seconds|context_switches_total|forks_total|intr_total|procs_\w+)", "stat"),
        (r"node_time_\w+", "time"),
    )
)
_SELF_PREFIXES = ("node_scrape_collector_", "node_exporter_", "go_", "process_", "promhttp_")
_SCRAPE_ROW = re.compile(r'collector="([^"]*)"')


class UnknownCollector(ValueError):
    """A `collect[]` name node_exporter does not have; `str()` is its HTTP 400 text."""


@functools.lru_cache(maxsize=1024)  # a page has ~100 families, the same every request
def collector_of(family: str) -> str | None:
    """The collector that serves `family`, None for node_exporter's own families."""
    for pattern, collector in _FAMILY_COLLECTORS:
        if pattern.fullmatch(family):
            return collector
    return None


def check_collectors(names: Collection[str]) -> None:
    """`UnknownCollector` for the first name node_exporter would refuse."""
    for name in names:
        if name not in KNOWN_COLLECTORS:
            raise UnknownCollector(f"Couldn't create filtered metrics handler: missing collector: {name}")


def only_collectors(text: str, collectors: Collection[str]) -> str:
    """The page with only `collectors`' families (and node_exporter's own). Families are
    found by their `# HELP` lines, which every demo page writes first."""
    chosen = frozenset(collectors)
    chunks = ("\n" + text).split("\n# HELP ")
    out = [chunks[0].lstrip("\n")] if chunks[0].strip() else []
    for chunk in chunks[1:]:
        family = chunk.split(" ", 1)[0]
        collector = collector_of(family)
        if collector is not None:
            if collector in chosen:
                out.append("# HELP " + chunk)
        elif family.startswith("node_scrape_collector_"):
            lines = chunk.split("\n")
            rows = [line for line in lines[1:]
                    if (m := _SCRAPE_ROW.search(line)) is None or m.group(1) in chosen]
            out.append("# HELP " + "\n".join([lines[0], *rows]))
        elif family.startswith(_SELF_PREFIXES):
            out.append("# HELP " + chunk)
        # any other node_* family belongs to a collector not asked for
    page = "\n".join(part.rstrip("\n") for part in out)
    return page + "\n" if page else ""
