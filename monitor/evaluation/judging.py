"""Warm-up and standing: has this node (and the fleet) been judged yet, and what one word
says where it stands.

A verdict needs its condition to hold for `thresholds.hold_s` (verdicts.VerdictTracker),
and a rate needs two readings, so for the first `hold_s` + one interval of a node's life
no verdict can exist yet: an empty hunt list then means "not judged yet", not "all clear".
The monitor says so (`NodeView.first_verdicts_in_s`, `ClusterView.judging_nodes` /
`first_verdicts_in_s`) and every viewer draws it ("judging — first verdicts in 7 s").

A node never read yet is being read for the first time until it is late
(`figures.never_read_late`): "reading", never "stale" before a reading was due.

`NodeView.status` keeps its values (ok|stale|unreachable|error|unknown: reachability, a
stable JSON enum). `NodeView.standing` is what the STATUS column draws and the `/`
filter matches: reachability and the verdicts in one word (`node_standing`), so a node
with a critical verdict does not read as plain "ok", and `!ok` finds what the operator
hunts.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from infertop.collectors.process.loop_stalls import StallTimeline
from infertop.layouts.model import Layout
from infertop.monitor.evaluation.figures import never_read_late
from infertop.monitor.snapshot import ClusterView, NodeStatus, NodeView, Standing, VerdictView

# the standings that are not yet a judgement: the node is read, or judged, for the first time
NOT_JUDGED: tuple[Standing, ...] = ("reading", "judging")


def node_standing(
    status: NodeStatus,
    never_read: bool,
    late: bool,
    verdicts: Sequence[VerdictView],
    first_verdicts_in_s: float | None,
) -> Standing:
    """One word for the node, worst first:

    - error / unreachable / stale: it is not answering (its figures are old or absent);
      a node never read that is not late yet is "reading" instead of stale;
    - critical / warning: answering, with an established verdict that severe (an `info`
      verdict is not trouble; pending ones are not established);
    - judging: answering, no such verdict, and its first verdict window is still open
      (`first_verdicts_in_s` not None): no news is not good news yet;
    - ok: answering, judged, nothing worse than info.
    """
    if status == "stale" and never_read and not late:
        return "reading"
    if status != "ok":
        return status
    severities = {v.severity for v in verdicts if not v.pending}
    if "critical" in severities:
        return "critical"
    if "warning" in severities:
        return "warning"
    return "judging" if first_verdicts_in_s is not None else "ok"


def window_left_s(opened_at: float, now: float, length_s: float) -> float | None:
    """Seconds until a window of `length_s` opened at `opened_at` closes; None once closed."""
    left = opened_at + length_s - now
    return left if left > 0 else None


class WarmUp:
    """Remembers when the monitor began watching and when each node first answered: the
    state behind `first_verdicts_in_s`. Owned by the Monitor; fed every tick."""

    def __init__(self) -> None:
        self.watched_since: float | None = None
        self._first_ok_at: dict[str, float] = {}

    def start(self, now: float) -> None:
        """The monitor starts watching (its sources start): the first reading is due."""
        if self.watched_since is None:
            self.watched_since = now

    def mark_reading(
        self, nodes: Sequence[NodeView], layout: Layout, now: float, stalls: StallTimeline | None = None
    ) -> list[NodeView]:
        """Before the verdicts: a node never read and not yet late is "reading" (the
        tracker raises no `stale` verdict on it), with the seconds until it would be late."""
        self.start(now)  # ticked without start(): watched from the first tick
        interval = layout.cluster.interval_s
        th = layout.thresholds
        out = []
        for node in nodes:
            if node.status == "stale" and node.age_s is None and not never_read_late(
                self.watched_since, now, interval, th, stalls
            ):
                assert self.watched_since is not None
                late_in = window_left_s(self.watched_since, now, interval * th.stale_intervals)
                node = node.model_copy(update={"standing": "reading", "first_verdicts_in_s": late_in or 0.0})
            out.append(node)
        return out

    def judge(self, nodes: Sequence[NodeView], layout: Layout, now: float) -> list[NodeView]:
        """After the verdicts: every node's standing and its first verdict window."""
        # the first verdicts: a condition seen from the node's first answered tick holds
        # for hold_s; a rate's condition is first seen one interval later (two readings)
        window_s = layout.thresholds.hold_s + layout.cluster.interval_s
        out = []
        for node in nodes:
            if node.standing == "reading":
                out.append(node)
                continue
            first_in = None
            if node.status == "ok":
                first_in = window_left_s(self._first_ok_at.setdefault(node.name, now), now, window_s)
            standing = node_standing(node.status, node.age_s is None, True, node.verdicts, first_in)
            out.append(node.model_copy(update={"standing": standing, "first_verdicts_in_s": first_in}))
        return out


def with_warm_up(cluster: ClusterView, nodes: Sequence[NodeView]) -> ClusterView:
    """The fleet's warm-up: how many nodes are not judged yet, and until when."""
    waiting = [n for n in nodes if n.standing in NOT_JUDGED]
    left = [n.first_verdicts_in_s for n in waiting if n.first_verdicts_in_s is not None]
    return cluster.model_copy(update={
        "judging_nodes": len(waiting), "first_verdicts_in_s": max(left) if left else None,
    })


def judging_note(cluster: ClusterView, total_nodes: int) -> str | None:
    """What every viewer says while the fleet is not judged yet, instead of "all clear":
    "judging — first verdicts in 7 s" (every node), "judging 3 of 16 nodes — …" (some).
    None once every node has been judged."""
    if not cluster.judging_nodes:
        return None
    who = "" if cluster.judging_nodes >= total_nodes else f" {cluster.judging_nodes} of {total_nodes} nodes"
    left = cluster.first_verdicts_in_s
    when = f" — first verdicts in {math.ceil(left)} s" if left is not None else ""
    return f"judging{who}{when}"
