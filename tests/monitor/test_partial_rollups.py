"""Partial is shown as partial: a roll-up counts only the nodes that answer, and says how
many of how many it counted; a node gone silent never leaves a partial sum reading as
the whole pool's. A real Monitor evaluates fleet state fed with node readings."""

from __future__ import annotations

import json

import pytest

from infertop.monitor.monitor import Monitor
from infertop.monitor.snapshot import Snapshot
from tests.support.tui_helpers import NodeSpec, make_layout, make_sample

START = 1_800_000_000.0
SPECS = [
    NodeSpec("prefill-01", role="prefill", steps_per_s=10.0),
    *(NodeSpec(f"decode-0{i}", steps_per_s=30.0) for i in (1, 2, 3)),
    NodeSpec("decode-04", steps_per_s=30.0, silent_after=3),  # gone after its 3rd reading
]


def frames(ticks: int) -> list[Snapshot]:
    layout = make_layout(SPECS, interval_s=1.0)
    monitor = Monitor(layout, sources=[], clock=lambda: START)
    out = []
    for n in range(ticks):
        now = START + n
        for spec in SPECS:
            if spec.silent_after is None or n < spec.silent_after:
                monitor.fleet.ingest(make_sample(spec, n, now, 1.0, "synthetic"))
        out.append(monitor.tick(now=now))
    return out


def test_every_node_answering_is_a_whole_count() -> None:
    frame = frames(3)[-1]
    decode = frame.cluster.roles["decode"]
    assert (decode.nodes_counted, decode.nodes_expected, decode.partial) == (4, 4, False)
    # accepted output tokens: 30 steps/s × 8 × 3 generated tokens per node
    assert decode.accepted_tokens_per_s == pytest.approx(4 * 720.0)
    total = frame.cluster.total
    assert (total.nodes_counted, total.nodes_expected) == (5, 5)


def test_a_silent_node_makes_its_pool_and_the_cluster_partial_not_smaller() -> None:
    whole, partial = frames(3)[-1], frames(10)[-1]
    assert {n.name: n.status for n in partial.nodes}["decode-04"] == "unreachable"
    decode = partial.cluster.roles["decode"]
    assert (decode.nodes_counted, decode.nodes_expected, decode.partial) == (3, 4, True)
    # the sum is over the three that answer, and says so; the silent node's last rate
    # is not mixed in as if it were current
    assert decode.accepted_tokens_per_s == pytest.approx(3 * 720.0)
    assert decode.decode_steps_per_s == pytest.approx(30.0)
    # what is paid for does not shrink: a node that does not answer is still billed
    assert decode.cost_per_hour_usd == whole.cluster.roles["decode"].cost_per_hour_usd
    assert decode.gpus == 8
    prefill = partial.cluster.roles["prefill"]
    assert (prefill.nodes_counted, prefill.nodes_expected, prefill.partial) == (1, 1, False)
    total = partial.cluster.total
    assert (total.nodes_counted, total.nodes_expected, total.partial) == (4, 5, True)
    # the session's tokens/s is the cluster's (its count is the cluster roll-up's)
    assert partial.session.accepted_tokens_per_s == total.accepted_tokens_per_s


def test_the_counts_are_in_the_json() -> None:
    data = json.loads(json.dumps(frames(10)[-1].to_json_dict(), allow_nan=False))
    cluster = data["cluster"]
    assert (cluster["roles"]["decode"]["nodes_counted"], cluster["roles"]["decode"]["nodes_expected"]) == (3, 4)
    assert (cluster["total"]["nodes_counted"], cluster["total"]["nodes_expected"]) == (4, 5)
    # the old field keeps its meaning: every node of the pool
    assert cluster["roles"]["decode"]["nodes"] == 4


def test_the_text_snapshot_says_the_cluster_figures_are_partial() -> None:
    from infertop.monitor.text_report import snapshot_table

    assert "partial: cluster figures over 4 of 5 nodes" in snapshot_table(frames(10)[-1])
    assert "partial" not in snapshot_table(frames(3)[-1])
