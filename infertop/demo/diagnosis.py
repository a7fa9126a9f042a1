"""`infertop demo --scenario diagnosis`: the cluster of issue 46, a drill for the on-call
engineer. 2 prefill and 6 decode nodes, 8 GPUs and 8 vLLM data-parallel engines each
(one GPU an engine), five scripted troubles, each on exactly one node, on from the start:

- dec-5: a RoCE pause storm — its eth0 receives 20,000 / sends 30,000 priority-3 pause
  frames a second with ECN marks rising, its four IB ports wait (xmit_wait) 2,000,000
  ticks a second against the fabric's 801 baseline, at 96 % of 400 Gb/s, and its NIXL KV
  transfers take 0.42 s (the pool's 0.018 s);
- dec-3: engine 5 steps 16 a second while its 7 peers step 40, because its GPU 5 is
  thermally throttled (SwThermal, 88 °C, 1,035 MHz);
- dec-2: GPUs 6–7 busy but waiting (util 99 %, SM active 1.5 %);
- dec-4: its engines run another KV block size (32 against the pool's 64);
- dec-1: its engines restart (counters back to zero) `RESTART_AT_S` in, then every
  `restart_every_s`, and step at half speed for `restart_slow_s` after.

The pages are what the exporters serve — node_exporter (netdev, infiniband, the ethtool
collector's pause / ECN names), dcgm-exporter with infertop's recommended counters
(clock-event reasons, DCGM profiling SM activity), vLLM 0.33 data-parallel engine pages
(per-engine steps, cache_config_info, NIXL transfer histograms) — written with plain
string formatting. Counters are integrated lazily up to the instant a page is asked for.
The suite drives the same cluster through the real Monitor (tests/support/issue46_cluster.py).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

from infertop.demo.scenario import DIAGNOSIS, NodePlan

NAME = DIAGNOSIS
PREFILL = ("pre-0", "pre-1")
DECODE = tuple(f"dec-{i}" for i in range(6))
NODES = PREFILL + DECODE
GPUS = 8
GPU_HOUR_USD = 10.5825  # $84.66 a node-hour
HOLD_S = 5.0  # the drill's verdict hold: every trouble is up within 10 s of the start
MODEL = "deepseek-ai/DeepSeek-V3.2"
STEPS_PER_S = 40.0
ACCEPTANCE = 0.7
NUM_SPEC_TOKENS = 3
ITL_S = 0.025
SLOW_NODE, SLOW_RANK, SLOW_STEPS = "dec-3", 5, 16.0
STORM_NODE = "dec-5"
WAITING_NODE, WAITING_GPUS = "dec-2", (6, 7)
DRIFT_NODE = "dec-4"
RESTART_NODE, RESTART_AT_S, RESTART_SLOW_S = "dec-1", 4.0, 8.0
IB_PORTS = tuple(f"mlx5_{i}" for i in range(4))
IB_GBPS, ETH_GBPS = 400.0, 100.0
BASE_XMIT_WAIT = 801.0  # every port of the fabric waits a little: the baseline
PAUSE_PRIORITY = 3  # the RoCE traffic class, PFC on
STORM = {"xmit_wait": 2e6, "pause_rx": 20_000.0, "pause_tx": 30_000.0, "ecn": 5_000.0, "gbps": 384.0,
         "kv_s": 0.42}
QUIET = {"xmit_wait": BASE_XMIT_WAIT, "pause_rx": 0.02, "pause_tx": 0.02, "ecn": 0.0, "gbps": 40.0,
         "kv_s": 0.018}
TROUBLES = {STORM_NODE: "pause_storm", SLOW_NODE: "slow_rank", WAITING_NODE: "busy_waiting",
            DRIFT_NODE: "config_drift", RESTART_NODE: "restarts"}
KV_TRANSFERS_PER_S = 12.0  # per engine of a decode node
NIXL_TIME_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0)  # vLLM's NIXL stats
ITL_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0)
TTFT_BUCKETS = (0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0)
ITERATION_TOKENS_BUCKETS = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
_SW_POWER_CAP, _SW_THERMAL = 0x4, 0x20  # NVML clock-event bits (DCGM passes the mask through)


def plans() -> list[NodePlan]:
    out: list[NodePlan] = []
    for role, names in (("prefill", PREFILL), ("decode", DECODE)):
        for ordinal, name in enumerate(names, 1):
            out.append(NodePlan(name=name, role=role, ordinal=ordinal, index=len(out),
                                trouble=TROUBLES.get(name)))
    return out


@dataclass
class Engine:
    steps: float = 0.0
    tokens: float = 0.0
    drafts: float = 0.0
    accepted: float = 0.0
    finished: float = 0.0
    kv_transfers: float = 0.0


@dataclass
class DiagnosisNode:
    plan: NodePlan
    started_at: float
    restart_every_s: float = 180.0
    restart_slow_s: float = RESTART_SLOW_S
    engines: list[Engine] = field(default_factory=lambda: [Engine() for _ in range(GPUS)])
    engine_started_at: float = 0.0
    counters: dict[str, float] = field(default_factory=dict)
    last_at: float = 0.0

    def __post_init__(self) -> None:
        self.start(self.started_at)

    def start(self, at: float) -> None:
        """The troubles play from `at` (the drill's clock)."""
        self.started_at = self.engine_started_at = self.last_at = at
        self.counters = {"at": at}

    @property
    def name(self) -> str:
        return self.plan.name

    def last_restart(self, now: float) -> float | None:
        """When the restarting node's engines last restarted, at or before `now`."""
        first = self.started_at + RESTART_AT_S
        if self.name != RESTART_NODE or now < first:
            return None
        return first + math.floor((now - first) / self.restart_every_s) * self.restart_every_s

    def steps_per_s(self, now: float) -> list[float]:
        slow = SLOW_RANK if self.name == SLOW_NODE else None
        steps = [SLOW_STEPS if i == slow else STEPS_PER_S for i in range(GPUS)]
        restart = self.last_restart(now)
        if restart is not None and now < restart + self.restart_slow_s:
            steps = [s / 2 for s in steps]  # a restarted engine warming up
        return steps

    def net(self) -> dict[str, float]:
        return STORM if self.name == STORM_NODE else QUIET

    def advance(self, now: float) -> None:
        """Integrate every counter up to `now` (a restart in between starts the engines at 0)."""
        restart = self.last_restart(now)
        since = self.last_at
        if restart is not None and restart > self.last_at:
            self.engines = [Engine() for _ in range(GPUS)]
            self.engine_started_at = since = restart
        dt, self.last_at = max(now - since, 0.0), max(now, self.last_at)
        for engine, steps_per_s in zip(self.engines, self.steps_per_s(now), strict=True):
            steps = steps_per_s * dt
            engine.steps += steps
            engine.drafts += steps
            engine.accepted += steps * NUM_SPEC_TOKENS * ACCEPTANCE
            engine.tokens += steps * (1 + NUM_SPEC_TOKENS * ACCEPTANCE)  # a bonus token per step
            engine.finished += steps / 90.0
            engine.kv_transfers += KV_TRANSFERS_PER_S * dt if self.plan.role == "decode" else 0.0
        dt = max(now - self.counters.get("at", self.started_at), 0.0)
        self.counters["at"] = now
        net = self.net()
        for key, per_s in (("pause_rx", net["pause_rx"]), ("pause_tx", net["pause_tx"]), ("ecn", net["ecn"]),
                           ("xmit_wait", net["xmit_wait"]), ("ib_bytes", net["gbps"] * 1e9 / 8),
                           ("eth_bytes", 1e9 / 8), ("energy_mj", 650.0 * 1000.0),
                           ("nvlink_kib", 200e9 / 1024)):
            self.counters[key] = self.counters.get(key, 0.0) + per_s * dt

    # ------------------------------------------------------------------ pages

    def engine_page(self, now: float) -> str:
        self.advance(now)
        out: list[str] = []
        labels = [f'engine="{i}",model_name="{MODEL}"' for i in range(GPUS)]

        def family(name: str, kind: str, help_: str, values: list[tuple[str, float]]) -> None:
            out.extend([f"# HELP {name} {help_}", f"# TYPE {name} {kind}"])
            out.extend(f"{name}{{{lab}}} {value:.1f}" for lab, value in values)

        def histogram(name: str, help_: str, buckets: tuple[float, ...],
                      values: list[tuple[str, float, float]]) -> None:
            """Every observation at its mean (in the first bucket that holds it)."""
            out.extend([f"# HELP {name} {help_}", f"# TYPE {name} histogram"])
            for lab, count, mean in values:
                for bound in buckets:
                    below = count if mean <= bound else 0.0
                    out.append(f'{name}_bucket{{{lab},le="{float(bound)}"}} {below:.1f}')
                out.append(f'{name}_bucket{{{lab},le="+Inf"}} {count:.1f}')
                out.append(f"{name}_count{{{lab}}} {count:.1f}")
                out.append(f"{name}_sum{{{lab}}} {count * mean:.6f}")

        e = self.engines
        family("vllm:num_requests_running", "gauge", "Number of requests in model execution batches.",
               [(lab, 48.0) for lab in labels])
        family("vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.",
               [(lab, 2.0) for lab in labels])
        family("vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.",
               [(lab, 0.62) for lab in labels])
        family("vllm:generation_tokens_total", "counter", "Number of generation tokens processed.",
               [(lab, x.tokens * 48) for lab, x in zip(labels, e, strict=True)])
        family("vllm:prompt_tokens_total", "counter", "Number of prefill tokens processed.",
               [(lab, x.finished * 3000) for lab, x in zip(labels, e, strict=True)])
        family("vllm:request_success_total", "counter", "Count of successfully processed requests.",
               [(f'{lab},finished_reason="stop"', x.finished) for lab, x in zip(labels, e, strict=True)])
        family("vllm:spec_decode_num_drafts_total", "counter", "Number of spec decoding drafts.",
               [(lab, x.drafts * 48) for lab, x in zip(labels, e, strict=True)])
        family("vllm:spec_decode_num_draft_tokens_total", "counter", "Number of draft tokens.",
               [(lab, x.drafts * 48 * NUM_SPEC_TOKENS) for lab, x in zip(labels, e, strict=True)])
        family("vllm:spec_decode_num_accepted_tokens_total", "counter", "Number of accepted tokens.",
               [(lab, x.accepted * 48) for lab, x in zip(labels, e, strict=True)])
        histogram("vllm:iteration_tokens_total", "Histogram of number of tokens per engine_step.",
                  ITERATION_TOKENS_BUCKETS,
                  [(lab, x.steps, 192.0) for lab, x in zip(labels, e, strict=True)])
        histogram("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.",
                  ITL_BUCKETS,
                  [(lab, x.tokens * 48, ITL_S) for lab, x in zip(labels, e, strict=True)])
        histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
                  TTFT_BUCKETS,
                  [(lab, x.finished, 0.3) for lab, x in zip(labels, e, strict=True)])
        if self.plan.role == "decode":  # each request's KV cache is pulled from the prefill pool
            histogram("vllm:nixl_xfer_time_seconds", "Transfer duration for NIXL KV Cache transfers.",
                      NIXL_TIME_BUCKETS,
                      [(lab, x.kv_transfers, self.net()["kv_s"]) for lab, x in zip(labels, e, strict=True)])
        block = "32" if self.name == DRIFT_NODE else "64"
        out += ["# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig",
                "# TYPE vllm:cache_config_info gauge"]
        out += [f'vllm:cache_config_info{{block_size="{block}",cache_dtype="fp8_e4m3",engine="{i}",'
                f'enable_prefix_caching="True"}} 1.0' for i in range(GPUS)]
        return "\n".join(out) + "\n"

    def gpu(self, i: int) -> dict[str, float]:
        """One GPU's dcgm-exporter fields."""
        values = {
            "DCGM_FI_DEV_GPU_UTIL": 90, "DCGM_FI_DEV_POWER_USAGE": 650.0, "DCGM_FI_DEV_GPU_TEMP": 64,
            "DCGM_FI_DEV_SM_CLOCK": 1980, "DCGM_FI_DEV_FB_USED": 122_880, "DCGM_FI_DEV_FB_FREE": 20_000,
            "DCGM_FI_DEV_FB_RESERVED": 615, "DCGM_FI_DEV_XID_ERRORS": 0, "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": 0,
            "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL": 0,
            "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL": round(self.counters.get("nvlink_kib", 0.0) / 1000),
            "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": round(self.counters.get("energy_mj", 0.0)),
            "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS": _SW_POWER_CAP,  # how a busy GPU runs, no trouble
            "DCGM_FI_PROF_SM_ACTIVE": 0.70, "DCGM_FI_PROF_SM_OCCUPANCY": 0.30,
            "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": 0.50, "DCGM_FI_PROF_DRAM_ACTIVE": 0.40,
        }
        if self.name == SLOW_NODE and i == SLOW_RANK:
            values.update({"DCGM_FI_DEV_CLOCK_THROTTLE_REASONS": _SW_POWER_CAP | _SW_THERMAL,
                           "DCGM_FI_DEV_GPU_TEMP": 88, "DCGM_FI_DEV_SM_CLOCK": 1035,
                           "DCGM_FI_PROF_SM_ACTIVE": 0.95})
        if self.name == WAITING_NODE and i in WAITING_GPUS:
            values.update({"DCGM_FI_DEV_GPU_UTIL": 99, "DCGM_FI_PROF_SM_ACTIVE": 0.015})
        return values

    def dcgm_page(self, now: float) -> str:
        self.advance(now)
        gpus = [self.gpu(i) for i in range(GPUS)]
        out: list[str] = []
        for name in gpus[0]:
            kind = "counter" if name.endswith(("_TOTAL", "_CONSUMPTION")) else "gauge"
            out += [f"# HELP {name} {name}.", f"# TYPE {name} {kind}"]
            for i, values in enumerate(gpus):
                labels = (f'gpu="{i}",UUID="GPU-{self.name}-{i}",pci_bus_id="00000000:{i + 16:02X}:00.0",'
                          f'device="nvidia{i}",modelName="NVIDIA H200",Hostname="{self.name}",'
                          'DCGM_FI_DRIVER_VERSION="570.133.20"')
                out.append(f"{name}{{{labels}}} {values[name]}")
        return "\n".join(out) + "\n"

    def node_exporter_page(self, now: float) -> str:
        self.advance(now)
        c = self.counters
        out: list[str] = []

        def family(name: str, kind: str, rows: list[tuple[str, object]]) -> None:
            out.extend([f"# HELP {name} {name}.", f"# TYPE {name} {kind}"])
            out.extend(f"{name}{{{labels}}} {value}" for labels, value in rows)

        eth = 'device="eth0"'
        mac = f"b8:3f:d2:00:00:{self.plan.index + 1:02x}"
        family("node_network_info", "gauge",
               [(f'address="{mac}",adminstate="up",device="eth0",duplex="full",operstate="up"', 1)])
        family("node_network_protocol_type", "gauge", [(eth, 1)])
        family("node_network_up", "gauge", [(eth, 1)])
        family("node_network_carrier", "gauge", [(eth, 1)])
        family("node_network_speed_bytes", "gauge", [(eth, f"{ETH_GBPS * 1e9 / 8:.0f}")])
        for direction in ("receive", "transmit"):
            family(f"node_network_{direction}_bytes_total", "counter", [(eth, f"{c['eth_bytes']:.0f}")])
            family(f"node_network_{direction}_errs_total", "counter", [(eth, 0)])
            family(f"node_network_{direction}_drop_total", "counter", [(eth, 0)])
        ports = [f'device="{p}",port="1"' for p in IB_PORTS]

        def ib(name: str, kind: str, value: object) -> None:
            family(name, kind, [(labels, value) for labels in ports])

        ib("node_infiniband_state_id", "gauge", 4)
        ib("node_infiniband_physical_state_id", "gauge", 5)
        ib("node_infiniband_rate_bytes_per_second", "gauge", f"{IB_GBPS * 1e9 / 8:.0f}")
        ib("node_infiniband_port_data_received_bytes_total", "counter", f"{c['ib_bytes']:.0f}")
        ib("node_infiniband_port_data_transmitted_bytes_total", "counter", f"{c['ib_bytes']:.0f}")
        ib("node_infiniband_port_transmit_wait_total", "counter", f"{c['xmit_wait']:.0f}")
        ib("node_infiniband_port_errors_received_total", "counter", 0)
        ib("node_infiniband_link_error_recovery_total", "counter", 0)
        # node_exporter's ethtool collector: `node_ethtool_<stat>`, rx / tx written out, untyped
        prio = f"prio{PAUSE_PRIORITY}"
        for name, value in ((f"node_ethtool_received_{prio}_pause", c["pause_rx"]),
                            (f"node_ethtool_transmitted_{prio}_pause", c["pause_tx"]),
                            ("node_ethtool_received_ecn_mark", c["ecn"])):
            family(name, "untyped", [(eth, f"{value:.0f}")])
        return "\n".join(out) + "\n"


class DiagnosisCluster:
    """The drill's nodes, as the demo server serves them (`plans`, `node(name)`). Without
    `started_at` its clock starts at the first page asked for: the restart comes
    `RESTART_AT_S` after the monitor's first read, wherever the demo's start-up left it."""

    def __init__(self, started_at: float | None = None, restart_every_s: float = 180.0,
                 restart_slow_s: float = RESTART_SLOW_S):
        self.plans = plans()
        self.started_at = started_at
        at = time.time() if started_at is None else started_at
        self.nodes = {p.name: DiagnosisNode(p, at, restart_every_s, restart_slow_s) for p in self.plans}

    def node(self, name: str) -> DiagnosisNode | None:
        if self.started_at is None:
            self.started_at = time.time()
            for node in self.nodes.values():
                node.start(self.started_at)
        return self.nodes.get(name)


def engine_page(node: DiagnosisNode, now: float) -> str:
    return node.engine_page(now)


def dcgm_page(node: DiagnosisNode, now: float) -> str:
    return node.dcgm_page(now)


def node_exporter_page(node: DiagnosisNode, now: float) -> str:
    return node.node_exporter_page(now)
