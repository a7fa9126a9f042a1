"""What a node and the cluster cost per hour. Pure functions of the layout and figures."""

from __future__ import annotations

from collections.abc import Sequence

from layouts.model import NodeConfig, PricingConfig


def node_cost_per_hour_usd(
    node: NodeConfig, pricing: PricingConfig, gpus_seen: int | None, power_w: float | None = None
) -> float | None:
    """Rented: per-node rate, else per-GPU rate × GPUs (layout count, else the GPUs seen).

    Owned: energy of the node (measured GPU power + host base power) × PUE × $/kWh; the
    amortised hardware is a cluster-wide figure (see `cluster_cost_per_hour_usd`).
    """
    if pricing.mode == "owned":
        if power_w is None and pricing.host_base_power_w == 0:
            return None
        watts = (power_w or 0.0) + pricing.host_base_power_w
        return watts / 1000.0 * pricing.pue * pricing.kwh_usd
    node_rate = node.node_hour_usd if node.node_hour_usd is not None else pricing.node_hour_usd
    if node_rate is not None and node.gpu_hour_usd is None:
        return node_rate
    gpu_rate = node.gpu_hour_usd if node.gpu_hour_usd is not None else pricing.gpu_hour_usd
    if gpu_rate is None:
        return None
    gpus = node.gpus if node.gpus is not None else gpus_seen
    if gpus is None:
        return None
    return gpu_rate * gpus


def cluster_cost_per_hour_usd(
    node_costs: Sequence[float | None], pricing: PricingConfig
) -> float | None:
    """Σ node $/h + extras (+ amortised hardware when owned). None if nothing is priced."""
    known = [c for c in node_costs if c is not None]
    base = pricing.extras_hour_usd + (pricing.hardware_hour_usd if pricing.mode == "owned" else 0.0)
    if not known and base == 0:
        return None
    return sum(known) + base
