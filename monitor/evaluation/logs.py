"""Pure checks on engine figures that come from a log. No I/O, no clock of its own."""

from __future__ import annotations

from collections.abc import Sequence

from infertop.collectors.rates import mean
from infertop.layouts.model import Thresholds
from infertop.monitor.snapshot import EngineView, GpuView


def log_silence_note(
    engine: EngineView | None, gpus: Sequence[GpuView], thresholds: Thresholds
) -> str | None:
    """A word when a followed log has stopped moving while the GPUs are busy.

    vLLM stops printing stats while idle, so a silent log alone means nothing; silent
    while the accelerators work points at a hung engine, a log that was moved, or an
    engine now writing somewhere else. Unknown GPU figures give no verdict either way.
    """
    if engine is None or engine.source != "log" or engine.age_s is None:
        return None
    if engine.age_s < thresholds.log_silent_s:
        return None
    util = mean(g.util_pct for g in gpus)
    if util is None or util <= thresholds.idle_util_pct:
        return None
    return (
        f"engine log silent for {engine.age_s:.0f} s while GPUs are busy "
        f"(mean util {util:.0f}%): engine stuck, or logging elsewhere?"
    )
