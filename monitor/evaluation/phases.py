"""The session phases a spend is split by, in their order (a module of its own, so that a
viewer naming them imports no ledger)."""

from __future__ import annotations

PHASES = ("build", "load", "warmup", "run", "failed", "idle")
