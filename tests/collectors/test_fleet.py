"""Fleet state windows: what evaluation gets to derive rates from."""

from __future__ import annotations

from infertop.collectors.fleet import FleetState
from infertop.collectors.sample import NicSample, NodeSample
from infertop.monitor.evaluation.figures import nic_views, part_window


def _sample(t: float, rx: float) -> NodeSample:
    return NodeSample(node="n", source="s", taken_at=t,
                      nics=[NicSample(name="eth0", kind="ethernet", rx_bytes_total=rx)])


def test_window_reaches_back_for_two_readings() -> None:
    state = FleetState(["n"])
    for t, rx in ((10.0, 0.0), (11.0, 100.0), (12.0, 300.0)):
        state.add(_sample(t, rx))
    node = state.nodes["n"]
    assert [s.taken_at for s in node.window("s", 11.5)] == [12.0]
    assert [s.taken_at for s in node.window("s", 11.5, min_count=2)] == [11.0, 12.0]
    assert [s.taken_at for s in node.window("s", 9.0, min_count=2)] == [10.0, 11.0, 12.0]
    # a window shorter than the reading gap still yields a rate: 200 B over the last second
    views = nic_views(part_window(node, "nics", 12.2, 0.5), None)
    assert views[0].rx_bytes_per_s == 200.0


def test_errors_do_not_enter_the_rings() -> None:
    state = FleetState(["n"])
    state.add(_sample(1.0, 5.0))
    state.add(NodeSample(node="n", source="s", taken_at=2.0, error="refused"))
    node = state.nodes["n"]
    assert node.error == "refused" and node.last_ok_at == 1.0
    state.add(_sample(3.0, 6.0))
    assert node.error is None


def test_history_is_merged_behind_the_newest_reading() -> None:
    state = FleetState(["n"], history=4, retain_s=10.0)
    state.add(_sample(20.0, 2000.0))
    state.add(_sample(21.0, 2100.0))
    for t in (5.0, 12.0, 18.0, 19.0, 19.0, 21.0):  # 5: past retain_s; 19 twice; 21 is kept
        state.add_history(_sample(t, t * 100))
    node = state.nodes["n"]
    assert [s.taken_at for s in node.by_source["s"]] == [18.0, 19.0, 20.0, 21.0]
    assert node.last_ok_at == 21.0
    # a full ring keeps its newest readings: one older than all of them is not inserted
    state.add_history(_sample(17.0, 1700.0))
    assert [s.taken_at for s in node.by_source["s"]] == [18.0, 19.0, 20.0, 21.0]
    # with nothing newer held, history is simply the next reading
    state.add_history(NodeSample(node="m", source="s", taken_at=3.0))
    assert state.nodes["m"].last_ok_at == 3.0
    # rates over the merged window are the counters' own: 100 B/s throughout
    views = nic_views(part_window(node, "nics", 21.0, 3.0), None)
    assert views[0].rx_bytes_per_s == 100.0
