"""NVML clock-event reasons: one table, read by the throttled verdict and the screens.

Each bit has the name the verdict's evidence uses (NVML's own), the label a screen shows
and how much trouble it is. Idle and application clocks are normal operation; a power cap
is worth a look (a busy GPU sits at its power limit, so it is a verdict only when the
layout says `throttle_on_power_cap`); slowdowns for heat or power are trouble.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Level = Literal["none", "warning", "critical"]
LEVELS: tuple[Level, ...] = ("none", "warning", "critical")


@dataclass(frozen=True)
class ClockEvent:
    bit: int
    name: str  # NVML's name, used in verdict evidence
    label: str  # what a screen shows
    level: Level
    throttles: bool  # slows the GPU for power or heat: the throttled verdict counts it


CLOCK_EVENTS: tuple[ClockEvent, ...] = (
    ClockEvent(0x1, "GpuIdle", "idle", "none", False),
    ClockEvent(0x2, "ApplicationsClocksSetting", "app clocks", "none", False),
    ClockEvent(0x4, "SwPowerCap", "power cap", "warning", True),
    ClockEvent(0x8, "HwSlowdown", "hw slowdown", "critical", True),
    ClockEvent(0x10, "SyncBoost", "sync boost", "none", False),
    ClockEvent(0x20, "SwThermal", "thermal (sw)", "critical", True),
    ClockEvent(0x40, "HwThermal", "thermal (hw)", "critical", True),
    ClockEvent(0x80, "PowerBrake", "power brake", "critical", True),
    ClockEvent(0x100, "DisplayClockSetting", "display clocks", "none", False),
)
POWER_CAP = 0x4
THROTTLE_MASK = sum(e.bit for e in CLOCK_EVENTS if e.throttles)
KNOWN_MASK = sum(e.bit for e in CLOCK_EVENTS)


def throttle_names(bits: int) -> list[str]:
    return [e.name for e in CLOCK_EVENTS if e.throttles and bits & e.bit]


def describe(mask: int | None) -> tuple[list[str], Level | None]:
    """The labels of the set reasons and the worst level among them; (`[]`, None) when
    the reasons are unknown. Bits NVML may add later are shown in hex, as `none`."""
    if mask is None:
        return [], None
    labels: list[str] = []
    worst: Level = "none"
    for event in CLOCK_EVENTS:
        if mask & event.bit:
            labels.append(event.label)
            if LEVELS.index(event.level) > LEVELS.index(worst):
                worst = event.level
    unknown = mask & ~KNOWN_MASK
    if unknown:
        labels.append(f"0x{unknown:x}")
    return labels, worst
