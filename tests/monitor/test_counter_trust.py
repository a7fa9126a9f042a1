"""Counters no engine or link could produce (issue 19, item 6 and "Smaller").

A counter jumping 100 → 1e18 in a scrape, one that drops by 1,000 every scrape (counted
as 4e9 tokens in 3 s, like Prometheus would), one that resets on every scrape: a rate over
a window holding such a step is unknown with a note, and the session's ledger leaves the
step out of tokens and the API-equivalent, with a note on the session. The limits and the
rules: `collectors/bounds.py` (`COUNTER_MAX_PER_S`) and `collectors.rates.step_doubt`.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from infertop.monitor.snapshot import SessionView
from infertop.tui.history import SpendHistory
from infertop.tui.session_panel import session_lines
from tests.support.hostile_server import check_figure, growing, ib_page, snapshot_of, vllm_page

CASES = [
    pytest.param({"engine": lambda n, t: vllm_page(growing(100.0, 1e18, after_s=1.0)(n, t))},
                 ("engine", "accepted_tokens_per_s"), "faster than 1e+08/s", id="engine-jumps-to-1e18"),
    pytest.param({"engine": lambda n, t: vllm_page(1.3e9 - 1000 * n)},
                 ("engine", "accepted_tokens_per_s"), "went down and restarted at 1.3e+09",
                 id="engine-drops-1000-every-scrape"),
    pytest.param({"engine": lambda n, t: vllm_page(5e4 - 1000 * n)},
                 ("engine", "accepted_tokens_per_s"), "went down twice", id="engine-resets-every-scrape"),
    pytest.param({"engine": lambda n, t: vllm_page(steps=growing(10.0, 1e17, after_s=1.0)(n, t))},
                 ("engine", "decode_steps_per_s"), "steps_total rose by", id="steps-jump-to-1e17"),
    pytest.param({"ib": lambda n, t: ib_page(rx=growing(1e9, 1e18, after_s=1.0)(n, t))},
                 ("nic", "rx_bytes_per_s"), "rx_bytes_total rose by", id="port-rx-jumps-1e18"),
    pytest.param({"ib": lambda n, t: ib_page(tx=1e15 - 1e6 * n)},
                 ("nic", "tx_bytes_per_s"), "went down and restarted", id="port-tx-drops-every-scrape"),
]


@pytest.mark.hostile
@pytest.mark.parametrize(("pages", "where", "note"), CASES)
async def test_rate_of_an_impossible_counter_is_unknown_with_a_note(
    pages: dict[str, Callable[[int, float], str]], where: tuple[str, str], note: str
) -> None:
    await check_figure(pages, where, None, note)


@pytest.mark.hostile
@pytest.mark.parametrize(
    ("generation", "why"),
    [
        pytest.param(growing(100.0, 1e18, after_s=1.0), "faster than", id="jump-to-1e18"),
        pytest.param(lambda n, t: 1.3e9 - 1000 * n, "went down and restarted", id="drops-1000-every-scrape"),
        pytest.param(lambda n, t: 5e4 - 1000 * n, "went down twice", id="resets-every-scrape"),
    ],
)
async def test_ledger_never_counts_a_step_no_engine_could_make(
    generation: Callable[[int, float], float], why: str
) -> None:
    """Tokens and the API-equivalent come from counter steps: an implausible one is left
    out, with a note on the session, instead of 4e9 tokens in 3 s (or 1e18)."""
    snapshot = await snapshot_of({"engine": lambda n, t: vllm_page(generation(n, t))})
    session = snapshot.session
    assert session.accepted_tokens is None or session.accepted_tokens < 1e5
    assert session.api_equivalent_usd is None or session.api_equivalent_usd < 1.0
    assert any(why in n and "generation_tokens_total" in n for n in session.notes), session.notes


async def test_an_engine_restart_is_still_counted() -> None:
    """Not hostile: one restart (counters back near zero) counts as Prometheus does."""
    snapshot = await snapshot_of({"engine": lambda n, t: vllm_page(1000.0 + 100 * n if t < 1.0 else 50.0 * n)})
    assert snapshot.session.notes == []
    assert snapshot.session.accepted_tokens is not None and snapshot.session.accepted_tokens > 100


@pytest.mark.hostile
def test_session_panel_shows_what_the_ledger_left_out() -> None:
    view = SessionView(started_at="2026-01-01T00:00:00+00:00", elapsed_s=10.0, cost_per_hour_usd=None,
                       spend_usd=None, idle_spend_usd=None, budget_usd=None,
                       usd_per_million_output_tokens=None, api_equivalent_usd=None,
                       notes=["[red]n1[/] generation_tokens_total rose by 1e+18 in 1 s: not counted"])
    text = "\n".join(line.plain for line in session_lines(view, SpendHistory()))
    assert "[red]n1[/] generation_tokens_total rose by 1e+18 in 1 s: not counted" in text
