"""Real compute activity beside utilisation: which figure judges a GPU idle or working.

NVML / DCGM utilisation counts a GPU busy while any kernel is resident: a rank spinning
in an all-to-all or an NCCL wait reads ~100 %. SM activity (NVML GPM's SM utilisation,
dcgm-exporter's DCGM_FI_PROF_SM_ACTIVE) counts the SMs that actually worked. Where a GPU
reports it, idle is judged on it; else on utilisation, and the view says which
(`NodeView.idle_basis`). Tensor and DRAM activity are shown, never judged alone: a
kernel may work without tensor pipes, and a stock dcgm-exporter reports them without
SM activity.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

SM_ACTIVE = "sm_active"
UTIL = "util"


class _Gpu(Protocol):
    @property
    def util_pct(self) -> float | None: ...
    @property
    def sm_active_pct(self) -> float | None: ...


def work_pct(gpu: _Gpu) -> float | None:
    """The figure idle is judged on: SM activity where known, else utilisation."""
    return gpu.sm_active_pct if gpu.sm_active_pct is not None else gpu.util_pct


def idle_basis(gpus: Iterable[_Gpu]) -> str | None:
    """"sm_active" when every GPU with a figure reports SM activity, "util" when none
    does, "sm_active+util" when some do; None without any figure."""
    kinds = {SM_ACTIVE if g.sm_active_pct is not None else UTIL for g in gpus if work_pct(g) is not None}
    if not kinds:
        return None
    return kinds.pop() if len(kinds) == 1 else f"{SM_ACTIVE}+{UTIL}"


def busy_but_waiting(gpu: _Gpu, busy_util_pct: float, waiting_activity_pct: float) -> bool:
    """Utilisation says busy, SM activity says the SMs are not working."""
    util, active = gpu.util_pct, gpu.sm_active_pct
    return util is not None and active is not None and util >= busy_util_pct and active < waiting_activity_pct
