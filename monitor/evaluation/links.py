"""The link-starved condition: a node whose network (or chip-to-chip links) holds it back.

Evidence, each named in the reason:
- a port the layout expects is down or missing, or negotiated below its expected rate;
- a bond runs on fewer members than it has;
- one port carries nearly all the traffic of its kind while its peers idle;
- a port runs near line rate while the node's GPUs wait (a port whose congestion
  counters stand well above its pool's are the `congested` verdict's: congestion.py);
- a GPU has fewer NVLinks (an NPU fewer HCCS links) up than its peers on the node;
- an NPU's own RoCE port is down or counting errors.

Which ports count: those the layout lists, plus data-fabric ports (InfiniBand, RoCE, NPU
RoCE) that it does not. Unlisted Ethernet ports are management networks more often than
not; a down one is not news.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Sequence

from infertop.layouts.model import NodeConfig, Thresholds
from infertop.monitor.evaluation.conditions import LINK_STARVED, Condition
from infertop.monitor.format import fmt_si
from infertop.monitor.snapshot import GpuView, NicView, NodeView, Severity

FABRIC_KINDS = ("infiniband", "roce", "npu-roce")
MAX_REASONS = 4  # a reason is one line: name the worst few, count the rest


def _gbps(bytes_per_s: float) -> float:
    return bytes_per_s * 8 / 1e9


def _line_gbps(nic: NicView) -> float | None:
    return nic.speed_gbps if nic.speed_gbps else nic.expected_gbps


def _peak_bytes_per_s(nic: NicView) -> float | None:
    """The busier direction: a line rate is per direction."""
    known = [v for v in (nic.rx_bytes_per_s, nic.tx_bytes_per_s) if v is not None]
    return max(known) if known else None


def _traffic(nic: NicView) -> float | None:
    known = [v for v in (nic.rx_bytes_per_s, nic.tx_bytes_per_s) if v is not None]
    return sum(known) if known else None


def _effective_kinds(nics: Sequence[NicView], config: NodeConfig | None) -> dict[str, str]:
    """Port → kind for grouping. A port the layout expects but nobody reported has kind
    "other"; it belongs with the layout's other ports (the layout lists a fabric together)."""
    declared = {n.name: n.kind for n in config.nics if n.kind} if config else {}
    kinds = {nic.name: declared.get(nic.name) or nic.kind for nic in nics}
    known = Counter(k for k in kinds.values() if k != "other")
    if known:
        common = known.most_common(1)[0][0]
        listed = {n.name for n in config.nics} if config else set()
        for name, kind in kinds.items():
            if kind == "other" and name in listed:
                kinds[name] = common
    return kinds


def _port_reasons(nic: NicView, expected: bool) -> tuple[list[str], bool]:
    """Down / slow / degraded-bond / error evidence of one port; True when it is severe."""
    reasons: list[str] = []
    severe = False
    up = nic.up
    if nic.kind == "bond" and nic.members and nic.members_up is not None:
        if nic.members_up < len(nic.members):
            reasons.append(f"{nic.name} on {nic.members_up} of {len(nic.members)} members")
            severe = True
    if expected or nic.kind == "npu-roce":
        label = nic.name
        if nic.accelerator_index is not None:
            label = f"NPU {nic.accelerator_index} port {nic.name}"
        if up is False:
            reasons.append(f"{label} {nic.state}")
            severe = True
        elif up and nic.slow:
            reasons.append(f"{label} at {nic.speed_gbps:g} of {nic.expected_gbps:g} Gb/s")
    if (expected or nic.kind in FABRIC_KINDS) and up is not False and nic.errors_per_s:
        reasons.append(f"{nic.name} errors rising ({fmt_si(nic.errors_per_s, '/s')})")
    return reasons, severe


