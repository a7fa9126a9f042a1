"""Who holds the GPU: a process that is not the node's engine, holding GPU memory, is a
finding (a leftover evaluation, a crashed run's survivor: a classic cause of an OOM or of
an idle rank).

The node's engine is recognised by its command: it names the engine's profile ("vllm",
"sglang", "deepinfer"), else it is the command that holds the most GPUs of the node. Any
other process with GPU memory is stray. Nodes whose source lists no processes (an
exporter) say nothing here.
"""

from __future__ import annotations

from collections import Counter

from infertop.monitor.evaluation.conditions import STRAY_PROCESS, Condition, accel_label
from infertop.monitor.format import fmt_bytes
from infertop.monitor.snapshot import NodeView

ENGINE_WORDS = ("vllm", "sglang", "deepinfer")


def _engine_commands(node: NodeView) -> set[str]:
    """The commands taken for the node's engine."""
    commands = {p.command or "" for g in node.gpus for p in g.processes or ()}
    profile = (node.engine.profile or "") if node.engine is not None else ""
    words = tuple(w for w in ENGINE_WORDS if w in profile) or ENGINE_WORDS
    named = {c for c in commands if any(w in c.lower() for w in words)}
    if named:
        return named
    # each command once per GPU: how many GPUs it holds
    held = Counter(c for g in node.gpus for c in {p.command or "" for p in g.processes or ()})
    if not held:
        return set()
    top, count = held.most_common(1)[0]
    return {top} if count > 1 else set()


def stray_process_condition(node: NodeView) -> Condition | None:
    if not any(g.processes for g in node.gpus):
        return None
    engine = _engine_commands(node)
    if not engine:
        return None  # nothing tells the engine apart: say nothing rather than guess
    found = []
    for g in node.gpus:
        for p in g.processes or ():
            if (p.command or "") in engine or not p.gpu_mem_bytes:
                continue
            who = f"pid {p.pid}" + (f" ({p.user})" if p.user else "")
            what = (p.command or "?")[:60]
            memory = fmt_bytes(p.gpu_mem_bytes)
            found.append((g, f"{accel_label(g.kind)} {g.index} held by {who} {what}: {memory}"))
    if not found:
        return None
    cost = node.cost_per_hour_usd
    gpus = {g.index for g, _ in found}
    stake = cost * len(gpus) / len(node.gpus) if cost is not None and node.gpus else None
    detail = "not the engine — " + "; ".join(text for _, text in found)
    return Condition(STRAY_PROCESS, detail, "warning", stake)
