"""Real-size pages for the demo: what a DeepInfer node's exporters really serve.

`render.py` writes ~100-line pages with just the families infertop reads. A real node
serves far more, and the monitor's cost is set by what it must wade through:

- the engine: one vLLM API server fronting 8 data-parallel engines (DP attention on 8
  GPUs), every stock vLLM family once per engine (`engine` label), histograms with
  vLLM's own bucket bounds (the definitions `tests/fixtures/vllm_dp_page.py` feeds to
  `prometheus_client`; a test checks both pages have the same families and buckets):
  ~2,900 lines, ~330 KB;
- dcgm-exporter: its default counter set (`etc/default-counters.csv`) for 8 GPUs, plus
  the fields a trial deployment adds (throttle reasons, NVLink CRC errors, tensor-pipe
  activity): ~250 lines;
- node_exporter on a host with many interfaces (bond, storage NICs, a container bridge
  and a veth per pod), 224 logical CPUs, disks, filesystems and 4 InfiniBand ports:
  ~3,900 lines.

The demo's truth is unchanged: the figures the scenario drives come out of these pages
exactly as out of the small ones. Counters are split over the 8 engines in whole units
of their last printed digit (engine i gets floor((q + i) / 8) of q units), so every
engine's counter only ever rises and the engines sum to the scenario's figure; the step
count is the same on every engine (they step in lockstep); KV-cache use is the same on
every engine (the profile averages it). No renderer here draws from the node's random
stream, so the scenario's noise is what it was.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any
from weakref import WeakKeyDictionary

from prometheus_client.utils import floatToGoString

from infertop.demo.render import dcgm_gpu_values, dcgm_labels
from infertop.demo.scenario import (
    BOND_MEMBER_GBPS,
    ETH_GBPS,
    GPUS_PER_NODE,
    IB_GBPS,
    IB_PORTS,
    MODEL_NAME,
    NUM_SPEC_TOKENS,
    SimNode,
)

ENGINES = 8  # data-parallel engines behind one API server (DP attention on 8 GPUs)
MAX_MODEL_LEN = 163840  # DeepSeek-V3 context
ITERATION_TOKENS_BUCKETS = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
TTFT_BUCKETS = (
    0.001,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
    160.0,
    640.0,
    2560.0,
)
TPOT_BUCKETS = (
    0.01,
    0.025,
    0.05,
    0.075,
    0.1,
    0.15,
    0.2,
    0.3,
    0.4,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
)
PREFILL_TOKEN_BUCKETS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)
REQUEST_LATENCY_BUCKETS = (
    0.3,
    0.5,
    0.8,
    1.0,
    1.5,
    2.0,
    2.5,
    5.0,
    10.0,
    15.0,
    20.0,
    30.0,
    40.0,
    50.0,
    60.0,
    120.0,
    240.0,
    480.0,
    960.0,
    1920.0,
    7680.0,
)


def build_1_2_5_buckets(max_value: int) -> tuple[int, ...]:
    """vLLM's `build_1_2_5_buckets`: 1, 2, 5, 10, 20, 50, … up to max_value."""
    out: list[int] = []
    exponent = 0
    while True:
        for mantissa in (1, 2, 5):
            value = mantissa * 10**exponent
            if value > max_value:
                return tuple(out)
            out.append(value)
        exponent += 1


LEN_BUCKETS = build_1_2_5_buckets(MAX_MODEL_LEN)

