"""Mass events: many nodes entering the same verdict together are one event. Pure.

When a switch drops, 41 nodes go unreachable in one tick; when the monitor itself
stalls, it used to be 128. A hunt list of 41 identical rows buries the three real
problems, and 41 notifications cover the table. Verdicts of one kind that started
within a short window of each other, on at least `MASS_MIN_NODES` nodes, form a group:
the hunt list shows one row ("41 nodes unreachable since 02:14:05 UTC:
decode-28…decode-68"), notifications announce it once. The nodes keep their verdicts.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from infertop.monitor.evaluation.conditions import SEVERITY_RANK
from infertop.monitor.evaluation.verdicts import hunt_order
from infertop.monitor.snapshot import NodeView, VerdictGroupView, VerdictView

MASS_MIN_NODES = 4  # fewer than this are read one by one
MIN_GROUP_WINDOW_S = 5.0  # verdicts starting this close together are one event …
GROUP_WINDOW_INTERVALS = 3  # … or within this many intervals, when that is longer
MAX_RUNS_SHOWN = 6  # name runs spelled out in a summary; the rest are counted

HuntEntry = tuple[NodeView, VerdictView] | VerdictGroupView


def _rank(severity: str) -> int:
    return SEVERITY_RANK.get(severity, len(SEVERITY_RANK))


def group_window_s(interval_s: float) -> float:
    return max(MIN_GROUP_WINDOW_S, GROUP_WINDOW_INTERVALS * interval_s)


def name_runs(members: Sequence[str], order: Sequence[str]) -> list[str]:
    """Members as runs of consecutive nodes in `order`: "decode-28…decode-68" for three
    or more in a row, each name for fewer."""
    position = {name: i for i, name in enumerate(order)}
    ranked = sorted(members, key=lambda n: (position.get(n, len(position)), n))
    runs: list[list[str]] = []
    for name in ranked:
        at = position.get(name)
        if runs and at is not None and position.get(runs[-1][-1]) == at - 1:
            runs[-1].append(name)
        else:
            runs.append([name])
    out: list[str] = []
    for run in runs:
        out.extend([f"{run[0]}…{run[-1]}"] if len(run) >= 3 else run)
    return out


def summary(kind: str, since: float | None, members: Sequence[str], order: Sequence[str]) -> str:
    runs = name_runs(members, order)
    shown = ", ".join(runs[:MAX_RUNS_SHOWN])
    if len(runs) > MAX_RUNS_SHOWN:
        left = len(runs) - MAX_RUNS_SHOWN
        shown += f", … ({left} more run{'s' if left != 1 else ''})"
    when = ""
    if since is not None:
        when = f" since {dt.datetime.fromtimestamp(since, dt.UTC):%H:%M:%S} UTC"
    return f"{len(members)} nodes {kind}{when}: {shown}"


def verdict_groups(nodes: Sequence[NodeView], interval_s: float) -> list[VerdictGroupView]:
    """Groups of at least `MASS_MIN_NODES` nodes whose verdicts of one kind started within
    `group_window_s` of the group's first, worst first."""
    order = [n.name for n in nodes]
    position = {name: i for i, name in enumerate(order)}
    by_kind: dict[str, list[tuple[float, NodeView, VerdictView]]] = {}
    for node in nodes:
        for v in node.verdicts:
            by_kind.setdefault(v.kind, []).append((v.since if v.since is not None else 0.0, node, v))
    window = group_window_s(interval_s)
    groups: list[VerdictGroupView] = []
    for kind, found in by_kind.items():
        if len(found) < MASS_MIN_NODES:
            continue
        found.sort(key=lambda f: (f[0], position[f[1].name]))
        runs: list[list[tuple[float, NodeView, VerdictView]]] = []
        for item in found:
            if runs and item[0] - runs[-1][0][0] <= window:
                runs[-1].append(item)
            else:
                runs.append([item])
        for run in runs:
            if len(run) < MASS_MIN_NODES:
                continue
            first = run[0][0]
            members = [n.name for _, n, _ in run]
            stakes = [v.usd_per_hour_at_stake for _, _, v in run if v.usd_per_hour_at_stake is not None]
            worst = min((v.severity for _, _, v in run), key=_rank)
            since = run[0][2].since
            groups.append(VerdictGroupView(
                key=f"{kind}@{first:.3f}",
                kind=kind,
                severity=worst,
                since=since,
                nodes=sorted(members, key=position.__getitem__),
                summary=summary(kind, since, members, order),
                usd_per_hour_at_stake=sum(stakes) if stakes else None,
            ))
    groups.sort(key=lambda g: (_rank(g.severity), -(g.usd_per_hour_at_stake or 0.0), g.key))
    return groups


def hunt_entries(nodes: Sequence[NodeView], groups: Sequence[VerdictGroupView]) -> list[HuntEntry]:
    """The hunt list's rows, in hunt order: a group takes the place of its worst-placed
    member (its first in `hunt_order`), and its members have no rows of their own."""
    grouped = {(name, g.kind): g for g in groups for name in g.nodes}
    out: list[HuntEntry] = []
    placed: set[str] = set()
    for node, verdict in hunt_order(nodes):
        group = grouped.get((node.name, verdict.kind))
        if group is None:
            out.append((node, verdict))
        elif group.key not in placed:
            placed.add(group.key)
            out.append(group)
    return out
