"""Exposition text for one simulated node: a vLLM V1 engine page, a dcgm-exporter page,
a node_exporter page — written with plain string formatting, in the exact shape the
real servers produce (HELP / TYPE lines, `_total` counters with `_created` series,
histograms with buckets), because building a `prometheus_client` registry per request
would cost far more at 1,024 nodes.
"""

from __future__ import annotations

from collections.abc import Callable

from infertop.demo.engine_extras import engine_extra_lines
from infertop.demo.pd_trouble import engine_info_lines, ethtool_families, xmit_wait_total
from infertop.demo.scenario import (
    BOND_MEMBER_GBPS,
    CAPPED_SM_CLOCK_MHZ,
    ETH_GBPS,
    GPU_MEM_MIB,
    GPU_MODEL,
    GPUS_PER_NODE,
    IB_GBPS,
    IB_PORTS,
    MODEL_NAME,
    NUM_SPEC_TOKENS,
    Gauges,
    SimNode,
)

_ITER_BUCKETS = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
_TTFT_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
_ITL_BUCKETS = (0.005, 0.01, 0.02, 0.04, 0.06, 0.1, 0.25, 0.5)


def _counter(out: list[str], name: str, help_: str, series: list[tuple[str, float]], created: float) -> None:
    out.append(f"# HELP {name}_total {help_}")
    out.append(f"# TYPE {name}_total counter")
    for labels, value in series:
        out.append(f"{name}_total{{{labels}}} {value:.1f}")
    out.append(f"# HELP {name}_created {help_}")
    out.append(f"# TYPE {name}_created gauge")
    for labels, _ in series:
        out.append(f"{name}_created{{{labels}}} {created:.6e}")


def _gauge(out: list[str], name: str, help_: str, labels: str, value: float) -> None:
    out.append(f"# HELP {name} {help_}")
    out.append(f"# TYPE {name} gauge")
    out.append(f"{name}{{{labels}}} {value}")


def _histogram(
    out: list[str], name: str, help_: str, labels: str, buckets: tuple[float, ...],
    count: float, total: float, created: float,
) -> None:
    """A histogram whose observations all sit near their mean (enough for a monitor)."""
    mean = total / count if count else 0.0
    out.append(f"# HELP {name} {help_}")
    out.append(f"# TYPE {name} histogram")
    for le in buckets:
        share = 0.0 if mean > le else (0.9 if mean > le / 2 else 1.0)
        out.append(f'{name}_bucket{{{labels},le="{float(le)}"}} {count * share:.1f}')
    out.append(f'{name}_bucket{{{labels},le="+Inf"}} {count:.1f}')
    out.append(f"{name}_count{{{labels}}} {count:.1f}")
    out.append(f"{name}_sum{{{labels}}} {total:.6f}")
    out.append(f"# HELP {name}_created {help_}")
    out.append(f"# TYPE {name}_created gauge")
    out.append(f"{name}_created{{{labels}}} {created:.6e}")


_HELP = {
    "vllm:num_requests_running": "Number of requests in model execution batches.",
    "vllm:num_requests_waiting": "Number of requests waiting to be processed.",
    "vllm:kv_cache_usage_perc": "KV-cache usage. 1 means 100 percent usage.",
    "vllm:num_preemptions": "Cumulative number of preemption from the engine.",
    "vllm:prompt_tokens": "Number of prefill tokens processed.",
    "vllm:generation_tokens": "Number of generation tokens processed.",
    "vllm:request_success": "Count of successfully processed requests.",
    "vllm:prefix_cache_queries": "Prefix cache queries, in terms of number of queried tokens.",
    "vllm:prefix_cache_hits": "Prefix cache hits, in terms of number of cached tokens.",
    "vllm:iteration_tokens_total": "Histogram of number of tokens per engine_step.",
    "vllm:time_to_first_token_seconds": "Histogram of time to first token in seconds.",
    "vllm:inter_token_latency_seconds": "Histogram of inter-token latency in seconds.",
    "vllm:spec_decode_num_drafts": "Number of spec decoding drafts.",
    "vllm:spec_decode_num_draft_tokens": "Number of draft tokens.",
    "vllm:spec_decode_num_accepted_tokens": "Number of accepted tokens.",
    "vllm:spec_decode_num_accepted_tokens_per_pos": "Accepted tokens per draft position.",
}


