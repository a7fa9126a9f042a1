"""Every verdict kind infertop can give reaches a pager (issue 43).

The kinds are the monitor's own list (`verdicts.ALL_KINDS`), walked against the shipped
rules (docs/prometheus/infertop-rules.yml): a kind with a rule of its own fires that rule
and no other, every other kind — one added later too — fires `InfertopVerdict`, once.
Checked twice: by promtool's rule unit tests (the shipped `for` holds, simulated time),
and end to end — infertop's exporter serving a node per kind, a real Prometheus
evaluating the rules (holds set to 0 s so the test waits seconds), a real Alertmanager
(Debian's prometheus-alertmanager) delivering to a webhook on loopback.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from infertop.collectors.sources import prom_rules
from infertop.monitor.evaluation.conditions import STATUS_KINDS
from infertop.monitor.evaluation.verdicts import ALL_KINDS
from infertop.monitor.exporter import SnapshotCollector, metric_names
from infertop.monitor.snapshot import (
    ClusterView,
    NodeView,
    RollupView,
    SessionView,
    Snapshot,
    VerdictView,
)
from tests.integration.test_alertmanager import start_alertmanager, webhook_receiver
from tests.support.prometheus_server import (
    PrometheusServer,
    Target,
    free_port,
    prometheus_available,
    serve_text,
    wait_until,
)

RULES = Path(__file__).resolve().parents[2] / "docs" / "prometheus" / "infertop-rules.yml"
# the kinds that have an alert of their own, and which
OWN_ALERT = {
    "idle": "InfertopNodeIdle",
    "link-starved": "InfertopLinkStarved",
    "straggler": "InfertopStraggler",
    "throttled": "InfertopThrottled",
    "blind": "InfertopNodeBlind",
    "acceptance-drop": "InfertopAcceptanceDrop",
    "unreachable": "InfertopNodeUnreachable",
}
CATCH_ALL = "InfertopVerdict"


def expected_alert(kind: str) -> str:
    return OWN_ALERT.get(kind, CATCH_ALL)


def node_name(kind: str) -> str:
    return f"node-{kind}"


def test_the_rules_name_the_dedicated_kinds_the_test_expects() -> None:
    assert set(prom_rules.DEDICATED_KINDS) == set(OWN_ALERT)
    assert set(OWN_ALERT) <= set(ALL_KINDS)
    # every series an alert reads is one infertop's exporter serves
    served = metric_names() | {"up"}
    for _, expr, *_ in prom_rules.ALERTS:
        for name in re.findall(r"\b(infertop_[a-z_]+|up)\b", expr):
            assert name in served, (expr, name)


def _verdict_series(kind: str) -> list[str]:
    node = node_name(kind)
    series = [f'infertop_node_verdict{{node="{node}",kind="{kind}",severity="warning"}}']
    if kind in STATUS_KINDS:
        series.append(f'infertop_node_status{{node="{node}",role="decode",status="{kind}"}}')
    return series


def _summary(alert: str, kind: str) -> str:
    summary = next(s for a, _, _, _, s in prom_rules.ALERTS if a == alert)
    return summary.replace("{{ $labels.node }}", node_name(kind)).replace("{{ $labels.kind }}", kind)


@pytest.mark.skipif(shutil.which("promtool") is None, reason="Debian package prometheus not installed")
def test_promtool_every_kind_fires_exactly_its_one_alert(tmp_path: Path) -> None:
    verdict_alerts = [a for a, expr, *_ in prom_rules.ALERTS if "infertop_node_" in expr]
    tests = []
    for kind in ALL_KINDS:
        node = node_name(kind)
        wanted = expected_alert(kind)
        checks = []
        for alert in verdict_alerts:
            exp = []
            if alert == wanted:
                own_severity = next(sev for a, _, _, sev, _ in prom_rules.ALERTS if a == alert)
                labels = {"node": node, "severity": own_severity or "warning"}  # else the verdict's
                labels |= {"role": "decode", "status": kind} if alert == "InfertopNodeUnreachable" \
                    else {"kind": kind}
                exp = [{"exp_labels": labels, "exp_annotations": {"summary": _summary(alert, kind)}}]
            checks.append({"eval_time": "10m", "alertname": alert, "exp_alerts": exp})
        tests.append({
            "interval": "1m",
            "input_series": [{"series": s, "values": "1x15"} for s in _verdict_series(kind)],
            "alert_rule_test": checks,
        })
    unit = tmp_path / "every_kind_test.yml"
    unit.write_text(json.dumps({"rule_files": [str(RULES)], "evaluation_interval": "1m", "tests": tests}))
    proc = subprocess.run(["promtool", "test", "rules", str(unit)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _snapshot_of_every_kind() -> Snapshot:
    nodes = [
        NodeView(name=node_name(kind), role="decode", status=kind if kind in STATUS_KINDS else "ok",  # type: ignore[arg-type]
                 verdicts=[VerdictView(kind=kind, detail=f"a {kind} verdict", severity="warning")])
        for kind in ALL_KINDS
    ]
    return Snapshot(
        taken_at=dt.datetime.now(dt.UTC).isoformat(), window_s=10.0,
        cluster=ClusterView(name="every-kind", interval_s=1.0, total=RollupView(nodes=len(nodes), gpus=0)),
        session=SessionView(started_at=dt.datetime.now(dt.UTC).isoformat(), elapsed_s=0.0, cost_per_hour_usd=None,
                            spend_usd=None, idle_spend_usd=None, budget_usd=None,
                            usd_per_million_output_tokens=None, api_equivalent_usd=None),
        nodes=nodes,
    )


@pytest.mark.integration
@pytest.mark.skipif(not prometheus_available(), reason="Debian package prometheus not installed")
@pytest.mark.skipif(shutil.which("prometheus-alertmanager") is None,
                    reason="Debian package prometheus-alertmanager not installed")
def test_every_kind_reaches_alertmanager_once(tmp_path: Path) -> None:
    # the shipped rules, their holds at 0 s: what is tested is which rule each kind meets
    rules = tmp_path / "rules-no-hold.yml"
    rules.write_text(re.sub(r"(?m)^(\s+for: )\S+$", r"\g<1>0s", RULES.read_text()))
    registry = CollectorRegistry()
    snapshot = _snapshot_of_every_kind()
    registry.register(SnapshotCollector(lambda: snapshot))  # the exporter `infertop export` serves
    export_port = free_port()
    page = serve_text(export_port, registry)
    hook, received = webhook_receiver()
    am, am_port = start_alertmanager(tmp_path, f"http://127.0.0.1:{hook.server_address[1]}/hook")
    prom = PrometheusServer(tmp_path, [Target(f"127.0.0.1:{export_port}")], rule_files=[rules],
                            alertmanagers=[f"127.0.0.1:{am_port}"])

    def by_node() -> dict[str, set[str]]:
        seen: dict[str, set[str]] = {}
        for msg in list(received):
            for a in msg["alerts"]:
                if "node" in a["labels"]:
                    seen.setdefault(a["labels"]["node"], set()).add(a["labels"]["alertname"])
        return seen

    try:
        prom.start()
        wait_until(lambda: {node_name(k) for k in ALL_KINDS} <= set(by_node()), 90, "an alert for every kind")
    finally:
        prom.stop()
        am.terminate()
        am.wait(10)
        hook.shutdown()
        page.shutdown()
    seen = by_node()
    for kind in ALL_KINDS:
        assert seen[node_name(kind)] == {expected_alert(kind)}, kind


@pytest.mark.skipif(shutil.which("promtool") is None, reason="Debian package prometheus not installed")
def test_promtool_the_goodput_floor_pages_only_when_even_the_high_bound_is_short(tmp_path: Path) -> None:
    summary = _summary("InfertopGoodputFloor", "").replace("{{ $labels.role }}", "decode")
    unit = tmp_path / "goodput_test.yml"
    unit.write_text(json.dumps({"rule_files": [str(RULES)], "evaluation_interval": "1m", "tests": [{
        "interval": "1m",
        "input_series": [
            {"series": 'infertop_role_goodput_share_high_ratio{role="decode"}', "values": "0.85x15"},
            {"series": 'infertop_role_goodput_share_low_ratio{role="decode"}', "values": "0.5x15"},
            # a straddling bucket: maybe 80 %, maybe 95 % — no page on a guess
            {"series": 'infertop_role_goodput_share_high_ratio{role="prefill"}', "values": "0.95x15"},
            {"series": 'infertop_role_goodput_share_low_ratio{role="prefill"}', "values": "0.8x15"},
        ],
        "alert_rule_test": [{"eval_time": "10m", "alertname": "InfertopGoodputFloor", "exp_alerts": [{
            "exp_labels": {"role": "decode", "severity": "warning"},
            "exp_annotations": {"summary": summary}}]}],
    }]}))
    proc = subprocess.run(["promtool", "test", "rules", str(unit)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
