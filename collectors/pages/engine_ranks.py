"""A node's engine page, split into its data-parallel engines (ranks).

A wide-EP decode node runs one engine per DP rank (vLLM's `engine` label, SGLang's
`dp_rank`); the node's figures fold them together, and the one slow rank that holds its
whole expert-parallel group back disappears in the fold. Here every series that carries
an engine label is handed to the rank it names, and each rank is read by the very same
profile code as the node (`read_rank`), so a rank's steps, tokens, queue, KV use and
latency histograms mean exactly what the node's mean.

Series without an engine label (process start, a server-wide counter) belong to the node
only. A page whose series carry no engine label has no ranks (None).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from infertop.collectors.pages.exposition import Exposition
from infertop.collectors.safe_text import whole_number
from infertop.collectors.sample import EngineRankSample, EngineSample

# labels that tell one data-parallel engine from another (vLLM, SGLang)
RANK_LABELS: tuple[str, ...] = ("engine", "dp_rank")
TP_LABEL = "tp_rank"  # SGLang: the scheduler's tensor-parallel rank (its GPU within the group)
MAX_RANKS = 64  # per node: past this, a page is hostile or not one node's


def rank_key(labels: Mapping[str, str]) -> str | None:
    """"engine=3" / "dp_rank=1" / "engine=0,dp_rank=1"; None for a series of no rank."""
    parts = [f"{label}={labels[label]}" for label in RANK_LABELS if label in labels]
    return ",".join(parts) if parts else None


def _dp_rank(key: str) -> int | None:
    value = key.split(",")[0].partition("=")[2]
    return whole_number(value, max_digits=6)


def split_by_rank(index: Exposition, names: Iterable[str]) -> dict[str, Exposition]:
    """The page's series of `names`, one Exposition per rank key."""
    out: dict[str, Exposition] = {}
    for name in names:
        for store, attr in ((index.samples, "samples"), (index.aliases, "aliases")):
            for labels, value in store.get(name, ()):
                key = rank_key(labels)
                if key is None:
                    continue
                rank = out.get(key)
                if rank is None:
                    if len(out) >= MAX_RANKS:
                        continue
                    rank = out[key] = Exposition()
                getattr(rank, attr).setdefault(name, []).append((labels, value))
    return out


def tp_ranks_by_rank(index: Exposition, names: Iterable[str]) -> dict[str, list[int]]:
    """SGLang's `tp_rank` values seen under each rank key (before copies are dropped)."""
    seen: dict[str, set[int]] = {}
    for name in names:
        for labels, _ in index.series(name):
            key = rank_key(labels)
            tp = labels.get(TP_LABEL)
            if key is None or tp is None or (tp_rank := whole_number(tp, max_digits=6)) is None:
                continue
            seen.setdefault(key, set()).add(tp_rank)
    return {k: sorted(v) for k, v in seen.items()}


def _order(key: str) -> tuple[int, str]:
    rank = _dp_rank(key)
    return (rank if rank is not None else 1 << 30, key)


# for the sources that build ranks from other than a page (collectors/sources/prom_ranks.py)
dp_rank_of = _dp_rank
rank_order = _order


def engine_ranks(
    index: Exposition, names: Iterable[str], read_rank: Callable[[Exposition], EngineSample | None]
) -> list[EngineRankSample] | None:
    """Each rank of the page read alone by `read_rank` (the profile's own reader), in rank
    order; None when the page tells no ranks apart."""
    wanted = list(dict.fromkeys(names))
    parts = split_by_rank(index, wanted)
    if not parts:
        return None
    tp = tp_ranks_by_rank(index, wanted)
    ranks = []
    for key in sorted(parts, key=_order):
        sample = read_rank(parts[key])
        if sample is None:
            continue
        ranks.append(EngineRankSample(key=key, dp_rank=_dp_rank(key), tp_ranks=tp.get(key), engine=sample))
    return ranks or None
