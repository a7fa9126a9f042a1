"""The Prometheus rules infertop ships (docs/prometheus/infertop-rules.yml).

Recording rules: each is one of the prom source's own per-node queries
(collectors/sources/promql.py), recorded under `infertop_node:<tier>_<key>`, so that a source
finding them reads pre-aggregated series (one per node, port or GPU) instead of having
the server aggregate the raw ones at every poll. Generated, never written by hand: the
recorded series are exactly what the raw query answers (a test holds the shipped file
equal to `rules_yaml()`). The node is the `node` label where a series has one, else
`instance` without its `:port` (RULES_NODE_LABELS).

Alert rules: on the verdicts infertop's own exporter serves (`infertop_node_verdict`,
`infertop_node_status`, `infertop_session_budget_used_ratio`; monitor/exporter.py) and
on the scrape targets themselves (`up`), for Alertmanager to route. Every verdict kind
reaches a pager: the kinds with a rule of their own (`DEDICATED_KINDS`) and, for every
other kind — today's and any added later — one rule over the verdict series that leaves
those out (`InfertopVerdict`, its severity the verdict's own). A test walks the monitor's
kinds against this file through promtool and a real Alertmanager.

    python -m infertop.collectors.sources.prom_rules > docs/prometheus/infertop-rules.yml
"""

from __future__ import annotations

import json
import sys

from infertop.collectors.sources import promql

# the node label convention of the recorded series
RULES_NODE_LABELS = ("node", "instance")
RECORDED_PREFIX = "infertop_node:"
TIERS = ("engine", "node", "gpu")

# verdict kinds with an alert of their own below; every other kind is InfertopVerdict's
# (`unreachable` is paged on infertop_node_status, which says the same)
DEDICATED_KINDS = (
    "idle", "link-starved", "straggler", "throttled", "blind", "acceptance-drop", "unreachable",
)
# the share of a pool's requests within the [slo] targets under which it pages
GOODPUT_FLOOR = 0.9

# (alert, expr, for, severity, summary); severity "": the series' own label is kept
ALERTS: tuple[tuple[str, str, str, str, str], ...] = (
    ("InfertopNodeIdle", 'infertop_node_verdict{kind="idle"} == 1', "1m", "warning",
     "{{ $labels.node }}: GPUs paid for and idle"),
    ("InfertopLinkStarved", 'infertop_node_verdict{kind="link-starved"} == 1', "1m", "critical",
     "{{ $labels.node }}: a fabric port is down or slow"),
    ("InfertopStraggler", 'infertop_node_verdict{kind="straggler"} == 1', "2m", "warning",
     "{{ $labels.node }}: decodes well below its pool's median"),
    ("InfertopThrottled", 'infertop_node_verdict{kind="throttled"} == 1', "2m", "warning",
     "{{ $labels.node }}: a GPU is throttled"),
    ("InfertopNodeBlind", 'infertop_node_verdict{kind="blind"} == 1', "5m", "info",
     "{{ $labels.node }}: a part infertop should see is not reported"),
    ("InfertopAcceptanceDrop", 'infertop_node_verdict{kind="acceptance-drop"} == 1', "2m", "warning",
     "{{ $labels.node }}: draft acceptance well below its pool's or its own; decode capacity lost"),
    ("InfertopVerdict",
     'infertop_node_verdict{kind!~"' + "|".join(DEDICATED_KINDS) + '"} == 1', "2m", "",
     "{{ $labels.node }}: {{ $labels.kind }}"),
    # the share's high bound: paged only when even the most a straddling bucket allows is short
    ("InfertopGoodputFloor",
     f"infertop_role_goodput_share_high_ratio < {GOODPUT_FLOOR}", "5m", "warning",
     "the {{ $labels.role }} pool serves under " + f"{GOODPUT_FLOOR:.0%}"
     + " of its requests within the SLO"),
    ("InfertopNodeUnreachable", 'infertop_node_status{status="unreachable"} == 1', "1m", "critical",
     "{{ $labels.node }}: no fresh sample"),
    ("InfertopSpendPastBudget", "infertop_session_budget_used_ratio >= 1", "0s", "critical",
     "the reservation's spend is past its budget"),
    ("InfertopTargetDown", "up == 0", "30s", "critical",
     "{{ $labels.instance }} ({{ $labels.job }}) does not answer its scrape"),
)


def builder() -> promql.QueryBuilder:
    return promql.QueryBuilder(node_labels=RULES_NODE_LABELS, strip_port=True)


def recorded_name(query: promql.Query) -> str:
    return f"{RECORDED_PREFIX}{query.tier}_{query.key.replace(':', '_')}"


def recording_rules(tier: str) -> list[tuple[str, str]]:
    """(record, expr) for one tier's queries."""
    # info gauges are read raw (their labels are the figures): nothing to pre-aggregate;
    # nor the latency histograms per data-parallel engine: the source reads those only on
    # small fleets (collectors/sources/prom.py RANK_LATENCY_MAX_NODES), where the raw query is
    # cheap, and recorded they were a third of the rules' evaluation at 1,024 nodes
    return [(recorded_name(q), q.promql) for q in builder().tier(tier)
            if not q.key.startswith(promql.LABELS_KEY) and not promql.is_rank_latency(q)]


def _q(text: str) -> str:
    return json.dumps(text)  # a JSON string is a YAML double-quoted scalar


def rules_yaml() -> str:
    lines = [
        "# infertop's Prometheus rules. Generated by "
        "`python -m infertop.collectors.sources.prom_rules`: do not edit.",
        "# Recording rules: the prom source's per-node queries, pre-aggregated (it reads them",
        "# when they exist). Alert rules: infertop's verdicts (from its exporter) and down targets.",
        "groups:",
    ]
    for tier in TIERS:
        lines += [f"  - name: infertop-{tier}", "    rules:"]
        for record, expr in recording_rules(tier):
            lines += [f"      - record: {record}", f"        expr: {_q(expr)}"]
    lines += ["  - name: infertop-verdicts", "    rules:"]
    for alert, expr, hold, severity, summary in ALERTS:
        lines += [f"      - alert: {alert}", f"        expr: {_q(expr)}", f"        for: {hold}"]
        if severity:
            lines += ["        labels:", f"          severity: {severity}"]
        lines += ["        annotations:", f"          summary: {_q(summary)}"]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(rules_yaml())
