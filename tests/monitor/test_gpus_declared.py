"""A node declared `gpus = 0` (or any count) whose GPUs answer with more (issue 45): the
pool's per-GPU figures divide by the GPUs that made the tokens, and the node says so."""

from __future__ import annotations

import pytest

from infertop.collectors.sample import EngineSample, GpuSample, NodeSample
from infertop.layouts import parse_layout
from infertop.monitor.evaluation.scoreboard import gpu_count_note, gpus_at_work
from infertop.monitor.monitor import Monitor

T0 = 1_800_000_000.0


@pytest.mark.parametrize(("declared", "answering", "divides_by", "noted"), [
    (8, 8, 8, False),
    (0, 8, 8, True),  # the node: 8 GPUs make tokens, none declared
    (4, 8, 8, True),
    (8, 6, 8, False),  # fewer answer: the GPU-error verdict says "6 of 8 visible"
    (None, 8, 8, False),  # not declared: the GPUs seen are the count
    (8, 0, 8, False),  # no GPU read: the layout's count
])
def test_gpus_at_work(declared: int | None, answering: int, divides_by: int, noted: bool) -> None:
    assert gpus_at_work(declared, answering) == divides_by
    assert (gpu_count_note(declared, answering) is not None) == noted


def test_per_gpu_figures_divide_by_the_gpus_that_made_the_tokens() -> None:
    nodes = "".join(f'[[nodes]]\nname = "d{i}"\nrole = "decode"\ngpus = {0 if i == 5 else 8}\n' for i in range(6))
    monitor = Monitor(parse_layout(f"[pricing]\ngpu_hour_usd = 10.582\n{nodes}"), sources=[], clock=lambda: T0)
    for k in range(6):
        for i in range(6):
            gen = 1e9 + 3000.0 * k
            monitor.fleet.ingest(NodeSample(
                node=f"d{i}", source="scrape", taken_at=T0 + k,
                engine=EngineSample(generation_tokens_total=gen, requests_running=4),
                gpus=[GpuSample(index=g, util_pct=90.0) for g in range(8)],
            ))
        snapshot = monitor.tick(T0 + k)
    decode = snapshot.cluster.roles["decode"]
    assert decode.accepted_tokens_per_s == pytest.approx(6 * 3000.0)
    assert decode.gpus == 48
    assert decode.output_tokens_per_s_per_gpu == pytest.approx(6 * 3000.0 / 48)
    odd = next(n for n in snapshot.nodes if n.name == "d5")
    assert any("8 GPUs answer where the layout declares 0" in note for note in odd.notes)
    assert odd.cost_per_hour_usd == 0.0  # the bill is the layout's word
