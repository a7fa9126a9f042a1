"""Per-node sums the screens show: mean GPU util, GPU memory, power.

Pure functions over the view models (no Textual), so they are tested with plain data.
"""

from __future__ import annotations

from collections.abc import Sequence

from collectors.rates import mean, total
from infertop.view import GpuView


def mean_util(gpus: Sequence[GpuView]) -> float | None:
    return mean(g.util_pct for g in gpus)


def gpu_memory(gpus: Sequence[GpuView]) -> tuple[float | None, float | None]:
    return total(g.mem_used_bytes for g in gpus), total(g.mem_total_bytes for g in gpus)


def gpu_power(gpus: Sequence[GpuView]) -> float | None:
    return total(g.power_w for g in gpus)
