"""The shipped Prometheus rules: generated from the prom source's own queries, and valid."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from infertop.collectors.sources import prom_rules
from infertop.collectors.sources.prom import PromSource
from infertop.layouts.model import PrometheusConfig

RULES = Path(__file__).resolve().parents[2] / "docs" / "prometheus" / "infertop-rules.yml"


def test_the_shipped_rules_are_the_generated_ones() -> None:
    assert RULES.read_text() == prom_rules.rules_yaml(), "run: python -m infertop.collectors.sources.prom_rules > " + str(RULES)


@pytest.mark.skipif(shutil.which("promtool") is None, reason="Debian package prometheus not installed")
def test_promtool_accepts_the_rules() -> None:
    proc = subprocess.run(["promtool", "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    total = sum(len(prom_rules.recording_rules(t)) for t in prom_rules.TIERS) + len(prom_rules.ALERTS)
    assert f"SUCCESS: {total} rules found" in proc.stdout


def test_a_source_reads_recorded_series_only_for_its_own_queries() -> None:
    same = PromSource(PrometheusConfig(url="http://prom:9090", node_label=["node", "instance"]), ["a"], 2.0)
    other = PromSource(PrometheusConfig(url="http://prom:9090", node_label="Hostname"), ["a"], 2.0)
    for source in (same, other):
        assert not [q for q in source.queries("engine") if q.promql.startswith("infertop_node:")]
        source.backends[0].recorded = {prom_rules.recorded_name(q) for t in prom_rules.TIERS for q in source.builder.tier(t)}
    assert all(q.promql.startswith("infertop_node:") for t in prom_rules.TIERS for q in same.queries(t))
    # another node label: the recorded series group other nodes, the raw queries are read
    assert not [q for t in prom_rules.TIERS for q in other.queries(t) if q.promql.startswith("infertop_node:")]