# vLLM's histogram families (vllm/v1/metrics/loggers.py), in registration order
VLLM_HISTOGRAMS: tuple[tuple[str, str, tuple[float, ...]], ...] = (
    ("vllm:request_prompt_tokens", "Number of prefill tokens processed.", LEN_BUCKETS),
    ("vllm:request_generation_tokens", "Number of generation tokens processed.", LEN_BUCKETS),
    (
        "vllm:iteration_tokens_total",
        "Histogram of number of tokens per engine_step.",
        ITERATION_TOKENS_BUCKETS,
    ),
    (
        "vllm:request_max_num_generation_tokens",
        "Histogram of maximum number of requested generation tokens.",
        LEN_BUCKETS,
    ),
    ("vllm:request_params_n", "Histogram of the n request parameter.", (1, 2, 5, 10, 20)),
    ("vllm:request_params_max_tokens", "Histogram of the max_tokens request parameter.", LEN_BUCKETS),
    ("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", TTFT_BUCKETS),
    ("vllm:time_per_output_token_seconds", "Histogram of time per output token in seconds.", TPOT_BUCKETS),
    ("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", TPOT_BUCKETS),
    (
        "vllm:time_per_prefill_token_request_seconds",
        "Time spent per token during prefill  phase in seconds",
        PREFILL_TOKEN_BUCKETS,
    ),
    (
        "vllm:e2e_request_latency_seconds",
        "Histogram of e2e request latency in seconds.",
        REQUEST_LATENCY_BUCKETS,
    ),
    (
        "vllm:request_queue_time_seconds",
        "Histogram of time spent in WAITING phase for request.",
        REQUEST_LATENCY_BUCKETS,
    ),
    (
        "vllm:request_inference_time_seconds",
        "Histogram of time spent in RUNNING phase for request.",
        REQUEST_LATENCY_BUCKETS,
    ),
    (
        "vllm:request_prefill_time_seconds",
        "Histogram of time spent in PREFILL phase for request.",
        REQUEST_LATENCY_BUCKETS,
    ),
    (
        "vllm:request_decode_time_seconds",
        "Histogram of time spent in DECODE phase for request.",
        REQUEST_LATENCY_BUCKETS,
    ),
)
_HELP = {
    "vllm:num_requests_running": "Number of requests in model execution batches.",
    "vllm:num_requests_waiting": "Number of requests waiting to be processed.",
    "vllm:gpu_cache_usage_perc": "GPU KV-cache usage. 1 means 100 percent usage."
    "DEPRECATED: Use vllm:kv_cache_usage_perc instead.",
    "vllm:kv_cache_usage_perc": "KV-cache usage. 1 means 100 percent usage.",
    "vllm:gpu_prefix_cache_queries": "GPU prefix cache queries, in terms of number of queried"
    "tokens. DEPRECATED: Use vllm:prefix_cache_queries instead.",
    "vllm:gpu_prefix_cache_hits": "GPU prefix cache hits, in terms of number of cached "
    "tokens. DEPRECATED: Use vllm:prefix_cache_hits instead.",
    "vllm:prefix_cache_queries": "Prefix cache queries, in terms of number of queried tokens.",
    "vllm:prefix_cache_hits": "Prefix cache hits, in terms of number of cached tokens.",
    "vllm:num_preemptions": "Cumulative number of preemption from the engine.",
    "vllm:prompt_tokens": "Number of prefill tokens processed.",
    "vllm:generation_tokens": "Number of generation tokens processed.",
    "vllm:spec_decode_num_drafts": "Number of spec decoding drafts.",
    "vllm:spec_decode_num_draft_tokens": "Number of draft tokens.",
    "vllm:spec_decode_num_accepted_tokens": "Number of accepted tokens.",
    "vllm:spec_decode_num_accepted_tokens_per_pos": "Accepted tokens per draft position.",
    "vllm:request_success": "Count of successfully processed requests.",
}


def _tenths(units: int) -> str:
    return f"{units // 10}.{units % 10}"


def _micros(units: int) -> str:
    return f"{units // 1_000_000}.{units % 1_000_000:06d}"