def engine_page(node: SimNode, now: float) -> str:
    g = node.advance(now)
    e = node.engine
    created = node.engine_started_at
    lab = f'engine="0",model_name="{MODEL_NAME}"'
    out: list[str] = []

    def gauge(name: str, value: float) -> None:
        _gauge(out, name, _HELP[name], lab, value)

    def counter(name: str, series: list[tuple[str, float]]) -> None:
        _counter(out, name, _HELP[name], series, created)

    def histogram(name: str, buckets: tuple[float, ...], count: float, total: float) -> None:
        _histogram(out, name, _HELP[name], lab, buckets, count, total, created)

    gauge("vllm:num_requests_running", g.running)
    gauge("vllm:num_requests_waiting", g.waiting)
    gauge("vllm:kv_cache_usage_perc", round(g.kv_usage, 4))
    counter("vllm:num_preemptions", [(lab, 0.0)])
    counter("vllm:prompt_tokens", [(lab, e.prompt)])
    counter("vllm:generation_tokens", [(lab, e.generation)])
    counter("vllm:request_success", [
        (f'{lab},finished_reason="stop"', e.finished_stop),
        (f'{lab},finished_reason="length"', e.finished_length),
        (f'{lab},finished_reason="abort"', 0.0),
    ])
    counter("vllm:prefix_cache_queries", [(lab, e.prefix_queries)])
    counter("vllm:prefix_cache_hits", [(lab, e.prefix_hits)])
    histogram("vllm:iteration_tokens_total", _ITER_BUCKETS, e.steps, e.iteration_tokens)
    histogram("vllm:time_to_first_token_seconds", _TTFT_BUCKETS, e.ttft_count, e.ttft_sum)
    histogram("vllm:inter_token_latency_seconds", _ITL_BUCKETS, e.itl_count, e.itl_sum)
    if node.plan.role == "decode":  # speculative decoding runs on the decode pool only
        counter("vllm:spec_decode_num_drafts", [(lab, e.drafts)])
        counter("vllm:spec_decode_num_draft_tokens", [(lab, e.draft_tokens)])
        counter("vllm:spec_decode_num_accepted_tokens", [(lab, e.accepted)])
        counter("vllm:spec_decode_num_accepted_tokens_per_pos", [
            (f'{lab},position="{i}"', e.accepted_per_pos[i]) for i in range(NUM_SPEC_TOKENS)
        ])
    out += engine_extra_lines(node, lab, created)  # the scoreboard's series
    out += engine_info_lines(node, 1)  # settings and health (pd_trouble.py)
    return "\n".join(out) + "\n"


_DCGM = (
    ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz)."),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C)."),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W)."),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", "Total energy consumption since boot (in mJ)."),
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."),
    ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB)."),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB)."),
    ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered."),
    ("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "gauge", "Current clock throttle reasons."),
    ("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", "counter", "Total NVLink flow-control CRC errors."),
    # with the recommended counters (docs/dcgm-counters.csv) the demo's nodes are fully
    # seen: nothing on them is blind unless a scenario makes it so
    ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter", "Total number of double-bit volatile ECC errors."),
    ("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "counter", "Total NVLink bandwidth, all lanes."),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge", "Ratio of cycles the tensor (HMMA) pipe is active."),
    ("DCGM_FI_PROF_SM_ACTIVE", "gauge", "The ratio of cycles an SM has at least 1 warp assigned."),
)
_SW_POWER_CAP = 0x4  # NVML's clock-event bit (DCGM passes NVML's mask through)


