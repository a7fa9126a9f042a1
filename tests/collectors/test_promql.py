"""Pure parts of the prom source: queries, result mapping, error messages, credentials."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
import requests
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_api_client import PrometheusApiClientException

from infertop.collectors.sources import promql
from infertop.collectors.sources.prom import (
    NodeNamer,
    PromSetupError,
    auth_headers,
    describe_error,
    redact_url,
)
from infertop.layouts import LayoutError, parse_layout
from infertop.layouts.model import PrometheusConfig


def test_node_label_priority_and_port_strip() -> None:
    qb = promql.QueryBuilder(node_labels=("Hostname", "instance"), selector='cluster="a"')
    q = qb.agg("sum", qb.sel("vllm:generation_tokens_total"))
    # the first label listed is applied last, so it wins wherever it is present
    assert q == (
        'sum by (infertop_node) (label_replace(label_replace(vllm:generation_tokens_total{cluster="a"}, '
        '"infertop_node", "$1", "instance", "(.+?)(?::[0-9]+)?"), '
        '"infertop_node", "$1", "Hostname", "(.+?)(?::[0-9]+)?"))'
    )


def test_engine_queries_cover_vllm_and_sglang_and_average_steps_over_engines() -> None:
    queries = {q.key: q.promql for q in promql.QueryBuilder().engine()}
    assert "vllm:generation_tokens_total or sglang:generation_tokens_total" in queries["generation_tokens_total"]
    assert queries["steps_total"].startswith("avg by (infertop_node) (sum by (infertop_node, engine, dp_rank)")
    assert queries["kv_cache_usage"].startswith("avg by")
    assert queries["timestamp"].startswith("max by (infertop_node) (label_replace((timestamp(")


def test_custom_profile_names_come_first_and_junk_is_dropped() -> None:
    custom = {"mine": {"generation_tokens": ["my_engine_tokens_total", "x}or(vector(1))or(y{"]}}
    names = promql.profile_metrics(["mine"], custom)
    assert names["generation_tokens_total"][0] == "my_engine_tokens_total"
    assert "vllm:generation_tokens_total" in names["generation_tokens_total"]
    assert not any("vector" in n for ns in names.values() for n in ns)


def test_results_become_samples() -> None:
    grouped: promql.Grouped = {}
    promql.group_instant("util_pct", [
        {"metric": {"infertop_node": "n1", "gpu": "1", "modelName": "H200"}, "value": [1.0, "55"]},
        {"metric": {"infertop_node": "n1", "gpu": "0", "modelName": "H200"}, "value": [1.0, "NaN"]},
        {"metric": {"gpu": "0"}, "value": [1.0, "1"]},  # no node label: ignored
    ], ("gpu", "modelName"), grouped)
    promql.group_instant("mem_used_mib", [
        {"metric": {"infertop_node": "n1", "gpu": "1"}, "value": [1.0, "10"]}], ("gpu",), grouped)
    sample = promql.gpu_sample("n1", 5.0, grouped["n1"], "prom:gpu")
    assert sample is not None
    assert [(g.index, g.util_pct, g.name) for g in sample.gpus or []] == [(0, None, "H200"), (1, 55.0, "H200")]
    assert sample.gpus is not None and sample.gpus[1].mem_used_bytes == 10 * 1024 * 1024
    assert sample.gpus[1].mem_total_bytes is None  # free unknown → total unknown, not "used"


def test_grouping_takes_every_shape_of_answer() -> None:
    """group_instant's fast path (types tested by identity, one node's dict looked up once
    per run of its series) groups as the plain reading would: nodes interleaved, sub-keys
    of every arity, non-finite and non-numeric values unknown, malformed series passed over."""
    grouped: promql.Grouped = {}
    promql.group_instant("ib_rx", [
        {"metric": {"infertop_node": "a", "device": "mlx5_0", "port": "1"}, "value": [1.0, "1"]},
        {"metric": {"infertop_node": "b", "device": "mlx5_0", "port": "1"}, "value": [1.0, "+Inf"]},
        {"metric": {"infertop_node": "a", "device": "mlx5_1"}, "value": (1.0, "2e3")},  # no port label
        {"metric": {"infertop_node": "a", "device": "mlx5_2", "port": "1"}, "value": [1.0, "x"]},
        {"metric": {"infertop_node": ""}, "value": [1.0, "1"]},  # empty node: not a node
        {"metric": {"infertop_node": "a", "device": "mlx5_3", "port": "1"}, "value": [1.0]},  # no value
        ["not", "a", "series"],
    ], ("device", "port"), grouped)  # type: ignore[list-item]
    promql.group_instant("load1", [{"metric": {"infertop_node": "b"}, "value": [1.0, "0.5"]}], (), grouped)
    promql.group_instant("steps", [
        {"metric": {"infertop_node": "b", "engine": "0", "dp_rank": "1", "x": "y"}, "value": [1.0, "3"]},
    ], ("engine", "dp_rank", "x"), grouped)
    assert grouped == {
        "a": {"ib_rx": {("mlx5_0", "1"): 1.0, ("mlx5_1", ""): 2000.0, ("mlx5_2", "1"): None}},
        "b": {"ib_rx": {("mlx5_0", "1"): None}, "load1": {(): 0.5}, "steps": {("0", "1", "y"): 3.0}},
    }


def test_ib_ports_named_like_the_probe() -> None:
    fig = {
        "ib_rx": {("mlx5_0", "1"): 4.0, ("mlx5_1", "1"): 1.0, ("mlx5_1", "2"): 2.0},
        "ib_state": {("mlx5_0", "1"): 4.0, ("mlx5_1", "1"): 1.0, ("mlx5_1", "2"): 4.0},
    }
    sample = promql.node_sample("n", 1.0, fig, "prom:node")
    assert sample is not None
    assert [(n.name, n.state) for n in sample.nics or []] == [
        ("mlx5_0", "active"), ("mlx5_1/1", "down"), ("mlx5_1/2", "active")
    ]


def test_default_dcgm_nvlink_clock_ecc_and_port_errors_are_read() -> None:
    # the same figures a direct scrape reads (collectors.pages.exporters), through PromQL results
    queries = {q.key: q.promql for q in promql.QueryBuilder().tier("gpu") + promql.QueryBuilder().tier("node")}
    assert "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL" in queries["nvlink_total"]
    assert "DCGM_FI_DEV_CLOCKS_EVENT_REASONS" in queries["clock_event_reasons"]
    assert "node_infiniband_port_errors_received_total" in queries["ib_rx_errors"]
    gpu = promql.gpu_sample("n", 1.0, {
        "util_pct": {("0", "H200"): 90.0},
        "nvlink_total": {("0",): 283203.0}, "clock_event_reasons": {("0",): 4.0}, "ecc_dbe": {("0",): 2.0},
    }, "prom:gpu")
    assert gpu is not None and gpu.gpus is not None
    [g0] = gpu.gpus
    assert g0.nvlink_bytes_per_s == pytest.approx(2.9e11, rel=0.01)  # 1000 KiB/s units
    assert g0.clock_event_reasons == 4 and g0.ecc_uncorrected_total == 2
    node = promql.node_sample("n", 1.0, {
        "ib_rx": {("mlx5_0", "1"): 1.0}, "ib_rx_errors": {("mlx5_0", "1"): 120.0},
        "ib_recoveries": {("mlx5_0", "1"): 4.0}, "ib_phys": {("mlx5_0", "1"): 2.0},
        "eth_rx": {("eth0",): 1.0}, "eth_rx_errors": {("eth0",): 2.0}, "eth_rx_drops": {("eth0",): 100.0},
    }, "prom:node")
    assert node is not None
    ports = {n.name: n for n in node.nics or []}
    assert ports["mlx5_0"].rx_errors_total == 120 and ports["mlx5_0"].link_recoveries_total == 4
    assert ports["mlx5_0"].physical_state == "polling"
    assert ports["eth0"].rx_errors_total == 2 and ports["eth0"].rx_drops_total == 100


def test_nothing_known_is_no_sample() -> None:
    assert promql.engine_sample("n", 1.0, {"steps_total": {(): None}}, "prom:engine") is None
    assert promql.node_sample("n", 1.0, {}, "prom:node") is None


_json = st.recursive(
    st.none() | st.booleans() | st.floats() | st.text(max_size=20),
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=12), kids, max_size=4),
    max_leaves=20,
)


@settings(max_examples=150, deadline=None)
@given(st.lists(_json, max_size=6), st.sampled_from(["util_pct", "eth_rx", "steps_total", "ib_rx"]))
def test_garbage_results_never_crash(result: list[object], key: str) -> None:
    grouped: promql.Grouped = {}
    tier = {"util_pct": "gpu", "eth_rx": "node", "ib_rx": "node", "steps_total": "engine"}[key]
    promql.group_instant(key, result, promql.subkeys(tier, key), grouped)  # type: ignore[arg-type]
    for node, fig in grouped.items():
        promql.BUILDERS[tier](node, 1.0, fig, "prom:x")


def test_namer_maps_ports_fqdns_and_cleans_discovered_names() -> None:
    namer = NodeNamer(["decode-01"], discover=False)
    assert namer("decode-01") == "decode-01"
    assert namer("decode-01.cluster.local") == "decode-01"
    assert namer("10.0.0.5") is None
    found = NodeNamer([], discover=True)
    assert found("evil\x1b[31m[bold]x") == "evil__31m_bold_x"


def refused_error() -> requests.ConnectionError:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    try:
        requests.get(f"http://127.0.0.1:{port}/", timeout=2)
    except requests.ConnectionError as exc:
        return exc
    raise AssertionError("a closed port answered")


def test_error_messages_are_short_and_carry_no_secret() -> None:
    assert describe_error(refused_error(), 5) == "connection refused"
    assert describe_error(requests.ReadTimeout("Read timed out"), 2.5) == "timed out after 2.5 s"
    secret = PrometheusApiClientException("HTTP Status Code 401 (b'bad token: Bearer abc123')")
    assert describe_error(secret, 5) == "rejected the credentials (HTTP 401)"
    assert describe_error(PrometheusApiClientException("HTTP Status Code 503 (b'')"), 5) == "answered HTTP 503"
    assert describe_error(ValueError("Expecting value"), 5) == (
        "answered something that is not a Prometheus API response"
    )
    assert redact_url("https://user:pw@prom:9090/x?token=1") == "https://***@prom:9090/x?token=***"


def test_credentials_from_env_or_file(tmp_path: Path) -> None:
    cfg = PrometheusConfig(url="http://p:9090", token_env="T")
    assert auth_headers(cfg, {"T": "abc\n"}) == {"Authorization": "Bearer abc"}
    with pytest.raises(PromSetupError, match=r"^environment variable T \(token_env\) is not set$"):
        auth_headers(cfg, {})
    raw = PrometheusConfig(url="http://p:9090", header_env="H", header_name="X-Auth")
    assert auth_headers(raw, {"H": "Basic Zm9v"}) == {"X-Auth": "Basic Zm9v"}
    missing = PrometheusConfig(url="http://p:9090", token_file=str(tmp_path / "none"))
    with pytest.raises(PromSetupError, match="No such file"):
        auth_headers(missing, {})


@pytest.mark.parametrize(
    ("prom", "field", "problem"),
    [
        ('selector = "cluster=\\"a\\"} or vector(1) or x{"', "prometheus.selector", "label matchers"),
        ('node_label = "bad-label"', "prometheus.node_label", "is not a Prometheus label name"),
        ('token_env = "A"\ntoken_file = "/x"', "prometheus", "give at most one of"),
        ("gpu_detail_every = 0", "prometheus.gpu_detail_every", "greater than or equal to 1"),
    ],
)
def test_layout_rejects_bad_prometheus_settings(prom: str, field: str, problem: str) -> None:
    text = f'[prometheus]\nurl = "http://p:9090"\n{prom}\n'
    with pytest.raises(LayoutError) as err:
        parse_layout(text, "x.toml")
    assert err.value.field == field and problem in err.value.problem


def test_layout_accepts_matchers_and_label_lists() -> None:
    layout = parse_layout(
        '[prometheus]\nurl = "http://p:9090"\nnode_label = ["Hostname", "instance"]\n'
        'selector = \'cluster="a", job=~"vllm.*"\'\n'
        '[[nodes]]\nname = "decode-01"\n'  # a layout without nodes (and no discover) is refused
    )
    assert layout.prometheus is not None and layout.prometheus.selector == 'cluster="a", job=~"vllm.*"'


def test_steps_are_kept_per_engine_so_the_fastest_engine_is_shown() -> None:
    queries = {q.key: q.promql for q in promql.QueryBuilder().engine()}
    assert queries["steps_by_engine"].startswith("sum by (infertop_node, engine, dp_rank)")
    grouped: promql.Grouped = {}
    promql.group_instant("steps_total", [
        {"metric": {"infertop_node": "n1"}, "value": [1.0, "75"]}], (), grouped)
    promql.group_instant("steps_by_engine", [
        {"metric": {"infertop_node": "n1", "engine": str(e)}, "value": [1.0, str(100 if e < 6 else 0)]}
        for e in range(8)], promql.subkeys("engine", "steps_by_engine"), grouped)
    sample = promql.engine_sample("n1", 1.0, grouped["n1"], "prom:engine")
    assert sample is not None and sample.engine is not None
    assert sample.engine.steps_by_engine_total == {f"engine={e}": (100.0 if e < 6 else 0.0) for e in range(8)}


def test_scoreboard_queries_and_their_results() -> None:
    """Latency buckets summed per node and `le`, the scoreboard's counters summed per node."""
    queries = {q.key: q.promql for q in promql.QueryBuilder().engine()}
    itl = queries["latency:itl"]
    assert itl.startswith("sum by (infertop_node, le)")
    assert "vllm:inter_token_latency_seconds_bucket or" in itl and "sglang:inter_token_latency_seconds_bucket" in itl
    assert "vllm:num_preemptions_total" in queries["preemptions_total"]
    assert promql.subkeys("engine", "latency:itl") == ("le",)
    grouped: promql.Grouped = {}
    promql.group_instant("generation_tokens_total", [
        {"metric": {"infertop_node": "n1"}, "value": [1.0, "100"]}], (), grouped)
    promql.group_instant("preemptions_total", [
        {"metric": {"infertop_node": "n1"}, "value": [1.0, "3"]}], (), grouped)
    promql.group_instant("latency:itl", [
        {"metric": {"infertop_node": "n1", "le": le}, "value": [1.0, v]}
        for le, v in (("+Inf", "100"), ("0.025", "10"), ("0.05", "90"))
    ], ("le",), grouped)
    promql.group_instant("latency:ttft", [  # no +Inf bucket: not a histogram to read
        {"metric": {"infertop_node": "n1", "le": "1"}, "value": [1.0, "4"]}], ("le",), grouped)
    sample = promql.engine_sample("n1", 5.0, grouped["n1"], "prom:engine")
    assert sample is not None and sample.engine is not None
    assert sample.engine.preemptions_total == 3.0
    assert sample.engine.latency_buckets == {"itl": ((0.025, 10.0), (0.05, 90.0), (float("inf"), 100.0))}


def test_copies_are_collapsed_by_the_replica_labels_but_not_inside_timestamp() -> None:
    b = promql.QueryBuilder(replica_labels=("job", "replica"), selector='cluster="a"')
    assert b.sel("up") == 'max without (job, replica) (up{cluster="a"})'
    assert b.sel("up", raw=True) == 'up{cluster="a"}'
    stamp = next(q for q in b.gpu() if q.key == "timestamp")
    # timestamp() of an aggregation is the evaluation time, not the scrape's
    assert "timestamp(DCGM_FI_DEV_GPU_UTIL{" in stamp.promql and "max without (job" not in stamp.promql
    power = next(q for q in b.gpu() if q.key == "power_w")
    assert 'max without (job, replica) (DCGM_FI_DEV_POWER_USAGE{cluster="a"})' in power.promql
    assert promql.QueryBuilder().sel("up") == "up"
