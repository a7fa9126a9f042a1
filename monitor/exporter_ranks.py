"""The exporter's per-rank and per-GPU-activity families (issue 35), beside monitor/exporter.py.

`infertop_engine_*{node, role, engine, gpus}`: each data-parallel engine's figures
(`engine` is the rank's page key, e.g. "engine=3"; `gpus` its GPU indices, "" unknown).
`infertop_gpu_*_active_ratio{node, gpu, source}`: real compute activity 0–1 (source "gpm"
or "dcgm"). `infertop_node_idle_basis{node, basis}`: 1 for the figure idle was judged on.
`infertop_gpu_processes{node, gpu}`: processes holding the GPU, where read;
`infertop_gpu_process_memory_bytes{node, gpu, pid, user}`: each one's GPU memory.
`infertop_verdict_evidence_{value, median, off_ratio}{node, kind, figure, unit}`: a
straggler's evidence, each figure beside its pool's median. Unknown figures are left out,
never exported as 0.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import GaugeMetricFamily

from infertop.monitor.snapshot import EngineRankView, EvidenceView, GpuView, Snapshot

_RANK: tuple[tuple[str, str, Callable[[EngineRankView], float | None]], ...] = (
    ("decode_steps_per_second", "One engine's decode steps per second", lambda r: r.decode_steps_per_s),
    ("draft_acceptance_ratio", "One engine's accepted / drafted tokens", lambda r: r.draft_acceptance),
    ("mean_acceptance_length", "One engine's 1 + accepted / drafts", lambda r: r.mean_acceptance_length),
    ("accepted_tokens_per_second", "One engine's accepted output tokens per second",
     lambda r: r.accepted_tokens_per_s),
    ("full_acceptance_tokens_per_second", "One engine's tokens per second had every draft been accepted",
     lambda r: r.full_acceptance_tokens_per_s),
    ("requests_running", "Requests running in one engine", lambda r: r.requests_running),
    ("requests_waiting", "Requests waiting in one engine's queue", lambda r: r.requests_waiting),
    ("kv_cache_usage_ratio", "One engine's KV cache usage, 0-1", lambda r: r.kv_cache_usage),
    ("ttft_p50_seconds", "One engine's time to first token p50", lambda r: r.ttft_p50_s),
    ("ttft_p99_seconds", "One engine's time to first token p99", lambda r: r.ttft_p99_s),
    ("itl_p50_seconds", "One engine's inter-token latency p50", lambda r: r.itl_p50_s),
    ("itl_p99_seconds", "One engine's inter-token latency p99", lambda r: r.itl_p99_s),
)
_ACTIVITY: tuple[tuple[str, str, Callable[[GpuView], float | None]], ...] = (
    ("sm_active_ratio", "Share of SMs working over the last interval (GPM / DCGM profiling)",
     lambda g: g.sm_active_pct),
    ("sm_occupancy_ratio", "Resident warps / the SMs' maximum", lambda g: g.sm_occupancy_pct),
    ("tensor_active_ratio", "Share of time any tensor pipe was active", lambda g: g.tensor_active_pct),
    ("dram_active_ratio", "Share of DRAM bandwidth used", lambda g: g.dram_active_pct),
)


def rank_families(snapshot: Snapshot) -> Iterator[GaugeMetricFamily]:
    for suffix, text, get in _RANK:
        fam = GaugeMetricFamily(f"infertop_engine_{suffix}", text, labels=["node", "role", "engine", "gpus"])
        for n in snapshot.nodes:
            for r in (n.engine.ranks or ()) if n.engine is not None else ():
                value = get(r)
                if value is not None:
                    gpus = ",".join(str(g) for g in r.gpus) if r.gpus else ""
                    fam.add_metric([n.name, n.role, r.key, gpus], value)
        yield fam
    for suffix, text, get_g in _ACTIVITY:
        fam = GaugeMetricFamily(f"infertop_gpu_{suffix}", text, labels=["node", "gpu", "source"])
        for n in snapshot.nodes:
            for g in n.gpus:
                pct = get_g(g)
                if pct is not None:
                    fam.add_metric([n.name, str(g.index), g.activity_source or ""], pct / 100.0)
        yield fam
    basis = GaugeMetricFamily("infertop_node_idle_basis", "1 for the GPU figure the idle judgement used",
                              labels=["node", "basis"])
    procs = GaugeMetricFamily("infertop_gpu_processes", "Processes holding the GPU (NVML), where read",
                              labels=["node", "gpu"])
    for n in snapshot.nodes:
        if n.idle_basis is not None:
            basis.add_metric([n.name, n.idle_basis], 1.0)
        for g in n.gpus:
            if g.processes is not None:
                procs.add_metric([n.name, str(g.index)], float(len(g.processes)))
    yield basis
    yield procs
    memory = GaugeMetricFamily("infertop_gpu_process_memory_bytes", "GPU memory one process holds (NVML)",
                               labels=["node", "gpu", "pid", "user"])
    for n in snapshot.nodes:
        for g in n.gpus:
            for p in g.processes or ():
                if p.gpu_mem_bytes is not None:
                    labels = [n.name, str(g.index), str(p.pid), p.user or ""]
                    memory.add_metric(labels, float(p.gpu_mem_bytes))
    yield memory
    yield from _evidence_families(snapshot)


_EVIDENCE: tuple[tuple[str, str, Callable[[EvidenceView], float | None]], ...] = (
    ("value", "A straggler's figure (its rank's GPUs where a rank is named)", lambda e: e.value),
    ("median", "The same figure's median over the straggler's pool", lambda e: e.median),
    ("off_ratio", "How far the figure sits from the median in the slowing direction, relative to it",
     lambda e: e.off),
)


def _evidence_families(snapshot: Snapshot) -> Iterator[GaugeMetricFamily]:
    for suffix, text, get in _EVIDENCE:
        fam = GaugeMetricFamily(f"infertop_verdict_evidence_{suffix}", text,
                                labels=["node", "kind", "figure", "unit"])
        for n in snapshot.nodes:
            for v in n.verdicts:
                for e in v.evidence:
                    value = get(e)
                    if value is not None:
                        fam.add_metric([n.name, v.kind, e.figure, e.unit], value)
        yield fam


def rank_metric_names() -> set[str]:
    names = {f"infertop_engine_{s}" for s, _, _ in _RANK}
    names |= {f"infertop_gpu_{s}" for s, _, _ in _ACTIVITY}
    names |= {f"infertop_verdict_evidence_{s}" for s, _, _ in _EVIDENCE}
    return names | {"infertop_node_idle_basis", "infertop_gpu_processes", "infertop_gpu_process_memory_bytes"}
