"""Mass events are one event: many nodes entering one verdict together are grouped by the
monitor (pure: monitor.evaluation.mass_events), and the per-node verdicts stay as they were."""

from __future__ import annotations

import datetime as dt
import json

from infertop.monitor.evaluation.mass_events import hunt_entries, name_runs, verdict_groups
from infertop.monitor.monitor import Monitor
from infertop.monitor.snapshot import NodeView, VerdictGroupView, VerdictView
from tests.support.tui_helpers import NodeSpec, make_layout, make_sample

T0 = dt.datetime(2026, 12, 1, 2, 14, 5, tzinfo=dt.UTC).timestamp()
NAMES = [f"decode-{i:02d}" for i in range(1, 97)]


def node(name: str, *verdicts: VerdictView) -> NodeView:
    return NodeView(name=name, role="decode", status="ok", verdicts=list(verdicts))


def v(kind: str, since: float, severity: str = "critical", usd: float | None = 84.66) -> VerdictView:
    return VerdictView(kind=kind, detail=f"{kind} evidence", severity=severity,  # type: ignore[arg-type]
                       since=since, usd_per_hour_at_stake=usd)


def switch_drop() -> list[NodeView]:
    """41 nodes unreachable within two seconds; three real problems from long before."""
    nodes = []
    for i, name in enumerate(NAMES, start=1):
        if 28 <= i <= 68:
            nodes.append(node(name, v("unreachable", T0 + (i % 3) * 0.7)))
        elif name == "decode-03":
            nodes.append(node(name, v("link-starved", T0 - 600, "warning", 40.0)))
        elif name == "decode-07":
            nodes.append(node(name, v("straggler", T0 - 900, "warning", 84.66)))
        else:
            nodes.append(node(name))
    return nodes


def test_a_switch_drop_is_one_group_naming_the_run_of_nodes() -> None:
    groups = verdict_groups(switch_drop(), interval_s=1.0)
    assert len(groups) == 1
    g = groups[0]
    assert g.kind == "unreachable" and g.severity == "critical" and len(g.nodes) == 41
    assert g.nodes[0] == "decode-28" and g.nodes[-1] == "decode-68"
    assert g.summary == "41 nodes unreachable since 02:14:05 UTC: decode-28…decode-68"
    assert g.usd_per_hour_at_stake is not None and abs(g.usd_per_hour_at_stake - 41 * 84.66) < 1e-6


def test_the_hunt_list_holds_the_event_once_and_the_real_problems_beside_it() -> None:
    nodes = switch_drop()
    entries = hunt_entries(nodes, verdict_groups(nodes, interval_s=1.0))
    shown = [e.kind if isinstance(e, VerdictGroupView) else (e[0].name, e[1].kind) for e in entries]
    assert shown == ["unreachable", ("decode-07", "straggler"), ("decode-03", "link-starved")]


def test_few_nodes_or_far_apart_starts_are_not_a_mass_event() -> None:
    three = [node(f"n{i}", v("idle", T0)) for i in range(3)] + [node("x")]
    assert verdict_groups(three, interval_s=1.0) == []
    # four idle nodes, but each started a minute after the last: four separate stories
    apart = [node(f"n{i}", v("idle", T0 + 60 * i)) for i in range(4)]
    assert verdict_groups(apart, interval_s=1.0) == []
    # two waves of the same kind a minute apart are two events
    waves = [node(f"a{i}", v("idle", T0 + i)) for i in range(4)] + [
        node(f"b{i}", v("idle", T0 + 60 + i)) for i in range(5)
    ]
    groups = verdict_groups(waves, interval_s=1.0)
    assert sorted(len(g.nodes) for g in groups) == [4, 5]
    assert len({g.key for g in groups}) == 2


def test_names_that_are_not_one_run_are_listed_as_runs() -> None:
    order = [f"d{i}" for i in range(20)]
    members = ["d1", "d2", "d3", "d4", "d7", "d9", "d10", "d15"]
    assert name_runs(members, order) == ["d1…d4", "d7", "d9", "d10", "d15"]


def test_a_real_monitor_groups_nodes_that_go_silent_together_and_keeps_per_node_verdicts() -> None:
    specs = [NodeSpec(f"decode-{i:02d}", gpus=1, silent_after=3 if 4 <= i <= 9 else None) for i in range(1, 13)]
    layout = make_layout(specs, interval_s=1.0)
    monitor = Monitor(layout, sources=[], clock=lambda: T0)
    for n in range(12):
        for spec in specs:
            if spec.silent_after is None or n < spec.silent_after:
                monitor.fleet.ingest(make_sample(spec, n, T0 + n, 1.0, "synthetic"))
        frame = monitor.tick(now=T0 + n)
    # since their last answer (the third reading, at T0 + 2 s)
    assert [g.summary.split(": ")[0] for g in frame.verdict_groups] == ["6 nodes unreachable since 02:14:07 UTC"]
    assert frame.verdict_groups[0].nodes == [f"decode-{i:02d}" for i in range(4, 10)]
    assert frame.verdict_groups[0].summary.endswith(": decode-04…decode-09")
    data = json.loads(json.dumps(frame.to_json_dict(), allow_nan=False))
    # the per-node verdicts, unchanged: each silent node still carries its own
    assert [[x["kind"] for x in n["verdicts"]] for n in data["nodes"]][3:10] == [["unreachable"]] * 6 + [[]]
    assert data["verdict_groups"][0]["nodes"] == [f"decode-{i:02d}" for i in range(4, 10)]