def dcgm_gpu_values(node: SimNode, g: Gauges, gpu: int) -> dict[str, float]:
    """The scenario's figures for one GPU, by dcgm field (draws util noise: once per GPU)."""
    used_mib = 0.02 * GPU_MEM_MIB if node.plan.trouble == "idle" else 0.93 * GPU_MEM_MIB
    util = node.gpu_util(g, gpu)
    capped = node.power_capped(gpu)
    sm_active = node.sm_active_pct(util, gpu)
    return {
        "DCGM_FI_DEV_SM_CLOCK": CAPPED_SM_CLOCK_MHZ if capped else 1965,
        "DCGM_FI_DEV_GPU_TEMP": round(34 + 0.42 * util),
        "DCGM_FI_DEV_POWER_USAGE": round(node.gpu_power_w(util, gpu), 3),
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": round(node.energy_mj[gpu]),
        "DCGM_FI_DEV_GPU_UTIL": round(util),
        "DCGM_FI_DEV_FB_FREE": round(GPU_MEM_MIB - used_mib),
        "DCGM_FI_DEV_FB_USED": round(used_mib),
        "DCGM_FI_DEV_XID_ERRORS": 0,
        "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS": _SW_POWER_CAP if capped else 0,
        "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL": 0,
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": 0,
        "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL": round(util * 500),  # 1000-KiB/s units
        # the tensor pipe works only while the SMs do: ~71 % of SM activity (util / 160 on
        # a working GPU), lower on the ranks waiting for the straggler, none while spinning
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": 0.0 if node.waiting(gpu) else round(sm_active * 0.0071, 4),
        "DCGM_FI_PROF_SM_ACTIVE": round(sm_active / 100.0, 4),
    }


def dcgm_labels(node: SimNode, gpu: int) -> str:
    return (
        f'gpu="{gpu}",UUID="GPU-{node.plan.index:08x}-{gpu:04x}-4000-8000-00000000b200",'
        f'pci_bus_id="00000000:{0x18 + gpu * 0x11:02X}:00.0",device="nvidia{gpu}",'
        f'modelName="{GPU_MODEL}",Hostname="{node.plan.name}",DCGM_FI_DRIVER_VERSION="580.65.06"'
    )


def dcgm_page(node: SimNode, now: float) -> str:
    g = node.advance(now)
    rows: dict[str, list[str]] = {name: [] for name, _, _ in _DCGM}
    for gpu in range(GPUS_PER_NODE):
        labels = dcgm_labels(node, gpu)
        for name, value in dcgm_gpu_values(node, g, gpu).items():
            rows[name].append(f"{name}{{{labels}}} {value}")
    out: list[str] = []
    for name, kind, help_ in _DCGM:
        out.append(f"# HELP {name} {help_}")
        out.append(f"# TYPE {name} {kind}")
        out.extend(rows[name])
    return "\n".join(out) + "\n"


