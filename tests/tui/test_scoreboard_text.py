"""The scoreboard's text: the plot puts each point where its figures say, the money
lines appear only with the figures the snapshot carries."""

from __future__ import annotations

from rich.console import Console

from infertop.monitor.snapshot import ClusterView, EngineView, NodeView, SessionView, Snapshot
from infertop.tui.scoreboard_text import FULL, LIVE, REFERENCE, TRAIL, latency_table, money_text, scatter


def _cells(text: str) -> list[list[str]]:
    rows = [line.split("│", 1)[1] for line in text.splitlines() if "│" in line]
    return [list(r) for r in rows]


def test_points_land_where_their_figures_say() -> None:
    refs = [("EP64", (246.0, 15_700.0)), ("EP8", (198.0, 12_600.0))]
    plot = scatter(refs, live=(123.0, 7_850.0), full=(123.0, 9_000.0), trail=[(61.5, 3_925.0)],
                   width=40, height=11).plain
    grid = _cells(plot)
    where = {ch: (r, c) for r, row in enumerate(grid) for c, ch in enumerate(row) if ch in (REFERENCE, LIVE, FULL, TRAIL)}
    # axes run to 1.15 × the largest figure: EP64 at 1/1.15 of both
    assert where[REFERENCE][0] < where[FULL][0] < where[LIVE][0] < where[TRAIL][0]  # higher = smaller row
    assert where[LIVE][1] == where[FULL][1]  # the same tokens/s per user
    assert "EP64" in plot and "EP8" in plot
    r64 = next(r for r, row in enumerate(grid) if "EP64" in "".join(row))
    assert r64 == round(10 - 15_700 / (15_700 * 1.15) * 10)


def test_money_lines_only_with_their_figures() -> None:
    bare = SessionView(started_at="2026-12-01T00:00:00+00:00", elapsed_s=1.0, cost_per_hour_usd=None,
                       spend_usd=None, idle_spend_usd=None, budget_usd=None,
                       usd_per_million_output_tokens=None, api_equivalent_usd=None)
    assert money_text(bare).plain == ""
    full = bare.model_copy(update={
        "breakeven_output_tokens_per_s": 627_081.0, "accepted_tokens_per_s": 110_000.0,
        "price_window": "off-peak", "price_window_flips_at": "2026-12-01T01:00:00+00:00",
        "projected_spend_usd": 4063.5, "budget_holds": False, "energy_kwh": 12.5,
        "joules_per_output_token": 0.42,
    })
    text = money_text(full).plain
    # the flip written as the session panel writes it ("until 2026-12-01 01:00 UTC")
    assert "break-even 627,081 tok/s needed, 110,000 now (off-peak price, flips 2026-12-01 01:00 UTC)" in text
    assert "projected spend $4,063.50  budget will not hold" in text
    assert "energy 12.50 kWh  0.42 J per output token" in text


def test_a_node_whose_window_held_no_latency_reading_says_so() -> None:
    quiet = EngineView(latency_note="no latency reading in this window")
    read = EngineView(ttft_p99_s=0.2, latency_bounds_s={"ttft_p99": (0.1, 0.25)})
    snap = Snapshot.model_construct(
        cluster=ClusterView.model_construct(roles={}),
        nodes=[NodeView.model_construct(name="decode-01", engine=quiet),
               NodeView.model_construct(name="decode-02", engine=read)],
    )
    console = Console(width=240, record=True)
    console.print(latency_table(snap))
    rows = {line.split()[0]: line for line in console.export_text().splitlines() if line.strip().startswith("decode")}
    assert "no latency reading in this window" in rows["decode-01"]
    assert "no latency reading" not in rows["decode-02"]
