"""Per-node summaries the screens show: link state, NIC totals, GPU memory, clock events.

Pure functions over the view models (no Textual), so they are tested with plain data.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from collectors.rates import mean, total
from infertop.view import GpuView, NicView, NodeView

# NVML clock-event reasons: bit → (short name, trouble level). Idle and application
# clocks are normal operation; a power cap is worth a look; slowdowns are trouble.
CLOCK_EVENTS: tuple[tuple[int, str, str], ...] = (
    (0x1, "idle", "none"),
    (0x2, "app clocks", "none"),
    (0x4, "power cap", "warning"),
    (0x8, "hw slowdown", "critical"),
    (0x10, "sync boost", "none"),
    (0x20, "thermal (sw)", "critical"),
    (0x40, "thermal (hw)", "critical"),
    (0x80, "power brake", "critical"),
    (0x100, "display clocks", "none"),
)
_LEVELS = ("none", "warning", "critical")


def clock_events(mask: int | None) -> tuple[list[str], str]:
    """Names of the set reasons and the worst trouble level among them."""
    if mask is None:
        return [], "none"
    names: list[str] = []
    worst = "none"
    for bit, name, level in CLOCK_EVENTS:
        if mask & bit:
            names.append(name)
            if _LEVELS.index(level) > _LEVELS.index(worst):
                worst = level
    unknown = mask & ~sum(bit for bit, _, _ in CLOCK_EVENTS)
    if unknown:
        names.append(f"0x{unknown:x}")
    return names, worst


_UP_STATES = ("up", "active", "unknown_up")


def _is_virtual(nic: NicView) -> bool:
    return nic.kind == "loopback" or nic.name == "lo"


def counted_nics(node: NodeView) -> list[NicView]:
    """The ports a node's traffic and link summary are taken over.

    Ports the layout expects (`expected_gbps` set) when there are any; otherwise every
    non-loopback port. Bond members are left out of traffic when their bond is present,
    so that traffic is not counted twice.
    """
    expected = [n for n in node.nics if n.expected_gbps is not None]
    if expected:
        return expected
    return [n for n in node.nics if not _is_virtual(n)]


def _bond_members(nics: Sequence[NicView]) -> set[str]:
    return {m for n in nics if n.members for m in n.members}


def nic_traffic(node: NodeView) -> tuple[float | None, float | None]:
    """Σ rx, Σ tx bytes/s over the counted ports (bond members folded into their bond)."""
    nics = counted_nics(node)
    members = _bond_members(nics)
    ports = [n for n in nics if n.name not in members]
    return total(n.rx_bytes_per_s for n in ports), total(n.tx_bytes_per_s for n in ports)


@dataclass(frozen=True)
class LinkSummary:
    up: int
    down: int  # ports with a known state that is not up ("down", "missing", …)
    total: int
    expected: bool  # the ports are ones the layout expects (a down one is trouble)
    degraded: bool  # an expected port is slower than expected, or a bond lost a member

    @property
    def trouble(self) -> bool:
        return self.expected and (self.down > 0 or self.degraded)

    def text(self) -> str:
        if self.total == 0 or self.up + self.down == 0:
            return "—"  # no port, or no state known for any: unknown, not "0 up"
        return f"{self.up}/{self.total} up" + (" slow" if self.degraded else "")


def link_summary(node: NodeView, rate_ratio: float = 0.95) -> LinkSummary:
    nics = counted_nics(node)
    expected = any(n.expected_gbps is not None for n in nics)
    known = [n for n in nics if n.state is not None]
    up = sum(1 for n in known if n.state is not None and n.state.lower() in _UP_STATES)
    degraded = False
    for n in nics:
        if n.expected_gbps and n.speed_gbps is not None and n.speed_gbps < n.expected_gbps * rate_ratio:
            degraded = True
        if n.members is not None and n.members_up is not None and n.members_up < len(n.members):
            degraded = True
    return LinkSummary(
        up=up, down=len(known) - up, total=len(nics), expected=expected, degraded=degraded
    )


def mean_util(gpus: Sequence[GpuView]) -> float | None:
    return mean(g.util_pct for g in gpus)


def gpu_memory(gpus: Sequence[GpuView]) -> tuple[float | None, float | None]:
    return total(g.mem_used_bytes for g in gpus), total(g.mem_total_bytes for g in gpus)


def gpu_power(gpus: Sequence[GpuView]) -> float | None:
    return total(g.power_w for g in gpus)