def node_exporter_page(node: SimNode, now: float) -> str:
    node.advance(now)
    nb = node.nic_bytes
    out: list[str] = []
    i = node.plan.index
    bond_mac = f"b8:3f:d2:{i >> 8 & 0xff:02x}:{i & 0xff:02x}:10"
    netdevs = {
        "lo": ("00:00:00:00:00:00", "unknown", 772, None),
        "eth0": (f"b8:3f:d2:{i >> 8 & 0xff:02x}:{i & 0xff:02x}:01", "up", 1, ETH_GBPS),
        "eth1": (bond_mac, "up", 1, BOND_MEMBER_GBPS),
        "eth2": (bond_mac, "up", 1, BOND_MEMBER_GBPS),
        "bond0": (bond_mac, "up", 1, 2 * BOND_MEMBER_GBPS),
    }
    out.append("# HELP node_bonding_active Number of active slaves per bonding interface.")
    out.append("# TYPE node_bonding_active gauge")
    out.append('node_bonding_active{master="bond0"} 2')
    out.append("# HELP node_bonding_slaves Number of configured slaves per bonding interface.")
    out.append("# TYPE node_bonding_slaves gauge")
    out.append('node_bonding_slaves{master="bond0"} 2')

    def ib(name: str, help_: str, kind: str, value_of: Callable[[str], object]) -> None:
        out.append(f"# HELP {name} {help_}")
        out.append(f"# TYPE {name} {kind}")
        for port in IB_PORTS:
            out.append(f'{name}{{device="{port}",port="1"}} {value_of(port)}')

    ib("node_infiniband_state_id", "State of the InfiniBand port (0: no change, 1: down, 2: init, 3: armed, "
       "4: active, 5: act defer)", "gauge", lambda p: 1 if node.port_down(p) else 4)
    ib("node_infiniband_physical_state_id", "Physical state of the InfiniBand port (0: no change, 1: sleep, "
       "2: polling, 3: disable, 4: shift, 5: link up, 6: link error recover, 7: phytest)", "gauge",
       lambda p: 3 if node.port_down(p) else 5)
    ib("node_infiniband_rate_bytes_per_second", "Maximum signal transfer rate", "gauge",
       lambda p: f"{IB_GBPS * 1e9 / 8:.0f}")
    ib("node_infiniband_port_data_received_bytes_total", "Number of data octets received on all links",
       "counter", lambda p: f"{nb[p][0]:.0f}")
    ib("node_infiniband_port_data_transmitted_bytes_total", "Number of data octets transmitted on all links",
       "counter", lambda p: f"{nb[p][1]:.0f}")
    ib("node_infiniband_link_downed_total", "Number of times the link failed to recover from an error state "
       "and went down", "counter", lambda p: 1 if node.port_down(p) else 0)
    ib("node_infiniband_port_errors_received_total", "Number of packets containing an error that were "
       "received on this port", "counter", lambda p: 0)
    ib("node_infiniband_link_error_recovery_total", "Number of times the link successfully recovered from "
       "an error state", "counter", lambda p: 0)
    ib("node_infiniband_port_transmit_wait_total", "Number of ticks during which the port had data to "
       "transmit but no data was sent during the entire tick", "counter",
       lambda p: f"{xmit_wait_total(node, p, now):.0f}")
    out.append("# HELP node_network_info Non-numeric data from /sys/class/net/<iface>, value is always 1.")
    out.append("# TYPE node_network_info gauge")
    for dev, (mac, state, _, _) in netdevs.items():
        out.append(f'node_network_info{{address="{mac}",adminstate="up",broadcast="ff:ff:ff:ff:ff:ff",'
                   f'device="{dev}",duplex="full",ifalias="",operstate="{state}"}} 1')
    out.append("# HELP node_network_protocol_type Network device property: protocol_type.")
    out.append("# TYPE node_network_protocol_type gauge")
    for dev, (_, _, arp, _) in netdevs.items():
        out.append(f'node_network_protocol_type{{device="{dev}"}} {arp}')
    for name, direction in (("receive", 0), ("transmit", 1)):
        out.append(f"# HELP node_network_{name}_bytes_total Network device statistic {name}_bytes.")
        out.append(f"# TYPE node_network_{name}_bytes_total counter")
        for dev in netdevs:
            out.append(f'node_network_{name}_bytes_total{{device="{dev}"}} {nb[dev][direction]:.0f}')
    for name in ("receive_errs", "transmit_errs"):
        out.append(f"# HELP node_network_{name}_total Network device statistic {name}.")
        out.append(f"# TYPE node_network_{name}_total counter")
        for dev in netdevs:
            out.append(f'node_network_{name}_total{{device="{dev}"}} 0')
    out.append("# HELP node_network_speed_bytes Network device property: speed_bytes.")
    out.append("# TYPE node_network_speed_bytes gauge")
    for dev, (_, _, _, gbps) in netdevs.items():
        if gbps is not None:
            out.append(f'node_network_speed_bytes{{device="{dev}"}} {gbps * 1e9 / 8:.0f}')
    out.append("# HELP node_network_up Value is 1 if operstate is 'up', 0 otherwise.")
    out.append("# TYPE node_network_up gauge")
    for dev, (_, state, _, _) in netdevs.items():
        out.append(f'node_network_up{{device="{dev}"}} {1 if state == "up" else 0}')
    # as node_exporter: carrier 1 where the link is there (loopback's `unknown` too), no
    # series for a down device (its carrier file answers EINVAL)
    out.append("# HELP node_network_carrier Network device property: carrier.")
    out.append("# TYPE node_network_carrier gauge")
    for dev, (_, state, _, _) in netdevs.items():
        if state != "down":
            out.append(f'node_network_carrier{{device="{dev}"}} 1')
    out.append(ethtool_families(node, now))  # pause frames (pd_trouble.py)
    return "\n".join(out) + "\n"
