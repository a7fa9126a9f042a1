"""A node's ports and GPUs summed up for the screens: which ports count, their traffic,
whether they are in trouble, the GPUs' mean util and totals. Judged here, from the
NicViews' own `up` and `slow`, so the node table says what the link-starved verdict says."""

from __future__ import annotations

from collections.abc import Sequence

from infertop.collectors.rates import mean, total
from infertop.monitor.evaluation.clock_events import describe as describe_clock_events
from infertop.monitor.snapshot import GpuView, LinksView, NicView, Snapshot


def _is_virtual(nic: NicView) -> bool:
    return nic.kind == "loopback" or nic.name == "lo"


def counted_nics(nics: Sequence[NicView]) -> list[NicView]:
    """The ports a node's traffic and link summary are taken over: the ones the layout
    expects (`expected_gbps` set) when there are any; otherwise every real port."""
    expected = [n for n in nics if n.expected_gbps is not None]
    return expected if expected else [n for n in nics if not _is_virtual(n)]


def nic_traffic(nics: Sequence[NicView]) -> tuple[float | None, float | None]:
    """Σ rx, Σ tx bytes/s over the counted ports; bond members are folded into their
    bond, so that traffic is not counted twice."""
    counted = counted_nics(nics)
    members = {m for n in counted if n.members for m in n.members}
    ports = [n for n in counted if n.name not in members]
    return total(n.rx_bytes_per_s for n in ports), total(n.tx_bytes_per_s for n in ports)


def gpu_sums(gpus: Sequence[GpuView]) -> dict[str, float | None]:
    """A node's GPU figures summed up for its row: mean util, memory and power totals."""
    return {
        "gpu_util_pct": mean(g.util_pct for g in gpus),
        "gpu_mem_used_bytes": total(g.mem_used_bytes for g in gpus),
        "gpu_mem_total_bytes": total(g.mem_total_bytes for g in gpus),
        "gpu_power_w": total(g.power_w for g in gpus),
    }


def links_view(nics: Sequence[NicView]) -> LinksView:
    counted = counted_nics(nics)
    expected = any(n.expected_gbps is not None for n in counted)
    known = [n for n in counted if n.up is not None]
    up = sum(1 for n in known if n.up)
    degraded = any(
        n.slow or (n.members is not None and n.members_up is not None and n.members_up < len(n.members))
        for n in counted
    )
    down = len(known) - up
    return LinksView(
        up=up, down=down, total=len(counted), expected=expected, degraded=degraded,
        trouble=expected and (down > 0 or degraded),
    )


def with_link_judgments(snapshot: Snapshot, rate_ratio: float) -> Snapshot:
    """A recorded snapshot from before the evaluation made these judgments (`slow`,
    `links`, the traffic and GPU totals, clock-event labels), made now, so an old record
    replays as it was shown. Snapshots that carry them come back unchanged."""
    if all(n.links is not None or not n.nics for n in snapshot.nodes):
        return snapshot
    nodes = []
    for node in snapshot.nodes:
        if node.links is not None or not node.nics:
            nodes.append(node)
            continue
        nics = [
            n.model_copy(update={"slow": None if n.speed_gbps is None or not n.expected_gbps
                                 else n.speed_gbps < n.expected_gbps * rate_ratio})
            for n in node.nics
        ]
        gpus = [
            g.model_copy(update=dict(zip(("clock_events", "clock_event_level"),
                                         describe_clock_events(g.clock_event_reasons), strict=True)))
            if g.clock_event_reasons is not None and g.clock_events is None else g
            for g in node.gpus
        ]
        rx, tx = nic_traffic(nics)
        nodes.append(node.model_copy(update={
            "nics": nics, "gpus": gpus, "links": links_view(nics), "rx_bytes_per_s": rx,
            "tx_bytes_per_s": tx, **gpu_sums(gpus),
        }))
    return snapshot.model_copy(update={"nodes": nodes})
