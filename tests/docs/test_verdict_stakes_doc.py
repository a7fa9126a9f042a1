"""docs/verdicts.md states each verdict's $/h at stake as the code computes it (issue 46):
the table's stake column is `STAKE_RULES` word for word, every kind is in the table, and
each condition's figure follows its rule on plain numbers."""

from __future__ import annotations

import pytest

from infertop.layouts.model import Thresholds
from infertop.monitor.evaluation.conditions import (
    HEALTH_KINDS,
    STAKE_RULES,
    STATUS_KINDS,
    RolePool,
    idle_condition,
    status_condition,
    straggler_condition,
    throttled_condition,
)
from infertop.monitor.evaluation.rank_findings import busy_waiting_condition, rank_straggler_condition
from infertop.monitor.snapshot import EngineRankView, EngineView, GpuView, NodeView
from tests.support.paths import REPO


def _stake_column() -> dict[str, str]:
    out = {}
    for line in (REPO / "docs" / "verdicts.md").read_text().splitlines():
        if not line.startswith("| `"):
            continue
        cells = line.strip().strip("|").split(" | ")
        kinds = [part.split("`")[1] for part in cells[0].split(" / ") if "`" in part]
        for kind in kinds:
            out[kind] = cells[-1].strip()
    return out


def test_the_docs_stake_column_is_the_codes_rule_for_every_kind() -> None:
    column = _stake_column()
    assert set(HEALTH_KINDS + STATUS_KINDS) <= set(column), "a verdict kind missing from docs/verdicts.md"
    assert {kind: column[kind] for kind in STAKE_RULES} == STAKE_RULES


NODE_USD = 84.66
POOL_USD = 6 * NODE_USD


def _node(**kw: object) -> NodeView:
    kw.setdefault("gpus", [GpuView(index=i, util_pct=90.0) for i in range(8)])
    return NodeView(name="dec-3", role="decode", status="ok", cost_per_hour_usd=NODE_USD, age_s=0.5, **kw)


def test_each_conditions_stake_follows_its_rule() -> None:
    th = Thresholds()
    # straggler: the role pool's $/h × (1 − ratio), not the node's: the whole group waits
    slow = _node(engine=EngineView(decode_steps_per_s=16.0, requests_running=8))
    found = straggler_condition(slow, RolePool(median_steps_per_s=40.0, reporting=6, cost_per_hour_usd=POOL_USD), th)
    assert found is not None and found.usd_per_hour_at_stake == pytest.approx(POOL_USD * (1 - 16.0 / 40.0))
    # a rank slow within its node: the same rule, its ratio against the node's busy ranks
    ranks = [EngineRankView(key=f"e{i}", dp_rank=i, gpus=[i], label=f"engine {i} (GPU {i})",
                            decode_steps_per_s=16.0 if i == 5 else 40.0, requests_running=8) for i in range(8)]
    ranked = _node(engine=EngineView(decode_steps_per_s=16.0, requests_running=64, ranks=ranks))
    by_rank = rank_straggler_condition(ranked, th, POOL_USD)
    assert by_rank is not None and by_rank.usd_per_hour_at_stake == pytest.approx(POOL_USD * (1 - 16.0 / 40.0))
    # throttled: the node's × throttled GPUs ÷ its GPUs (SwThermal on GPU 5)
    hot = _node(gpus=[GpuView(index=i, util_pct=90.0, clock_event_reasons=0x20 if i == 5 else 0) for i in range(8)])
    throttled = throttled_condition(hot, th)
    assert throttled is not None and throttled.usd_per_hour_at_stake == pytest.approx(NODE_USD / 8)
    # busy-waiting: the node's × waiting GPUs ÷ its GPUs
    spin = _node(gpus=[GpuView(index=i, util_pct=99.0, sm_active_pct=1.5 if i in (6, 7) else 80.0)
                       for i in range(8)])
    waiting = busy_waiting_condition(spin, th)
    assert waiting is not None and waiting.usd_per_hour_at_stake == pytest.approx(NODE_USD * 2 / 8)
    # idle and a status: the node's $/h
    idle = idle_condition(_node(gpus=[GpuView(index=i, util_pct=0.0) for i in range(8)],
                                engine=EngineView(requests_running=0)), th)
    assert idle is not None and idle.usd_per_hour_at_stake == NODE_USD
    stale = status_condition(_node().model_copy(update={"status": "stale", "age_s": 5.0}), 100.0)
    assert stale is not None and stale.usd_per_hour_at_stake == NODE_USD
