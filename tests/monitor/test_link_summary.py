"""Judgments the screens show, made once in the evaluation: a node's link summary and
traffic (monitor/evaluation/link_summary.py), a port's up/slow, the clock-event reasons
(monitor/evaluation/clock_events.py). The node table must say what the verdicts say."""

from __future__ import annotations

from infertop.collectors.sample import NicSample, NodeSample
from infertop.layouts.model import NicExpectation, NodeConfig
from infertop.monitor.evaluation.clock_events import describe
from infertop.monitor.evaluation.figures import nic_views
from infertop.monitor.evaluation.link_summary import links_view, nic_traffic
from infertop.monitor.snapshot import NicView
from infertop.tui.columns import links_text


def test_link_summary_counts_expected_ports_and_flags_trouble() -> None:
    nics = [
        NicView(name="mlx5_0", kind="infiniband", state="active", expected_gbps=400, speed_gbps=400),
        NicView(name="mlx5_1", kind="infiniband", state="down", expected_gbps=400, speed_gbps=400),
        NicView(name="eth0", kind="ethernet", state="up"),
    ]
    summary = links_view(nics)
    assert links_text(summary) == "1/2 up" and summary.trouble
    slow = [NicView(name="ib0", kind="infiniband", state="active", expected_gbps=400, speed_gbps=200,
                    slow=True)]
    assert links_text(links_view(slow)) == "1/1 up slow" and links_view(slow).trouble
    # ports nobody expects: a down docker bridge is not trouble
    loose = [NicView(name="eth0", kind="ethernet", state="up"),
             NicView(name="docker0", kind="ethernet", state="down"),
             NicView(name="lo", kind="loopback", state="unknown")]
    assert links_text(links_view(loose)) == "1/2 up" and not links_view(loose).trouble
    # expected but never reported: unknown, not "0 up"
    unknown = [NicView(name="mlx5_0", kind="other", expected_gbps=400)]
    assert links_text(links_view(unknown)) == "—"


def test_bond_members_are_not_counted_twice() -> None:
    nics = [
        NicView(name="bond0", kind="bond", state="up", members=["eth0", "eth1"], members_up=2,
                rx_bytes_per_s=100.0, tx_bytes_per_s=10.0),
        NicView(name="eth0", kind="ethernet", state="up", rx_bytes_per_s=60.0, tx_bytes_per_s=5.0),
        NicView(name="eth1", kind="ethernet", state="up", rx_bytes_per_s=40.0, tx_bytes_per_s=5.0),
        NicView(name="lo", kind="loopback", state="up", rx_bytes_per_s=1e9, tx_bytes_per_s=1e9),
    ]
    assert nic_traffic(nics) == (100.0, 10.0)
    assert nic_traffic([]) == (None, None)


def test_port_up_is_one_rule_for_samples_and_views() -> None:
    for state in ("up", "ACTIVE", "unknown_up", "down", "missing", "DOWN", None):
        sample = NicSample(name="p", kind="infiniband", state=state)
        view = NicView(name="p", kind="infiniband", state=state)
        assert sample.is_up == view.up


def test_slow_follows_the_layouts_link_rate_ratio() -> None:
    """A 300 Gb/s port expected at 400: slow at the default 0.95, fine at a ratio of 0.7."""
    config = NodeConfig(name="n", role="decode", nics=[NicExpectation(name="ib0", expected_gbps=400)])
    sample = NodeSample(node="n", source="t", taken_at=1.0,
                        nics=[NicSample(name="ib0", kind="infiniband", state="active", speed_gbps=300)])
    (strict,) = nic_views([sample], config)
    (loose,) = nic_views([sample], config, rate_ratio=0.7)
    assert strict.slow is True and links_text(links_view([strict])) == "1/1 up slow"
    assert loose.slow is False and links_text(links_view([loose])) == "1/1 up"


def test_clock_events_decoded_with_worst_level() -> None:
    assert describe(None) == ([], None)
    assert describe(0) == ([], "none")
    assert describe(0x1) == (["idle"], "none")
    assert describe(0x4) == (["power cap"], "warning")
    names, level = describe(0x4 | 0x40 | 0x10000)
    assert names == ["power cap", "thermal (hw)", "0x10000"] and level == "critical"


def test_a_snapshot_recorded_before_these_judgments_replays_as_shown() -> None:
    """Records written by earlier versions hold no `links`, `slow` or clock labels: the
    reading side makes them, so an old record's LINKS column reads as it did live."""
    from infertop.monitor.evaluation.link_summary import with_link_judgments
    from infertop.monitor.snapshot import GpuView, NodeView, Snapshot

    nics = [NicView(name="ib0", kind="infiniband", state="active", expected_gbps=400, speed_gbps=200,
                    rx_bytes_per_s=5.0, tx_bytes_per_s=6.0),
            NicView(name="ib1", kind="infiniband", state="down", expected_gbps=400, speed_gbps=400)]
    node = NodeView(name="n", role="decode", status="ok", nics=nics,
                    gpus=[GpuView(index=0, clock_event_reasons=0x40)])
    old = Snapshot.model_validate({
        "taken_at": "2026-12-01T00:00:00+00:00", "window_s": 10.0,
        "cluster": {"name": "c", "interval_s": 1.0, "total": {"nodes": 1, "gpus": 1}},
        "session": {"started_at": "2026-12-01T00:00:00+00:00", "elapsed_s": 1.0, "cost_per_hour_usd": None,
                    "spend_usd": None, "idle_spend_usd": None, "budget_usd": None,
                    "usd_per_million_output_tokens": None, "api_equivalent_usd": None},
        "nodes": [node.model_dump(mode="json", exclude={"links"})],
    })
    (shown,) = with_link_judgments(old, 0.95).nodes
    assert shown.links is not None and links_text(shown.links) == "1/2 up slow" and shown.links.trouble
    assert (shown.rx_bytes_per_s, shown.tx_bytes_per_s) == (5.0, 6.0)
    assert shown.gpus[0].clock_events == ["thermal (hw)"] and shown.gpus[0].clock_event_level == "critical"
    again = with_link_judgments(with_link_judgments(old, 0.95), 0.95)
    assert again.nodes[0] == shown