def _pile_reasons(
    ports: Sequence[NicView], kinds: dict[str, str], th: Thresholds
) -> tuple[list[str], set[str]]:
    """One port carrying ≥ link_pile_share of its kind's traffic while its peers idle."""
    groups: dict[str, list[NicView]] = {}
    for nic in ports:
        kind = kinds[nic.name]
        # bonds spread by hash by design; an NPU's port carries its own NPU's traffic
        if kind in ("bond", "loopback", "npu-roce"):
            continue
        groups.setdefault(kind, []).append(nic)
    reasons: list[str] = []
    named: set[str] = set()
    for kind, group in groups.items():
        if len(group) < 2:
            continue
        # a port that is down carries nothing: it is one of the idle peers
        traffic = [(nic, 0.0 if nic.up is False else _traffic(nic)) for nic in group]
        known = [(nic, t) for nic, t in traffic if t is not None]
        if len(known) < 2:
            continue
        whole = sum(t for _, t in known)
        if _gbps(whole) < th.link_pile_min_gbps:
            continue
        top, top_traffic = max(known, key=lambda p: p[1])
        share = top_traffic / whole
        if share < th.link_pile_share:
            continue
        peak = _peak_bytes_per_s(top) or 0.0
        line = _line_gbps(top)
        at = f"{_gbps(peak):.0f} of {line:g} Gb/s" if line else f"{_gbps(peak):.1f} Gb/s"
        reasons.append(f"{top.name} carries {share * 100:.0f} % of {kind} traffic at {at}")
        named.add(top.name)
    return reasons, named


def reads_congestion(nic: NicView) -> bool:
    """The port's congestion counters are read at all (a quiet one is evidence too)."""
    return any(v is not None for v in (nic.rx_pause_per_s, nic.tx_pause_per_s, nic.cnp_sent_per_s,
                                       nic.cnp_handled_per_s, nic.xmit_wait_per_s))


def _busy_reasons(
    ports: Sequence[NicView], node: NodeView, already: set[str], th: Thresholds
) -> list[str]:
    """While the GPUs wait: a port near line rate. Congestion counters (pause frames,
    congestion notifications, port_xmit_wait) are the `congested` verdict's evidence,
    judged against the pool's baseline there; the reason says whether they were read."""
    utils = [g.util_pct for g in node.gpus if g.util_pct is not None]
    if not utils:
        return []
    mean_util = sum(utils) / len(utils)
    if mean_util >= th.gpu_wait_util_pct:
        return []
    waiting = f"while GPUs wait (mean util {mean_util:.0f} %)"
    reasons = []
    for nic in ports:
        if nic.name in already or nic.up is False or nic.kind == "loopback":
            continue
        peak = _peak_bytes_per_s(nic)
        line = _line_gbps(nic)
        if peak is not None and line and _gbps(peak) >= line * th.link_busy_ratio:
            basis = ("congestion counters read, none rising" if reads_congestion(nic)
                     else "no congestion counters read")
            reasons.append(f"{nic.name} at {_gbps(peak):.0f} of {line:g} Gb/s {waiting}; "
                           f"evidence: rate against line rate ({basis})")
    return reasons


def _chip_link_reasons(gpus: Sequence[GpuView]) -> list[str]:
    """A GPU with fewer NVLinks (NPU: HCCS links) up than its peers on the node."""
    known = [g for g in gpus if g.nvlink_links_up is not None]
    if len(known) < 2:
        return []
    best = max(g.nvlink_links_up or 0 for g in known)
    reasons = []
    for gpu in known:
        if (gpu.nvlink_links_up or 0) < best:
            label, links = ("NPU", "HCCS links") if gpu.kind == "npu" else ("GPU", "NVLinks")
            reasons.append(f"{label} {gpu.index} has {gpu.nvlink_links_up} of {best} {links} up")
    return reasons


def link_condition(
    node: NodeView, config: NodeConfig | None, th: Thresholds, skip: Collection[str] = ()
) -> Condition | None:
    """`skip`: ports the congested verdict names (their load is its evidence)."""
    listed = {n.name for n in config.nics} if config else set()
    kinds = _effective_kinds(node.nics, config)

    def expected(nic: NicView) -> bool:
        return nic.name in listed or nic.expected_gbps is not None

    ports = [
        nic for nic in node.nics
        if expected(nic) or kinds[nic.name] in FABRIC_KINDS or nic.kind == "bond"
        or reads_congestion(nic)  # a RoCE netdev with pause counters carries the fabric too
    ]
    reasons: list[str] = []
    severe = False
    for nic in node.nics:
        port_reasons, port_severe = _port_reasons(nic, expected(nic))
        reasons += port_reasons
        severe = severe or port_severe
    pile, piled = _pile_reasons([p for p in ports if p.kind != "bond"], kinds, th)
    reasons += pile
    reasons += _busy_reasons(ports, node, piled | set(skip), th)
    reasons += _chip_link_reasons(node.gpus)
    if not reasons:
        return None
    if len(reasons) > MAX_REASONS:
        reasons = [*reasons[:MAX_REASONS], f"+{len(reasons) - MAX_REASONS} more"]
    severity: Severity = "critical" if severe else "warning"
    return Condition(LINK_STARVED, "; ".join(reasons), severity, node.cost_per_hour_usd)
