"""The metrics backends nodes are read through (the prom source's Prometheus, its shards,
a global layer): a backend that is down is one finding, on the backend, and the nodes
only it shows are unknown — never stale, unreachable or in error on their own. Pure."""

from __future__ import annotations

from collections.abc import Iterable

from infertop.collectors.sources.source import BackendState
from infertop.monitor.snapshot import BackendView


def unseen_nodes(backends: Iterable[BackendState]) -> dict[str, str]:
    """Node → why it cannot be seen now ("shard down: prometheus http://…: timed out
    after 5 s"), for every node only a down backend shows."""
    out: dict[str, str] = {}
    for b in backends:
        if b.error is None:
            if b.settling is not None:  # back lately: its nodes not scraped since wait for it
                why = f"{b.role} {b.settling}: {b.name}: waiting for its next scrape"
                for node in b.waiting:
                    out.setdefault(node, why)
            continue
        why = f"{b.role} down: {b.name}: {b.error}"
        for node in b.nodes:
            out.setdefault(node, why)
    return out


def backend_view(b: BackendState) -> BackendView:
    return BackendView(
        name=b.name, behind_s=b.behind_s, status="down" if b.error is not None else "ok",
        error=b.error, since=b.since, role="shard" if b.role == "shard" else "backend",
        nodes=len(b.nodes) if b.error is not None else len(b.waiting), detail=_detail(b),
    )


def _detail(b: BackendState) -> str | None:
    parts = [b.note] if b.note else []
    if b.settling is not None and b.waiting:
        n = len(b.waiting)
        nodes = f"{n} node{'s' if n != 1 else ''}"
        parts.insert(0, f"{b.settling}: {nodes} waiting for the next scrape (unknown)")
    return "; ".join(parts) or None