def split(total: float, scale: int = 10, engines: int = ENGINES) -> list[int]:
    """`total` in whole 1/scale units, over the engines: engine i gets floor((q + i) / n).
    Each share only rises when the total does, and the shares sum to q exactly."""
    q = max(0, round(total * scale))
    return [(q + i) // engines for i in range(engines)]


# Series no profile reads are redrawn every REFRESH_S rather than on every request, so
# the demo can serve 128 real-size nodes a second from one process on a small machine;
# their counters still only rise.
REFRESH_S = 10.0
_BLOCKS: WeakKeyDictionary[SimNode, dict[str, tuple[float, str]]] = WeakKeyDictionary()


def _cached(node: SimNode, key: str, now: float, make: Callable[[], str]) -> str:
    blocks = _BLOCKS.setdefault(node, {})
    hit = blocks.get(key)
    if hit is None or not hit[0] - REFRESH_S <= now < hit[0]:
        hit = (now + REFRESH_S, make())
        blocks[key] = hit
    return hit[1]


def _histogram(name: str, help_: str, buckets: tuple[float, ...], heads: list[str], model: str,
               counts: list[int], sums: list[int], created: str) -> list[str]:
    """One histogram family, 8 engines: counts in tenths, sums in micros; observations
    sit near their mean (enough for a monitor)."""
    out = [f"# HELP {name} {help_}", f"# TYPE {name} histogram"]
    for head, count, total in zip(heads, counts, sums, strict=True):
        mean = total / 1_000_000 / (count / 10) if count else 0.0
        all_in, most_in = _tenths(count), _tenths(count * 9 // 10)
        out.extend(
            f'{name}_bucket{{{head},le="{float(le)}",{model}}} '
            + ("0.0" if mean > le else most_in if mean > le / 2 else all_in)
            for le in buckets
        )
        out.append(f'{name}_bucket{{{head},le="+Inf",{model}}} {all_in}')
        out.append(f"{name}_count{{{head},{model}}} {all_in}")
        out.append(f"{name}_sum{{{head},{model}}} {_micros(total)}")
    out.append(f"# HELP {name}_created {help_}")
    out.append(f"# TYPE {name}_created gauge")
    out.extend(f"{name}_created{{{head},{model}}} {created}" for head in heads)
    return out


def _histogram_text(*args: Any) -> str:
    return "\n".join(_histogram(*args))


class _Page:
    """Lines in exposition order, families as prometheus_client writes them."""

    def __init__(self) -> None:
        self.out: list[str] = []

    def family(self, name: str, help_: str, kind: str) -> None:
        self.out.append(f"# HELP {name} {help_}")
        self.out.append(f"# TYPE {name} {kind}")

    def text(self) -> str:
        return "\n".join(self.out) + "\n"


def engine_page(node: SimNode, now: float) -> str:
    """The vLLM page of one node with 8 DP engines."""
    g = node.advance(now)
    e = node.engine
    # label names sorted, as prometheus_client writes them
    heads = [f'engine="{i}"' for i in range(ENGINES)]
    model = f'model_name="{MODEL_NAME}"'
    labels = [f"{head},{model}" for head in heads]
    created = floatToGoString(node.engine_started_at)
    page = _Page()
    out = page.out

    def gauge(name: str, values: list[str]) -> None:
        page.family(name, _HELP[name], "gauge")
        out.extend(f"{name}{{{lab}}} {v}" for lab, v in zip(labels, values, strict=True))

    def counter(name: str, per_engine: list[list[tuple[str, str]]]) -> None:
        """per_engine[i]: (labels, value) of engine i's series."""
        page.family(f"{name}_total", _HELP[name], "counter")
        for series in per_engine:
            out.extend(f"{name}_total{{{lab}}} {v}" for lab, v in series)
        page.family(f"{name}_created", _HELP[name], "gauge")
        for series in per_engine:
            out.extend(f"{name}_created{{{lab}}} {created}" for lab, _ in series)

    def plain(name: str, total: float) -> None:
        counter(name, [[(lab, _tenths(q))] for lab, q in zip(labels, split(total), strict=True)])

    running, waiting = split(g.running, 1), split(g.waiting, 1)
    kv = repr(round(g.kv_usage, 4))
    gauge("vllm:num_requests_running", [f"{r}.0" for r in running])
    gauge("vllm:num_requests_waiting", [f"{w}.0" for w in waiting])
    gauge("vllm:gpu_cache_usage_perc", [kv] * ENGINES)
    gauge("vllm:kv_cache_usage_perc", [kv] * ENGINES)
    for name, total in (
        ("vllm:gpu_prefix_cache_queries", e.prefix_queries),
        ("vllm:gpu_prefix_cache_hits", e.prefix_hits),
        ("vllm:prefix_cache_queries", e.prefix_queries),
        ("vllm:prefix_cache_hits", e.prefix_hits),
        ("vllm:num_preemptions", 0.0),
        ("vllm:prompt_tokens", e.prompt),
        ("vllm:generation_tokens", e.generation),
    ):
        plain(name, total)
    if node.plan.role == "decode":  # speculative decoding runs on the decode pool only
        plain("vllm:spec_decode_num_drafts", e.drafts)
        plain("vllm:spec_decode_num_draft_tokens", e.draft_tokens)
        plain("vllm:spec_decode_num_accepted_tokens", e.accepted)
        per_pos = [split(e.accepted_per_pos[i]) for i in range(NUM_SPEC_TOKENS)]
        counter(
            "vllm:spec_decode_num_accepted_tokens_per_pos",
            [
                [
                    (f'{labels[engine]},position="{i}"', _tenths(per_pos[i][engine]))
                    for i in range(NUM_SPEC_TOKENS)
                ]
                for engine in range(ENGINES)
            ],
        )
    stop, length = split(e.finished_stop), split(e.finished_length)
    counter(
        "vllm:request_success",
        [
            [
                (f'{heads[i]},finished_reason="{reason}",{model}', value)
                for reason, value in (
                    ("stop", _tenths(stop[i])),
                    ("length", _tenths(length[i])),
                    ("abort", "0.0"),
                )
            ]
            for i in range(ENGINES)
        ],
    )
    finished = split(e.finished_stop + e.finished_length)
    itl_count, itl_sum = split(e.itl_count), split(e.itl_sum, 1_000_000)
    # what the scenario drives: (count per engine in tenths, sum per engine in micros)
    driven: dict[str, tuple[list[int], list[int]]] = {
        "vllm:iteration_tokens_total": (
            [round(e.steps * 10)] * ENGINES,
            split(e.iteration_tokens, 1_000_000),
        ),
        "vllm:time_to_first_token_seconds": (split(e.ttft_count), split(e.ttft_sum, 1_000_000)),
        "vllm:inter_token_latency_seconds": (itl_count, itl_sum),
        "vllm:time_per_output_token_seconds": (itl_count, itl_sum),
    }
    # the rest follow the finished requests, with typical means
    typical = {
        "vllm:request_prompt_tokens": 3000.0,
        "vllm:request_generation_tokens": 900.0,
        "vllm:request_max_num_generation_tokens": 4096.0,
        "vllm:request_params_n": 1.0,
        "vllm:request_params_max_tokens": 4096.0,
        "vllm:time_per_prefill_token_request_seconds": 0.004,
        "vllm:e2e_request_latency_seconds": 42.0,
        "vllm:request_queue_time_seconds": 0.4,
        "vllm:request_inference_time_seconds": 41.0,
        "vllm:request_prefill_time_seconds": 0.9,
        "vllm:request_decode_time_seconds": 40.0,
    }
    for name, help_, buckets in VLLM_HISTOGRAMS:
        if name in driven:
            counts, sums = driven[name]
            out.extend(_histogram(name, help_, buckets, heads, model, counts, sums, created))
            continue
        # not read by any profile: redrawn every REFRESH_S (cheap pages for 128+ nodes)
        sums = [round(c / 10 * typical[name] * 1_000_000) for c in finished]
        out.append(_cached(node, name, now, partial(_histogram_text, name, help_, buckets, heads, model,
                                                    finished, sums, created)))
    return page.text()


# ---------------------------------------------------------------------------- dcgm-exporter

# etc/default-counters.csv of dcgm-exporter 4.x, then what a trial deployment adds
DCGM_DEFAULT: tuple[tuple[str, str, str], ...] = (
    ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz)."),
    ("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz)."),
    ("DCGM_FI_DEV_MEMORY_TEMP", "gauge", "Memory temperature (in C)."),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C)."),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W)."),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", "Total energy consumption since boot (in mJ)."),
    (
        "DCGM_FI_DEV_PCIE_TX_THROUGHPUT",
        "counter",
        "Total number of bytes transmitted through PCIe TX (in KB) via NVML.",
    ),
    (
        "DCGM_FI_DEV_PCIE_RX_THROUGHPUT",
        "counter",
        "Total number of bytes received through PCIe RX (in KB) via NVML.",
    ),
    ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "Total number of PCIe retries."),
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %)."),
    ("DCGM_FI_DEV_ENC_UTIL", "gauge", "Encoder utilization (in %)."),
    ("DCGM_FI_DEV_DEC_UTIL", "gauge", "Decoder utilization (in %)."),
    ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered."),
    ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB)."),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB)."),
    (
        "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
        "counter",
        "Total number of NVLink bandwidth counters for all lanes",
    ),
    ("DCGM_FI_DEV_VGPU_LICENSE_STATUS", "gauge", "vGPU License status"),
    (
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
        "counter",
        "Number of remapped rows for uncorrectable errors",
    ),
    ("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "counter", "Number of remapped rows for correctable errors"),
    ("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "Whether remapping of rows has failed"),
    # added by the trial's counters file
    ("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "gauge", "Current clock throttle reasons."),
    (
        "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
        "counter",
        "Total number of NVLink flow-control CRC errors.",
    ),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge", "Ratio of cycles the tensor (HMMA) pipe is active."),
)


def dcgm_page(node: SimNode, now: float) -> str:
    """dcgm-exporter's default counters (and the trial's additions) for the node's 8 GPUs."""
    g = node.advance(now)
    up = max(now - node.started_at, 0.0)
    rows: dict[str, list[str]] = {name: [] for name, _, _ in DCGM_DEFAULT}
    for gpu in range(GPUS_PER_NODE):
        values: dict[str, object] = dict(dcgm_gpu_values(node, g, gpu))  # the scenario's figures
        util = float(values["DCGM_FI_DEV_GPU_UTIL"])  # type: ignore[arg-type]
        values |= {
            "DCGM_FI_DEV_MEM_CLOCK": 3996,
            "DCGM_FI_DEV_MEMORY_TEMP": round(30 + 0.3 * util),
            "DCGM_FI_DEV_PCIE_TX_THROUGHPUT": round(2.1e9 + 18_000 * up + gpu * 1e6),
            "DCGM_FI_DEV_PCIE_RX_THROUGHPUT": round(3.4e9 + 26_000 * up + gpu * 1e6),
            "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": 0,
            "DCGM_FI_DEV_MEM_COPY_UTIL": round(util * 0.6),
            "DCGM_FI_DEV_ENC_UTIL": 0,
            "DCGM_FI_DEV_DEC_UTIL": 0,
            "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL": round(8.1e12 + 9.0e9 * up * util / 100),
            "DCGM_FI_DEV_VGPU_LICENSE_STATUS": 0,
            "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": 0,
            "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS": 0,
            "DCGM_FI_DEV_ROW_REMAP_FAILURE": 0,
        }
        labels = dcgm_labels(node, gpu)
        for name, rows_of in rows.items():
            rows_of.append(f"{name}{{{labels}}} {values[name]}")
    page = _Page()
    for name, kind, help_ in DCGM_DEFAULT:
        page.family(name, help_, kind)
        page.out.extend(rows[name])
    return page.text()


# ---------------------------------------------------------------------------- node_exporter

CPUS = 224  # 2 × 56 cores, hyper-threaded (a DGX-class host)
CPU_MODES = ("idle", "iowait", "irq", "nice", "softirq", "steal", "system", "user")
PODS = 24  # one veth per pod on the host
DISKS = ("nvme0n1", "nvme1n1", "nvme2n1", "nvme3n1", "nvme4n1", "nvme5n1", "nvme6n1", "nvme7n1", "sda", "sdb")
MOUNTS = (
    ("/", "/dev/md0", "ext4"),
    ("/boot", "/dev/sda1", "ext4"),
    ("/raid", "/dev/md1", "ext4"),
    ("/run", "tmpfs", "tmpfs"),
    ("/dev/shm", "tmpfs", "tmpfs"),
    ("/var/lib/kubelet", "/dev/md0", "ext4"),
)
_NETDEV_STATS = ("bytes", "compressed", "drop", "errs", "fifo", "frame", "multicast", "packets")
_NETDEV_TX_STATS = ("bytes", "carrier", "colls", "compressed", "drop", "errs", "fifo", "packets")
_IB_COUNTERS = (
    "excessive_buffer_overrun_errors",
    "link_error_recovery",
    "local_link_integrity_errors",
    "multicast_packets_received",
    "multicast_packets_transmitted",
    "port_constraint_errors_received",
    "port_constraint_errors_transmitted",
    "port_discards_received",
    "port_discards_transmitted",
    "port_errors_received",
    "port_packets_received",
    "port_packets_transmitted",
    "unicast_packets_received",
    "unicast_packets_transmitted",
    "vl15_dropped",
)


def _interfaces(node: SimNode) -> dict[str, tuple[str, str, int, float | None]]:
    """name → (MAC, operstate, ARPHRD type, Gb/s): the demo's own ports first, then the
    storage NICs, the container bridge and a veth per pod (none of them expected)."""
    i = node.plan.index
    mac = f"b8:3f:d2:{i >> 8 & 0xFF:02x}:{i & 0xFF:02x}"
    bond = f"{mac}:10"
    devices: dict[str, tuple[str, str, int, float | None]] = {
        "lo": ("00:00:00:00:00:00", "unknown", 772, None),
        "eth0": (f"{mac}:01", "up", 1, ETH_GBPS),
        "eth1": (bond, "up", 1, BOND_MEMBER_GBPS),
        "eth2": (bond, "up", 1, BOND_MEMBER_GBPS),
        "bond0": (bond, "up", 1, 2 * BOND_MEMBER_GBPS),
        "eno1": (f"{mac}:21", "up", 1, 200.0),
        "eno2": (f"{mac}:22", "up", 1, 200.0),
        "docker0": (f"02:42:ac:{i & 0xFF:02x}:00:01", "up", 1, None),
    }
    for pod in range(PODS):
        devices[f"veth{pod:02d}{i:04x}"] = (f"ee:ee:{i & 0xFF:02x}:00:{pod:02x}:01", "up", 1, 10.0)
    return devices


def node_exporter_page(node: SimNode, now: float) -> str:
    """node_exporter on a DGX-class host: the demo's links plus everything else it serves."""
    g = node.advance(now)
    nb = node.nic_bytes
    up = max(now - node.started_at, 0.0) + 86_400.0 * 3  # booted three days before the demo
    devices = _interfaces(node)
    page = _Page()
    out = page.out

    def series(name: str, help_: str, kind: str, rows: Sequence[tuple[str, object]]) -> None:
        page.family(name, help_, kind)
        out.extend(f"{name}{{{labels}}} {value}" for labels, value in rows)

    page.family("node_boot_time_seconds", "Node boot time, in unixtime.", "gauge")
    out.append(f"node_boot_time_seconds {now - up:.0f}")
    for name, help_, value in (
        ("node_load1", "1m load average.", 40 + 60 * g.load),
        ("node_load5", "5m load average.", 40 + 55 * g.load),
        ("node_load15", "15m load average.", 42 + 50 * g.load),
    ):
        page.family(name, help_, "gauge")
        out.append(f"{name} {value:.2f}")
    busy = 0.25 + 0.5 * g.load

    def host() -> str:
        """CPUs, memory, disks, filesystems: read by no profile, redrawn every REFRESH_S."""
        block = _Page()

        def series(name: str, help_: str, kind: str, rows: Sequence[tuple[str, object]]) -> None:
            block.family(name, help_, kind)
            block.out.extend(f"{name}{{{labels}}} {value}" for labels, value in rows)

        series(
            "node_cpu_seconds_total",
            "Seconds the CPUs spent in each mode.",
            "counter",
            [
                (f'cpu="{c}",mode="{mode}"', f"{up * share:.2f}")
                for c in range(CPUS)
                for mode, share in zip(
                    CPU_MODES, (1 - busy, 0.002, 0.0, 0.0005, 0.01, 0.0, busy * 0.3, busy * 0.7), strict=True
                )
            ],
        )
        for name, value in (
            ("MemTotal_bytes", 2.0e12),
            ("MemFree_bytes", 6.1e11),
            ("MemAvailable_bytes", 1.2e12),
            ("Buffers_bytes", 2.1e9),
            ("Cached_bytes", 5.5e11),
            ("SwapTotal_bytes", 0.0),
            ("SwapFree_bytes", 0.0),
            ("Shmem_bytes", 3.2e10),
            ("HugePages_Total", 0.0),
            ("Dirty_bytes", 1.1e6),
            ("Mapped_bytes", 4.2e9),
            ("Slab_bytes", 1.6e10),
        ):
            series(f"node_memory_{name}", f"Memory information field {name}.", "gauge",
                   [("", f"{value:.6e}")])
        for stat in (
            "reads_completed_total",
            "writes_completed_total",
            "read_bytes_total",
            "written_bytes_total",
            "io_time_seconds_total",
            "read_time_seconds_total",
            "write_time_seconds_total",
            "io_now",
            "discards_completed_total",
        ):
            series(
                f"node_disk_{stat}",
                f"The total number of {stat.replace('_', ' ')}.",
                "counter",
                [(f'device="{d}"', f"{up * (k + 1) * 13.0:.1f}") for k, d in enumerate(DISKS)],
            )
        for stat, value in (
            ("avail_bytes", 2.9e12),
            ("files", 1.2e8),
            ("files_free", 1.1e8),
            ("free_bytes", 3.0e12),
            ("readonly", 0),
            ("size_bytes", 7.6e12),
        ):
            series(
                f"node_filesystem_{stat}",
                f"Filesystem {stat.replace('_', ' ')}.",
                "gauge",
                [(f'device="{dev}",fstype="{fs}",mountpoint="{mount}"', value) for mount, dev, fs in MOUNTS],
            )
        return "\n".join(block.out)

    out.append(_cached(node, "host", now, host))
    # the demo's own figures, as render.py serves them
    series(
        "node_bonding_active",
        "Number of active slaves per bonding interface.",
        "gauge",
        [('master="bond0"', 2)],
    )
    series(
        "node_bonding_slaves",
        "Number of configured slaves per bonding interface.",
        "gauge",
        [('master="bond0"', 2)],
    )
    ib_rows: list[tuple[str, str, str, Callable[[str], object]]] = [
        (
            "node_infiniband_state_id",
            "State of the InfiniBand port (0: no change, 1: down, 2: init, 3: armed, "
            "4: active, 5: act defer)",
            "gauge",
            lambda p: 1 if node.port_down(p) else 4,
        ),
        (
            "node_infiniband_physical_state_id",
            "Physical state of the InfiniBand port (0: no change, 1: sleep, "
            "2: polling, 3: disable, 4: shift, 5: link up, 6: link error recover, 7: phytest)",
            "gauge",
            lambda p: 3 if node.port_down(p) else 5,
        ),
        (
            "node_infiniband_rate_bytes_per_second",
            "Maximum signal transfer rate",
            "gauge",
            lambda p: f"{IB_GBPS * 1e9 / 8:.0f}",
        ),
        (
            "node_infiniband_port_data_received_bytes_total",
            "Number of data octets received on all links",
            "counter",
            lambda p: f"{nb[p][0]:.0f}",
        ),
        (
            "node_infiniband_port_data_transmitted_bytes_total",
            "Number of data octets transmitted on all links",
            "counter",
            lambda p: f"{nb[p][1]:.0f}",
        ),
        (
            "node_infiniband_link_downed_total",
            "Number of times the link failed to recover from an error state and went down",
            "counter",
            lambda p: 1 if node.port_down(p) else 0,
        ),
        (
            "node_infiniband_port_transmit_wait_total",
            "Number of ticks during which the port had data to "
            "transmit but no data was sent during the entire tick",
            "counter",
            lambda p: 0,
        ),
        *(
            (
                f"node_infiniband_{c}_total",
                f"Number of {c.replace('_', ' ')}",
                "counter",
                lambda p, k=k, c=c: f"{up * k * 3.0:.0f}" if "packets" in c else 0,
            )
            for k, c in enumerate(_IB_COUNTERS)
        ),
    ]
    for name, help_, kind, value_of in ib_rows:
        series(name, help_, kind, [(f'device="{p}",port="1"', value_of(p)) for p in IB_PORTS])
    series(
        "node_network_info",
        "Non-numeric data from /sys/class/net/<iface>, value is always 1.",
        "gauge",
        [
            (
                f'address="{mac}",adminstate="up",broadcast="ff:ff:ff:ff:ff:ff",device="{dev}",duplex="full",'
                f'ifalias="",operstate="{state}"',
                1,
            )
            for dev, (mac, state, _, _) in devices.items()
        ],
    )
    series(
        "node_network_protocol_type",
        "Network device property: protocol_type.",
        "gauge",
        [(f'device="{dev}"', arp) for dev, (_, _, arp, _) in devices.items()],
    )
    for prop, value in (
        ("mtu_bytes", 9000),
        ("carrier", 1),
        ("carrier_changes_total", 2),
        ("dormant", 0),
        ("flags", 4099),
        ("iface_id", 2),
        ("iface_link", 2),
        ("iface_link_mode", 0),
        ("net_dev_group", 0),
        ("transmit_queue_length", 1000),
        ("address_assign_type", 0),
        ("name_assign_type", 4),
        ("device_id", 0),
    ):
        kind = "counter" if prop.endswith("_total") else "gauge"
        series(
            f"node_network_{prop}",
            f"Network device property: {prop}.",
            kind,
            [(f'device="{dev}"', value) for dev in devices],
        )

    def traffic(dev: str, direction: int) -> float:
        if dev in nb:  # the scenario's own ports
            return nb[dev][direction]
        k = sum(map(ord, dev)) % 97  # other devices: steady, made-up traffic
        return 1e9 * (k + 1) + up * (2e5 + 1e3 * k) * (1.3 if direction else 1.0)

    for direction, (word, stats) in enumerate((("receive", _NETDEV_STATS), ("transmit", _NETDEV_TX_STATS))):
        for stat in stats:
            rows = [
                (
                    f'device="{dev}"',
                    f"{traffic(dev, direction):.0f}"
                    if stat == "bytes"
                    else f"{traffic(dev, direction) / 1500:.0f}"
                    if stat == "packets"
                    else 0,
                )
                for dev in devices
            ]
            series(
                f"node_network_{word}_{stat}_total",
                f"Network device statistic {word}_{stat}.",
                "counter",
                rows,
            )
    series(
        "node_network_speed_bytes",
        "Network device property: speed_bytes.",
        "gauge",
        [
            (f'device="{dev}"', f"{gbps * 1e9 / 8:.0f}")
            for dev, (_, _, _, gbps) in devices.items()
            if gbps is not None
        ],
    )
    series(
        "node_network_up",
        "Value is 1 if operstate is 'up', 0 otherwise.",
        "gauge",
        [(f'device="{dev}"', 1 if state == "up" else 0) for dev, (_, state, _, _) in devices.items()],
    )
    page.family("node_time_seconds", "System time in seconds since epoch (1970).", "gauge")
    out.append(f"node_time_seconds {now:.9e}")
    return page.text()
