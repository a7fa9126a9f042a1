"""What a node and the cluster cost per hour. Pure functions of the layout and figures."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from infertop.layouts.model import NodeConfig, PricingConfig
from infertop.monitor.format import fmt_usd


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
        return energy_cost_per_hour_usd(
            power_w or 0.0, pricing.host_base_power_w, pricing.pue, pricing.kwh_usd
        )
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


def extras_cost_per_hour_usd(pricing: PricingConfig) -> float | None:
    """What is billed to the cluster and to no node: extras (+ amortised hardware when
    owned). None when there is none."""
    extras = pricing.extras_hour_usd + (pricing.hardware_hour_usd if pricing.mode == "owned" else 0.0)
    return extras or None


def energy_cost_per_hour_usd(
    power_w: float, host_base_power_w: float, pue: float, kwh_usd: float
) -> float:
    """Owned hardware: (measured GPU power + host base power) × PUE, priced per kWh."""
    return (power_w + host_base_power_w) / 1000.0 * pue * kwh_usd


def usd_per(spend: float | None, count: float | None) -> float | None:
    """Spend per unit (per task, per request); unknown with nothing counted."""
    if spend is None or count is None or count <= 0:
        return None
    return spend / count


def usd_per_million(spend: float | None, tokens: float | None) -> float | None:
    per_token = usd_per(spend, tokens)
    return None if per_token is None else per_token * 1e6


def usd_per_million_at_rate(
    cost_per_hour_usd: float | None, tokens_per_s: float | None
) -> float | None:
    """What 1M tokens cost at the current $/h and tokens/s (None when nothing is produced)."""
    if cost_per_hour_usd is None or not tokens_per_s or tokens_per_s <= 0:
        return None
    return cost_per_hour_usd / (tokens_per_s * 3600.0) * 1e6


def break_even_ratio(spend: float | None, api_equivalent: float | None) -> float | None:
    """Spend ÷ API-equivalent: below 1 the cluster is cheaper than the API for these tokens."""
    return usd_per(spend, api_equivalent)


def breakeven_output_tokens_per_s(
    cost_per_hour_usd: float | None, api_output_usd_per_million: float | None
) -> float | None:
    """The output tokens/s the cluster must sustain to cost no more than buying the same
    output tokens from the API: cluster $/h ÷ (API $ per output token × 3600)."""
    if cost_per_hour_usd is None or not api_output_usd_per_million or api_output_usd_per_million <= 0:
        return None
    return cost_per_hour_usd / (api_output_usd_per_million * 1e-6 * 3600.0)


def api_output_tokens_for(usd: float | None, api_output_usd_per_million: float | None) -> float | None:
    """How many output tokens `usd` buys from the API at that price."""
    if usd is None or not api_output_usd_per_million or api_output_usd_per_million <= 0:
        return None
    return usd / api_output_usd_per_million * 1e6


def cost_weighted_idle_fraction(
    nodes: Sequence[tuple[float | None, float | None]],
) -> float | None:
    """Idle share of the bill over (node $/h, node idle fraction) pairs.

    A dear idle node weighs more than a cheap one; nodes with no price or no idle
    figure are left out. Unknown when no node has both.
    """
    known = [(c, f) for c, f in nodes if c is not None and f is not None]
    weight = sum(c for c, _ in known)
    if not known:
        return None
    if weight <= 0:
        return sum(f for _, f in known) / len(known)
    return sum(c * f for c, f in known) / weight


def idle_cost_per_hour_usd(nodes: Sequence[tuple[float | None, float | None]]) -> float | None:
    """What the idle GPU-time costs per hour: Σ node $/h × node idle fraction over the
    (node $/h, idle fraction) pairs where both are known. Extras (storage, network, CPU
    hosts) are billed to no node and are never idle or busy: they are left out, and shown
    apart. Unknown when no node has both figures."""
    known = [(c, f) for c, f in nodes if c is not None and f is not None]
    if not known:
        return None
    return sum(c * f for c, f in known)


BUDGET_ALERTS: tuple[tuple[float, str], ...] = ((1.0, "100%"), (0.8, "80%"))


@dataclass(frozen=True)
class BudgetFigures:
    """The one set of budget figures every viewer shows (header, panel, JSON, report)."""

    used_fraction: float | None = None
    exhausted_in_s: float | None = None  # only before the budget is reached
    alert: str | None = None  # None, "80%", "100%"
    over_by_usd: float | None = None  # only once the spend has passed the budget
    projected_spend_usd: float | None = None  # at the current $/h to the reservation end
    holds: bool | None = None  # the projection stays within the budget
    label: str | None = None  # "97% of $600", "over by $12.40 of $600", "spent: $600"


def budget_status(
    spend: float | None, budget: float | None, cost_per_hour_usd: float | None
) -> tuple[float | None, float | None, str | None]:
    """(fraction used, seconds until the budget is spent at the current rate, alert).

    The alert is "80%" from 80 % used and "100%" once spent; seconds left is unknown once
    spent (nothing runs out any more: the budget is passed) and when nothing is charged.
    """
    if spend is None or budget is None or budget < 0:
        return None, None, None
    # a budget of $0 is a budget: any spend (and none) has reached it
    used = spend / budget if budget > 0 else 1.0
    alert = next((label for level, label in BUDGET_ALERTS if used >= level), None)
    if used >= 1.0 or not cost_per_hour_usd:
        return used, None, alert
    return used, (budget - spend) / cost_per_hour_usd * 3600.0, alert


def projected_spend_usd(
    spend: float | None, cost_per_hour_usd: float | None, now: float, ends_at: float | None,
    spend_at_end: float | None = None,
) -> float | None:
    """The session's total at the reservation end if the current $/h holds until then;
    once it has ended, what was spent by the end (`spend_at_end`)."""
    if spend is None or ends_at is None:
        return None
    if now >= ends_at:
        return spend if spend_at_end is None else spend_at_end
    if cost_per_hour_usd is None:
        return None
    return spend + cost_per_hour_usd * (ends_at - now) / 3600.0


def budget_label(spend: float | None, budget: float | None) -> str | None:
    """The budget in words. The share is rounded down, so that 99.6 % reads "99%" and
    never "100%" before the budget is reached; past it the words say by how much."""
    if spend is None or budget is None or budget < 0:
        return None
    if spend > budget:
        return f"over by {fmt_usd(spend - budget)} of {fmt_usd(budget, 0)}"
    if spend == budget:
        return f"spent: {fmt_usd(budget, 0)}"
    return f"{min(math.floor(spend / budget * 100), 99)}% of {fmt_usd(budget, 0)}"


def budget_figures(
    spend: float | None,
    budget: float | None,
    cost_per_hour_usd: float | None,
    now: float,
    ends_at: float | None = None,
    spend_at_end: float | None = None,
) -> BudgetFigures:
    used, left_s, alert = budget_status(spend, budget, cost_per_hour_usd)
    projected = projected_spend_usd(spend, cost_per_hour_usd, now, ends_at, spend_at_end)
    over = spend - budget if spend is not None and budget is not None and spend > budget else None
    return BudgetFigures(
        used_fraction=used,
        exhausted_in_s=left_s,
        alert=alert,
        over_by_usd=over,
        projected_spend_usd=projected,
        holds=None if projected is None or budget is None else projected <= budget,
        label=budget_label(spend, budget),
    )
