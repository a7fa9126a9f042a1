"""The running account of a session: spend integrated tick by tick from the reservation start.

The bill runs from the reservation start whether or not infertop was watching, so the
first tick charges the whole stretch since that start at the then-current rate.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

from infertop.view import PhaseSpend, SessionView

PHASES = ("build", "load", "warmup", "run", "failed", "idle")


@dataclass
class SessionLedger:
    started_at: float  # unix seconds: the reservation start
    budget_usd: float | None = None
    acceptable_tasks: int | None = None
    phase: str = "run"
    spend_usd: float = 0.0
    idle_spend_usd: float = 0.0
    accepted_tokens: float = 0.0
    requests_finished: float = 0.0
    spend_by_phase: dict[str, float] = field(default_factory=dict)
    seconds_by_phase: dict[str, float] = field(default_factory=dict)
    last_at: float | None = None
    cost_per_hour_usd: float | None = None
    idle_fraction: float | None = None
    _tokens_known: bool = False

    def advance(
        self,
        now: float,
        cost_per_hour_usd: float | None,
        idle_fraction: float | None,
        accepted_tokens_per_s: float | None,
        requests_finished_per_s: float | None = None,
    ) -> None:
        """Charge the time since the previous tick (or since the start) at the current rate."""
        since = self.started_at if self.last_at is None else self.last_at
        seconds = max(now - since, 0.0)
        if cost_per_hour_usd is not None:
            cost = cost_per_hour_usd * seconds / 3600.0
            self.spend_usd += cost
            self.spend_by_phase[self.phase] = self.spend_by_phase.get(self.phase, 0.0) + cost
            if idle_fraction is not None:
                self.idle_spend_usd += cost * idle_fraction
        self.seconds_by_phase[self.phase] = self.seconds_by_phase.get(self.phase, 0.0) + seconds
        if self.last_at is not None:  # tokens are only counted while watched
            if accepted_tokens_per_s is not None:
                self.accepted_tokens += accepted_tokens_per_s * seconds
                self._tokens_known = True
            if requests_finished_per_s is not None:
                self.requests_finished += requests_finished_per_s * seconds
        self.last_at = now
        self.cost_per_hour_usd = cost_per_hour_usd
        self.idle_fraction = idle_fraction

    def view(self, now: float) -> SessionView:
        tokens = self.accepted_tokens if self._tokens_known else None
        per_million = (
            self.spend_usd / tokens * 1e6 if tokens and self.cost_per_hour_usd is not None else None
        )
        used = (
            self.spend_usd / self.budget_usd
            if self.budget_usd and self.cost_per_hour_usd is not None
            else None
        )
        return SessionView(
            started_at=dt.datetime.fromtimestamp(self.started_at, dt.UTC).isoformat(),
            elapsed_s=max(now - self.started_at, 0.0),
            cost_per_hour_usd=self.cost_per_hour_usd,
            spend_usd=self.spend_usd if self.cost_per_hour_usd is not None else None,
            idle_spend_usd=self.idle_spend_usd if self.cost_per_hour_usd is not None else None,
            budget_usd=self.budget_usd,
            usd_per_million_output_tokens=per_million,
            api_equivalent_usd=None,
            phase=self.phase,
            spend_by_phase=[
                PhaseSpend(phase=p, spend_usd=s, seconds=self.seconds_by_phase.get(p, 0.0))
                for p, s in self.spend_by_phase.items()
            ],
            accepted_tokens=tokens,
            budget_used_fraction=used,
        )
