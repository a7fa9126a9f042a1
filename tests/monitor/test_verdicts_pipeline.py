"""Verdicts through the whole evaluation: raw samples (counters) → Monitor.tick → snapshot JSON.

The fleet state is fed the same `NodeSample`s a source would emit, with cumulative
counters, so rates, expected ports, role medians and hold times all come from the real
code path. The clock is explicit (`tick(now)`), so the hold and clear times are exact.
"""

from __future__ import annotations

from typing import Any

from infertop.collectors.sample import EngineSample, GpuSample, NicSample, NodeSample
from infertop.layouts import parse_layout
from infertop.monitor.monitor import Monitor

LAYOUT = """
[cluster]
name = "verdict-pipeline"
interval_s = 1.0
window_s = 4.0

[pricing]
gpu_hour_usd = 10.0

[thresholds]
hold_s = 3
clear_s = 3
idle_hold_s = 5

[[nodes]]
hosts = "decode-[01-04]"
role = "decode"
gpus = 4
nics = [{ name = "mlx5_0", expected_gbps = 400 }, { name = "mlx5_1", expected_gbps = 400 },
        { name = "mlx5_2", expected_gbps = 400 }, { name = "mlx5_3", expected_gbps = 400 }]

[[nodes]]
hosts = "prefill-[01-02]"
role = "prefill"
gpus = 4
"""

GBPS = 1e9 / 8


class Cluster:
    """Cumulative counters of a small cluster, advanced one second at a time."""

    def __init__(self) -> None:
        self.steps: dict[str, float] = {}
        self.port_bytes: dict[tuple[str, str], float] = {}
        self.trouble = True

    def sample(self, node: str, t: float) -> NodeSample:
        decode = node.startswith("decode")
        idle = node == "prefill-02" and self.trouble
        slow = node == "decode-04" and self.trouble
        piled = node == "decode-02" and self.trouble
        rate = 0.0 if idle else 42.0 if slow else 60.0
        self.steps[node] = self.steps.get(node, 0.0) + rate
        nics = []
        if decode:
            for i in range(4):
                down = piled and i in (2, 3)
                gbps = (0.0 if down else 380.0 if i == 0 else 5.0) if piled else 200.0
                key = (node, f"mlx5_{i}")
                self.port_bytes[key] = self.port_bytes.get(key, 0.0) + gbps * GBPS
                nics.append(NicSample(
                    name=f"mlx5_{i}", kind="infiniband", state="down" if down else "active",
                    speed_gbps=400.0, rx_bytes_total=self.port_bytes[key],
                    tx_bytes_total=self.port_bytes[key],
                ))
        util = 1.0 if idle else 85.0
        return NodeSample(
            node=node, source="test", taken_at=t,
            # a source that reads clock-event reasons (NVML, dcgm-exporter with them on):
            # nothing here is blind
            gpus=[GpuSample(index=i, util_pct=util, clock_event_reasons=0) for i in range(4)],
            nics=nics,
            engine=EngineSample(steps_total=self.steps[node], requests_running=0.0 if idle else 16.0,
                                generation_tokens_total=self.steps[node] * 8),
        )


def run(monitor: Monitor, cluster: Cluster, start: int, stop: int) -> dict[int, dict[str, Any]]:
    frames = {}
    for t in range(start, stop):
        for name in monitor.state.nodes:
            monitor.fleet.ingest(cluster.sample(name, float(t)))
        frames[t] = monitor.tick(now=float(t) + 0.01).to_json_dict()
    return frames


def verdict_map(frame: dict[str, Any]) -> dict[str, list[str]]:
    return {n["name"]: [v["kind"] for v in n["verdicts"]] for n in frame["nodes"]}


EXPECTED = {
    "decode-01": [], "decode-02": ["link-starved"], "decode-03": [], "decode-04": ["straggler"],
    "prefill-01": [], "prefill-02": ["idle"],
}


