"""What every benchmark returns: rows for the table in BENCHMARKS.md."""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass


@dataclass(frozen=True)
class Row:
    figure: str  # what was measured, with its unit
    value: str  # the measured value, formatted
    target: str  # the goal ("< 1 s"), or "—"
    verdict: str  # "met", "missed by …", or "info"
    command: str  # the command that produced it


def machine() -> str:
    cpus = os.cpu_count() or 0
    return f"{platform.machine()}, {cpus} cores, Python {platform.python_version()}"
