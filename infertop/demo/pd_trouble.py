"""The demo's path trouble (issue 36): one congested prefill → decode pair and one
drifted node, beside the scenario's rotating engine restarts (scenario.py).

- congested: prefill-01 and decode-02 (by role and ordinal, like scenario.TROUBLE).
  Their eth0 sees PFC pause frames rising (node_exporter's ethtool collector names,
  mlx5's rx/tx_prio3_pause), their mlx5_0 IB port's port_xmit_wait rises, and the
  decode node's NIXL transfers take `CONGESTED_SLOWDOWN` times as long.
- drifted: decode-05's engines run with another KV block size (vLLM's
  vllm:cache_config_info label block_size): a config-drift finding naming it.

Every engine page also carries vLLM's cache_config_info and engine_healthy gauges.
"""

from __future__ import annotations

from infertop.demo.scenario import MODEL_NAME, SimNode

CONGESTED: frozenset[tuple[str, int]] = frozenset({("prefill", 1), ("decode", 2)})
DRIFTED: tuple[str, int] = ("decode", 5)
CONGESTED_SLOWDOWN = 8.0
PAUSE_PER_S = 3000.0  # PFC pause frames each way on a congested node's eth0
XMIT_WAIT_PER_S = 2e6  # IB ticks waited per second on a congested node's mlx5_0
QUIET_PAUSE_PER_S = 0.02  # the odd pause frame of a healthy fabric
ECN_PER_S = 800.0  # ECN-marked packets a second received on a congested node's eth0
# vLLM 0.33 CacheConfig.metrics_info() of the demo's deployment (every value a string)
CACHE_CONFIG: dict[str, str] = {
    "block_size": "64",
    "cache_dtype": "fp8_e4m3",
    "calculate_kv_scales": "False",
    "enable_prefix_caching": "True",
    "gpu_memory_utilization": "0.92",
    "is_attention_free": "False",
    "num_gpu_blocks": "41870",
    "prefix_caching_hash_algo": "sha256",
    "sliding_window": "None",
    "swap_space": "4",
}


def _where(node: SimNode) -> tuple[str, int]:
    return node.plan.role, node.plan.ordinal


def congested(node: SimNode) -> bool:
    return _where(node) in CONGESTED


def drifted(node: SimNode) -> bool:
    return _where(node) == DRIFTED


def kv_slowdown(node: SimNode) -> float:
    """How many times longer the node's KV transfers take."""
    return CONGESTED_SLOWDOWN if congested(node) else 1.0


def node_settings(node: SimNode) -> dict[str, str]:
    settings = dict(CACHE_CONFIG)
    if drifted(node):
        settings["block_size"] = "32"
        settings["num_gpu_blocks"] = "83740"
    return settings


def engine_info_lines(node: SimNode, engines: int) -> list[str]:
    """vLLM's info and health gauges for an engine page of `engines` DP engines."""
    settings = node_settings(node)
    out = ["# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig",
           "# TYPE vllm:cache_config_info gauge"]
    for i in range(engines):
        labels = ",".join(f'{k}="{v}"' for k, v in sorted({**settings, "engine": str(i)}.items()))
        out.append(f"vllm:cache_config_info{{{labels}}} 1.0")
    out += ["# HELP vllm:engine_healthy Engine health (1 healthy, 0 not).",
            "# TYPE vllm:engine_healthy gauge"]
    out += [f'vllm:engine_healthy{{engine="{i}",model_name="{MODEL_NAME}"}} 1.0' for i in range(engines)]
    return out


def xmit_wait_total(node: SimNode, port: str, now: float) -> float:
    if congested(node) and port == "mlx5_0":
        return round(XMIT_WAIT_PER_S * max(now - node.started_at, 0.0))
    return 0.0


def ethtool_families(node: SimNode, now: float) -> str:
    """node_exporter's ethtool collector (--collector.ethtool) for eth0's pause and ECN counters:
    `node_ethtool_<stat>` with rx / tx written received / transmitted, untyped."""
    t = max(now - node.started_at, 0.0)
    rate = PAUSE_PER_S if congested(node) else QUIET_PAUSE_PER_S
    stats = {
        "rx_prio3_pause": round(rate * t),
        "tx_prio3_pause": round(rate * t * 0.8),
        "rx_pause_ctrl_phy": 0,
        "tx_pause_ctrl_phy": 0,
        # mlx5e_sw_stats' ECN-marked packets received: marks rise where the fabric congests
        "rx_ecn_mark": round((ECN_PER_S if congested(node) else 0.0) * t),
    }
    out = []
    for stat, value in stats.items():
        name = "node_ethtool_" + stat.replace("rx_", "received_", 1).replace("tx_", "transmitted_", 1)
        out += [f"# HELP {name} Network interface {stat}", f"# TYPE {name} untyped",
                f'{name}{{device="eth0"}} {value}']
    return "\n".join(out)