def test_scripted_trouble_gives_exactly_the_right_verdicts() -> None:
    monitor = Monitor(parse_layout(LAYOUT), sources=[], clock=lambda: 0.0)
    cluster = Cluster()
    frames = run(monitor, cluster, 1000, 1012)
    quiet = {name: [] for name in EXPECTED}
    for t in range(1000, 1003):  # nothing before the 3 s hold
        assert verdict_map(frames[t]) == quiet, t
    # ports down show in the first sample; a straggler needs a rate (two readings, t=1001);
    # idle holds 5 s
    assert verdict_map(frames[1003]) == {**quiet, "decode-02": ["link-starved"]}
    assert verdict_map(frames[1004]) == {**EXPECTED, "prefill-02": []}
    assert verdict_map(frames[1005]) == EXPECTED
    assert verdict_map(frames[1011]) == EXPECTED

    nodes = {n["name"]: n for n in frames[1011]["nodes"]}
    link = nodes["decode-02"]["verdicts"][0]
    assert link["detail"] == (
        "mlx5_2 down; mlx5_3 down; mlx5_0 carries 99 % of infiniband traffic at 380 of 400 Gb/s"
    )
    assert link["severity"] == "critical" and link["usd_per_hour_at_stake"] == 40.0
    straggler = nodes["decode-04"]["verdicts"][0]
    assert straggler["detail"] == "42.0 decode steps/s, 70 % of the decode median 60.0 (4 nodes)"
    assert abs(straggler["usd_per_hour_at_stake"] - 160.0 * 0.3) < 1e-6
    idle = nodes["prefill-02"]["verdicts"][0]
    assert idle["usd_per_hour_at_stake"] == 40.0 and idle["since"] is not None

    # trouble over: the verdicts stay for the clear time (and the window), then go
    cluster.trouble = False
    frames = run(monitor, cluster, 1012, 1024)
    assert verdict_map(frames[1012]) == EXPECTED
    assert all(not kinds for kinds in verdict_map(frames[1023]).values()), verdict_map(frames[1023])


def test_silent_node_goes_stale_then_unreachable_and_hides_old_evidence() -> None:
    monitor = Monitor(parse_layout(LAYOUT), sources=[], clock=lambda: 0.0)
    cluster = Cluster()
    run(monitor, cluster, 1000, 1008)
    names = [n for n in monitor.state.nodes if n != "decode-02"]
    for t in range(1008, 1016):
        for name in names:
            monitor.fleet.ingest(cluster.sample(name, float(t)))
        frame = monitor.tick(now=float(t) + 0.01).to_json_dict()
        kinds = verdict_map(frame)["decode-02"]
        age = t + 0.01 - 1007
        if age > 5:
            assert kinds == ["unreachable"], (t, kinds)
        elif age > 2:
            assert kinds == ["stale"], (t, kinds)
        else:
            assert kinds == ["link-starved"], (t, kinds)


async def test_snapshot_command_shows_verdicts_held_within_its_window() -> None:
    """`infertop snapshot --window S` ticks through the window, so a condition that held for
    the hold time inside it is a verdict in the one frame it prints."""
    from infertop.monitor.take_snapshot import take_snapshot
    from tests.support.tui_helpers import NodeSpec, SyntheticSource, make_layout

    specs = [NodeSpec("decode-01", gpus=1), NodeSpec("decode-02", gpus=1, down_nics=("mlx5_1",))]
    lay = make_layout(specs, interval_s=0.25)
    lay = lay.model_copy(update={"thresholds": lay.thresholds.model_copy(update={"hold_s": 0.5})})
    frame = await take_snapshot(lay, window_s=2.0, sources=[SyntheticSource(specs, 0.25)])
    got = verdict_map(frame.to_json_dict())
    assert got == {"decode-01": [], "decode-02": ["link-starved"]}
    link = frame.nodes[1].verdicts[0]
    # the down port's peer now carries all the traffic: both are named
    assert link.detail == "mlx5_1 down; mlx5_0 carries 100 % of infiniband traffic at 40 of 400 Gb/s"
    assert link.since is not None


async def test_snapshot_window_counts_from_the_first_reading() -> None:
    """A source whose first answer comes late (a loaded host, a worker still starting) still
    gives a window of readings as long as asked, not the tail that was left of it."""
    import asyncio

    from infertop.monitor.take_snapshot import take_snapshot
    from tests.support.tui_helpers import NodeSpec, SyntheticSource, make_layout

    class LateSource(SyntheticSource):
        async def poll(self):  # type: ignore[no-untyped-def]
            if self.polls == 0:
                await asyncio.sleep(1.5)  # the late first answer is what this test is about
            return await super().poll()

    specs = [NodeSpec("decode-01", gpus=1)]
    lay = make_layout(specs, interval_s=0.25)
    frame = await take_snapshot(lay, window_s=2.0, sources=[LateSource(specs, 0.25)])
    assert frame is not None
    engine = frame.nodes[0].engine
    assert engine is not None and engine.window_first_reading_at is not None
    assert engine.window_last_reading_at is not None
    # readings over (nearly) the whole window, though the first came 1.5 s after the start
    assert engine.window_last_reading_at - engine.window_first_reading_at >= 1.5
