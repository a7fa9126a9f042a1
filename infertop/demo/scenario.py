"""The simulated DeepInfer cluster: who is who, and how each node's figures move.

Prefill / decode pools (about a quarter prefill), 8 GPUs a node, speculative decoding on
the decode pool. Every figure is a smooth function of time plus a little noise, and
counters are integrated lazily, each time a page is asked for — so a node costs nothing
between scrapes and 1,024 nodes stay cheap.

Scripted trouble, deterministic so tests and the operator can rely on it
(`TROUBLE`, by role and ordinal — in the default 16-node cluster: decode-03, prefill-02,
decode-07, decode-09):
- ports_down: 2 of the node's 4 IB ports (mlx5_1, mlx5_2) down, its traffic piled on
  mlx5_0 (85 %) and mlx5_3 (15 %);
- idle: a prefill node with no requests and its GPUs at ~0 % util;
- straggler: a decode node ~30 % slower than its peers because one of its ranks is slow:
  the GPU of engine 5 (GPU 5; the realistic pages serve 8 data-parallel engines, one GPU
  each) is power-capped (SwPowerCap, ~520 W, 1,410 MHz) and computes flat out while the
  node's other ranks wait for it in lockstep (their SM activity lower);
- busy-waiting: on the ports_down node, GPUs 6–7 read util ~99 % with SM activity ~1.5 %
  (spinning in the all-to-all while the network starves them);
- stray_process: a decode node whose GPU 3 is also held by a leftover evaluation run
  (18 GiB, not the engine); no exporter carries processes, so the demo serves this node
  over SSH in the probe's own reading format (infertop/demo/ssh_node.py);
- acceptance_collapse: a decode node whose drafter stops agreeing with its target
  (`COLLAPSE_START_S` after the demo starts, for `COLLAPSE_FOR_S`, again every
  `COLLAPSE_EVERY_S`): its draft acceptance falls from ~0.7 to ~0.3, at every position,
  while its steps/s stay — its tokens/s fall, the decode capacity it pays for is lost;
- every `restart_every_s` (default 180 s) one engine restarts (its counters drop to
  0), rotating over the untroubled nodes in order.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

GPUS_PER_NODE = 8
GPU_MODEL = "NVIDIA B200"
GPU_MEM_MIB = 183_359.0
MODEL_NAME = "deepseek-ai/DeepSeek-V3.2"
NUM_SPEC_TOKENS = 3  # draft tokens per draft (MTP)
IB_PORTS = ("mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3")
IB_GBPS = 400.0
ETH_GBPS = 100.0
BOND_MEMBER_GBPS = 25.0
RESTART_EVERY_S = 180.0
# `infertop demo --scenario`: this module's cluster, or the drill of issue 46 (diagnosis.py)
DIAGNOSIS = "diagnosis"
SCENARIOS = ("default", DIAGNOSIS)
DIAGNOSIS_NODES = 8  # 2 prefill, 6 decode: the drill's cluster is fixed

# trouble kind → (role, ordinal within the role); see the module docstring
TROUBLE: dict[str, tuple[str, int]] = {
    "ports_down": ("decode", 3),
    "idle": ("prefill", 2),
    "straggler": ("decode", 7),
    "stray_process": ("decode", 9),
    "acceptance_collapse": ("decode", 4),
}
# the acceptance collapse: when (seconds since the demo started) and how deep
COLLAPSE_START_S = 60.0
COLLAPSE_FOR_S = 150.0
COLLAPSE_EVERY_S = 420.0
COLLAPSED_ACCEPTANCE = 0.3
PORTS_DOWN = ("mlx5_1", "mlx5_2")
# on the link-starved node, two GPUs spin in the all-to-all waiting for the network: util
# ~99 %, SM activity ~1.5 % — busy but waiting (issue 35)
WAITING_GPUS = (6, 7)
STRAGGLER_RATIO = 0.7
# the straggler's slow rank: its GPU held at a power cap (SwPowerCap), computing while
# the node's other ranks wait for it (issue 35)
POWER_CAPPED_GPU = 5
POWER_CAP_W = 520.0
CAPPED_SM_CLOCK_MHZ = 1410
WAITING_FOR_STRAGGLER = 0.55  # SM activity / util of the ranks that wait for the capped one


@dataclass(frozen=True)
class NodePlan:
    name: str
    role: str  # "prefill" | "decode"
    ordinal: int  # 1-based within the role
    index: int  # 0-based within the cluster
    trouble: str | None = None


def pool_sizes(nodes: int) -> tuple[int, int]:
    """(prefill, decode): about a quarter prefill, at least one of each."""
    if nodes < 2:
        raise ValueError("the demo needs at least 2 nodes (one prefill, one decode)")
    prefill = min(max(1, round(nodes / 4)), nodes - 1)
    return prefill, nodes - prefill


def node_name(role: str, ordinal: int, count: int) -> str:
    return f"{role}-{ordinal:0{max(2, len(str(count)))}d}"


def plan_cluster(nodes: int) -> list[NodePlan]:
    prefill, decode = pool_sizes(nodes)
    troubles = {where: kind for kind, where in TROUBLE.items()}
    plans: list[NodePlan] = []
    for role, count in (("prefill", prefill), ("decode", decode)):
        for ordinal in range(1, count + 1):
            plans.append(
                NodePlan(
                    name=node_name(role, ordinal, count),
                    role=role,
                    ordinal=ordinal,
                    index=len(plans),
                    trouble=troubles.get((role, ordinal)),
                )
            )
    return plans


def trouble_nodes(nodes: int) -> dict[str, str]:
    """trouble kind → node name, for the troubles this cluster size has room for."""
    return {p.trouble: p.name for p in plan_cluster(nodes) if p.trouble is not None}


def restart_order(plans: list[NodePlan]) -> list[str]:
    """Nodes that take turns restarting: the untroubled ones, decode pool first."""
    calm = [p for p in plans if p.trouble is None]
    return [p.name for p in sorted(calm, key=lambda p: (p.role != "decode", p.index))]


@dataclass
class EngineCounters:
    steps: float = 0.0
    iteration_tokens: float = 0.0
    drafts: float = 0.0
    draft_tokens: float = 0.0
    accepted: float = 0.0
    accepted_per_pos: list[float] = field(default_factory=lambda: [0.0] * NUM_SPEC_TOKENS)
    generation: float = 0.0
    prompt: float = 0.0
    prefix_queries: float = 0.0
    prefix_hits: float = 0.0
    finished_stop: float = 0.0
    finished_length: float = 0.0
    ttft_sum: float = 0.0
    ttft_count: float = 0.0
    itl_sum: float = 0.0
    itl_count: float = 0.0


@dataclass
class Gauges:
    running: float
    waiting: float
    kv_usage: float
    load: float  # 0–1, how busy the node is now
    steps_per_s: float
    acceptance: float


class SimNode:
    """One node's state. `advance(now)` integrates its counters up to `now`."""

    def __init__(self, plan: NodePlan, seed: int, started_at: float, restart_every_s: float,
                 restart_slot: int | None, restart_turns: int):
        self.plan = plan
        self.rng = random.Random(seed * 100_003 + plan.index)
        self.phase = self.rng.uniform(0, 2 * math.pi)
        self.base_steps = self.rng.uniform(46.0, 54.0) if plan.role == "decode" else self.rng.uniform(8, 12)
        self.base_acceptance = self.rng.uniform(0.66, 0.74)
        self.started_at = started_at
        self.restart_every_s = restart_every_s
        self.restart_slot = restart_slot
        self.restart_turns = restart_turns
        self.engine = EngineCounters()
        self.engine_started_at = started_at
        self.last_at = started_at
        self.restarts = 0
        # NIC byte counters: name → [rx, tx]; GPU energy in mJ
        self.nic_bytes: dict[str, list[float]] = {}
        self.energy_mj = [self.rng.uniform(1e9, 5e9) for _ in range(GPUS_PER_NODE)]
        # a node that had been up before the demo began has counters well above zero
        self._warm_up(600.0)

    # ------------------------------------------------------------------ dynamics

    def gauges(self, now: float) -> Gauges:
        t = now - self.started_at
        plan, rng = self.plan, self.rng
        if plan.trouble == "idle":
            return Gauges(0, 0, 0.02, 0.0, 0.0, 0.0)
        if plan.role == "prefill":
            # prefill comes in bursts: a sharp wave of arrivals every ~20 s
            wave = max(0.0, math.sin(2 * math.pi * t / 20.0 + self.phase)) ** 2
            load = min(1.0, 0.25 + 0.75 * wave + rng.gauss(0, 0.03))
            load = max(load, 0.05)
            return Gauges(
                running=max(1, round(8 * load)),
                waiting=max(0, round(24 * wave - 6 + rng.gauss(0, 1))),
                kv_usage=min(0.95, 0.15 + 0.35 * load),
                load=load,
                steps_per_s=self.base_steps * load,
                acceptance=0.0,
            )
        steps = self.base_steps * (1 + 0.04 * math.sin(2 * math.pi * t / 47.0 + self.phase))
        steps += rng.gauss(0, 0.5)
        if plan.trouble == "straggler":
            steps *= STRAGGLER_RATIO
        acceptance = self.base_acceptance + 0.05 * math.sin(2 * math.pi * t / 61.0 + self.phase)
        acceptance = min(0.8, max(0.6, acceptance + rng.gauss(0, 0.015)))
        if self.collapsed(t):
            acceptance = max(0.05, COLLAPSED_ACCEPTANCE + rng.gauss(0, 0.015))
        running = round(56 + 8 * math.sin(2 * math.pi * t / 37.0 + self.phase))
        return Gauges(
            running=running,
            waiting=max(0, round(rng.gauss(1.5, 1.5))),
            kv_usage=min(0.97, 0.5 + 0.25 * (running - 48) / 16 + rng.gauss(0, 0.01)),
            load=0.92,
            steps_per_s=max(steps, 1.0),
            acceptance=acceptance,
        )

    def collapsed(self, t: float) -> bool:
        """The acceptance-collapse node's drafter disagrees with its target `t` s in."""
        if self.plan.trouble != "acceptance_collapse" or t < COLLAPSE_START_S:
            return False
        return (t - COLLAPSE_START_S) % COLLAPSE_EVERY_S < COLLAPSE_FOR_S

    def _integrate(self, g: Gauges, dt: float) -> None:
        e = self.engine
        if dt <= 0 or g.steps_per_s <= 0:
            return
        steps = g.steps_per_s * dt
        e.steps += steps
        if self.plan.role == "decode":
            batch = g.running
            drafts = steps * batch
            draft_tokens = drafts * NUM_SPEC_TOKENS
            accepted = draft_tokens * g.acceptance
            generated = drafts + accepted  # one bonus token per draft, plus the accepted
            e.iteration_tokens += steps * batch * (1 + NUM_SPEC_TOKENS)
            e.drafts += drafts
            e.draft_tokens += draft_tokens
            e.accepted += accepted
            # per-position acceptance falls with position, and sums to the accepted total
            weights = [g.acceptance ** (i + 1) for i in range(NUM_SPEC_TOKENS)]
            for i, w in enumerate(weights):
                e.accepted_per_pos[i] += accepted * w / sum(weights)
            e.generation += generated
            finished = generated / 900.0  # ~900 output tokens a request
            e.finished_stop += finished * 0.93
            e.finished_length += finished * 0.07
            e.itl_count += generated
            e.itl_sum += generated * (1.0 / g.steps_per_s) / (1 + NUM_SPEC_TOKENS * g.acceptance)
        else:
            prompt = 6000.0 * g.steps_per_s * dt  # ~60k prompt tokens/s at full load
            requests = prompt / 3000.0
            e.iteration_tokens += prompt
            e.prompt += prompt
            e.prefix_queries += prompt
            e.prefix_hits += prompt * 0.35
            e.generation += requests  # the first token is made by the prefill node
            e.finished_stop += requests
            e.ttft_count += requests
            e.ttft_sum += requests * (0.25 + 0.6 * g.load)

    def _warm_up(self, seconds: float) -> None:
        g = self.gauges(self.started_at)
        self._integrate(g, seconds)
        self._integrate_links(g, seconds)

    def advance(self, now: float) -> Gauges:
        """Integrate counters up to `now` (restarts included); return the current gauges."""
        dt = min(max(now - self.last_at, 0.0), 60.0)
        restart_at = self._last_restart_before(now)
        g = self.gauges(now)
        if restart_at is not None and restart_at > self.last_at:
            # the engine restarted in between: its counters start again from zero
            self.engine = EngineCounters()
            self.engine_started_at = restart_at
            self.restarts += 1
            self._integrate(g, now - restart_at)
        else:
            self._integrate(g, dt)
        self._integrate_links(g, dt)
        self._energy_step(g, dt)
        self.last_at = max(self.last_at, now)
        return g

    def _last_restart_before(self, now: float) -> float | None:
        if self.restart_slot is None or self.restart_turns <= 0:
            return None
        period = self.restart_every_s
        epoch = math.floor((now - self.started_at) / period)
        # epochs 1, 2, … restart slots 0, 1, …, turns-1, 0, …
        k = epoch - ((epoch - 1 - self.restart_slot) % self.restart_turns)
        if k < 1:
            return None
        return self.started_at + k * period

    # ------------------------------------------------------------------ GPUs

    def gpu_util(self, g: Gauges, gpu: int) -> float:
        if self.plan.trouble == "idle":
            return max(0.0, self.rng.gauss(0.3, 0.2))
        base = 93.0 if self.plan.role == "decode" else 30.0 + 65.0 * g.load
        if self.waiting(gpu):
            return 99.0  # a kernel resident and spinning
        return min(100.0, max(0.0, base + self.rng.gauss(0, 2.0) - gpu * 0.3))

    def waiting(self, gpu: int) -> bool:
        return self.plan.trouble == "ports_down" and gpu in WAITING_GPUS

    def sm_active_pct(self, util: float, gpu: int) -> float:
        """Real SM activity (DCGM_FI_PROF_SM_ACTIVE × 100): most of util on a working GPU;
        on the straggler node only the capped rank's GPU works that hard, the others wait."""
        if self.waiting(gpu):
            return 1.5
        if self.plan.trouble == "straggler" and not self.power_capped(gpu):
            return WAITING_FOR_STRAGGLER * util
        return 0.88 * util

    def power_capped(self, gpu: int) -> bool:
        return self.plan.trouble == "straggler" and gpu == POWER_CAPPED_GPU

    def _energy_step(self, g: Gauges, dt: float) -> None:
        for gpu in range(GPUS_PER_NODE):
            self.energy_mj[gpu] += self.gpu_power_w(self.gpu_util(g, gpu), gpu) * dt * 1000.0

    @staticmethod
    def power_w(util: float) -> float:
        return 140.0 + 8.4 * util

    def gpu_power_w(self, util: float, gpu: int) -> float:
        """Power draw: follows util, held at the cap on the power-capped GPU."""
        return POWER_CAP_W if self.power_capped(gpu) else self.power_w(util)

    # ------------------------------------------------------------------ links

    def link_bytes_per_s(self, g: Gauges) -> dict[str, float]:
        """Each port's traffic, per direction, in bytes/s, at this instant."""
        if self.plan.role == "decode":
            # expert-parallel all-to-all: volume follows decode steps
            ib_total = g.steps_per_s * 480e6
        else:
            # KV cache shipped to the decode pool, plus all-to-all of the prefill pass
            ib_total = g.load * 9e9
        rates = {port: ib_total / len(IB_PORTS) for port in IB_PORTS}
        if self.plan.trouble == "ports_down":
            rates = {"mlx5_0": ib_total * 0.85, "mlx5_1": 0.0, "mlx5_2": 0.0, "mlx5_3": ib_total * 0.15}
        rates["eth0"] = 40e6 + 30e6 * g.load
        rates["eth1"] = rates["eth2"] = 150e6 * g.load + 5e6
        rates["bond0"] = rates["eth1"] + rates["eth2"]
        rates["lo"] = 2e6
        return rates

    def _integrate_links(self, g: Gauges, dt: float) -> None:
        for port, rate in self.link_bytes_per_s(g).items():
            pair = self.nic_bytes.setdefault(port, [self.rng.uniform(1e9, 1e11), self.rng.uniform(1e9, 1e11)])
            jitter = 1.0 + self.rng.gauss(0, 0.02)
            pair[0] += rate * dt * jitter
            pair[1] += rate * dt * (2.0 - jitter)

    def port_down(self, port: str) -> bool:
        return self.plan.trouble == "ports_down" and port in PORTS_DOWN


class SimCluster:
    def __init__(self, nodes: int, started_at: float, seed: int = 7,
                 restart_every_s: float = RESTART_EVERY_S):
        self.plans = plan_cluster(nodes)
        self.started_at = started_at
        order = restart_order(self.plans)
        slots = {name: i for i, name in enumerate(order)}
        self.nodes = {
            p.name: SimNode(p, seed, started_at, restart_every_s, slots.get(p.name), len(order))
            for p in self.plans
        }

    def node(self, name: str) -> SimNode | None:
        return self.nodes.get(name)
