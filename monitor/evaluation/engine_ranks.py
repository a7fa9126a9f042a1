"""Each data-parallel engine (rank) of a node, with the node's engine figures of its own.

The collectors hand every rank's series to `EngineSample.ranks` (collectors.pages.engine_ranks);
here each rank gets the very figures the node gets (`figures.engine_view`) over the same
window: steps/s, running / waiting, KV use, acceptance, tokens/s, latency percentiles.
The node's own figures stay the roll-up of its ranks' counters, read from the page's
totals (the same numbers, summed once) — all but its decode steps/s: under expert
parallelism every rank waits for the slowest, so where the ranks are known the node's
`decode_steps_per_s` is its slowest busy rank's, named beside it (`slowest_rank`), by
one rule (`node_steps_per_s`) that every view and sort reads through the snapshot.

Which GPUs a rank runs on: from the page's own labels where it says (SGLang's `tp_rank`,
taken modulo the node's GPUs), else from the layout's tensor-parallel size (engine k in
rank order holds GPUs k·tp … k·tp+tp−1), else, where the node's GPUs divide evenly among
its engines, that share (vLLM's data-parallel launcher gives local rank k the k-th slice
of the visible GPUs), else unknown.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from functools import lru_cache
from typing import Any, NamedTuple, cast

from infertop.collectors.pages.draft_positions import position_key
from infertop.collectors.sample import EngineRankSample, EngineSample, NodeSample
from infertop.layouts.model import Layout, NodeConfig
from infertop.monitor.evaluation.figures import ENGINE_RATE_FIELDS, engine_fields
from infertop.monitor.evaluation.window_rates import Values, WindowRates
from infertop.monitor.snapshot import EngineRankView, EngineView

LOCKSTEP_SPREAD = 0.05  # ranks within 5 % of each other's steps/s step in lockstep

# the engine figures a rank carries: those of EngineRankView it shares with EngineView
POSITION_FIELD = position_key(0)[1]
RANK_FIGURES = tuple(sorted(set(EngineRankView.model_fields) & set(EngineView.model_fields)))
# a figure engine_fields leaves out is EngineView's default (none is mutable: a copy is shared)
_DEFAULTS = {f: EngineView.model_fields[f].get_default(call_default_factory=True) for f in RANK_FIGURES}


def rank_counters(sample: NodeSample) -> Values:
    """Every rank's known counters, keyed (rank key, field): one extract for all ranks, so
    the monitor's rate cache keeps one window per node for them."""
    e = sample.engine
    if e is None or not e.ranks:
        return {}
    out: dict[Hashable, float] = {}
    for rank in e.ranks:
        r = rank.engine
        for key, attr in _rank_keys(rank.key):
            value = getattr(r, attr)
            if value is not None:
                out[key] = value
        for position, count in enumerate(r.accepted_tokens_by_position_total or ()):
            out[_position_key(rank.key, position)] = count
    return out


@lru_cache(maxsize=16_384)
def _rank_keys(rank: str) -> tuple[tuple[tuple[str, str], str], ...]:
    """(key, field) of each counter of the rank `rank`: the very same key tuples for every
    sample (as `figures._port_keys`), not ~160 new ones a node and reading kept in the rate
    window (~100 KiB a node at 128 nodes of 8 engines)."""
    return tuple(((rank, attr), attr) for attr in ENGINE_RATE_FIELDS)


@lru_cache(maxsize=16_384)
def _position_key(rank: str, position: int) -> tuple[Hashable, ...]:
    return (rank, *position_key(position))


class _RankRates:
    """The window's rates of one rank, asked for as `engine_view` asks a node's."""

    def __init__(self, rates: WindowRates, key: str):
        self._rates, self._key = rates, key

    def rate(self, what: Hashable) -> float | None:
        # a node's per-engine step key (engine, "steps_total") is the rank's own steps
        if isinstance(what, tuple) and len(what) == 2 and what[1] == POSITION_FIELD:
            return self._rates.rate((self._key, *what))  # a draft position's: kept whole
        field = what[-1] if isinstance(what, tuple) else what
        return self._rates.rate((self._key, field))


def tensor_parallel_size(config: NodeConfig | None, layout: Layout) -> int | None:
    if config is not None and config.engine is not None and config.engine.tensor_parallel_size:
        return config.engine.tensor_parallel_size
    return layout.cluster.tensor_parallel_size


def rank_gpus(
    rank: EngineRankSample, position: int, node_gpus: int | None, tp: int | None, engines: int = 0
) -> tuple[list[int] | None, str | None]:
    """(node-local GPU indices, where they came from) of one rank of `engines`."""
    if rank.tp_ranks:
        gpus = sorted({t % node_gpus for t in rank.tp_ranks}) if node_gpus else list(rank.tp_ranks)
        return gpus, "labels"
    if tp:
        first = position * tp
        if node_gpus is not None and first + tp > node_gpus:
            return None, None  # more engines than the layout's GPUs hold: unknown, not a guess
        return list(range(first, first + tp)), "layout"
    if engines and node_gpus and node_gpus % engines == 0:
        share = node_gpus // engines
        return list(range(position * share, position * share + share)), "gpus/engines"
    return None, None


def gpu_span(gpus: list[int] | None) -> str:
    """"GPU 3", "GPUs 6–7", "GPUs 0, 2, 5"; "" when unknown."""
    if not gpus:
        return ""
    if len(gpus) == 1:
        return f"GPU {gpus[0]}"
    if gpus == list(range(gpus[0], gpus[-1] + 1)):
        return f"GPUs {gpus[0]}–{gpus[-1]}"
    return "GPUs " + ", ".join(str(g) for g in gpus)


def rank_label(rank: EngineRankSample, gpus: list[int] | None) -> str:
    name = f"engine {rank.dp_rank}" if rank.dp_rank is not None else f"engine {rank.key}"
    span = gpu_span(gpus)
    return f"{name} ({span})" if span else name


def rank_views(
    samples: Sequence[NodeSample],
    now: float,
    node_gpus: int | None,
    tp: int | None,
    rates: WindowRates | None = None,
) -> list[EngineRankView] | None:
    """The ranks of the newest engine sample, each over the window (`samples`: the node's
    engine window, oldest first; `rates`: `rank_counters` over it, kept between ticks)."""
    engines = [s for s in samples if s.engine is not None]
    if not engines or engines[-1].engine is None or not engines[-1].engine.ranks:
        return None
    if rates is None:
        rates = WindowRates(rank_counters).update(engines)
    # each reading's ranks by key, once (not a search a rank and reading)
    by_key = [(s.taken_at, {r.key: r.engine for r in (s.engine.ranks if s.engine else None) or ()})
              for s in engines]
    views = []
    for position, rank in enumerate(engines[-1].engine.ranks):
        # the rank's engine in the node sample's place
        window = [RankReading(at, found) for at, ranks in by_key
                  if (found := ranks.get(rank.key)) is not None]
        made = engine_fields(window, now, cast(WindowRates, _RankRates(rates, rank.key)))
        if made is None:
            continue
        gpus, gpus_from = rank_gpus(rank, position, node_gpus, tp, len(engines[-1].engine.ranks))
        # the fields as engine_view has them, unvalidated: computed here, of the same types
        figures = {f: made[0].get(f, _DEFAULTS[f]) for f in RANK_FIGURES}
        views.append(EngineRankView.model_construct(
            **figures, key=rank.key, dp_rank=rank.dp_rank, gpus=gpus, gpus_from=gpus_from,
            label=rank_label(rank, gpus),
        ))
    return views or None


class RankReading(NamedTuple):
    """One rank's engine at one reading: what `engine_fields` reads of a node sample."""

    taken_at: float
    engine: EngineSample | None


def _busy(rank: EngineRankView) -> bool:
    """Serving requests: in lockstep an engine without any steps with dummy batches that
    vLLM and SGLang do not count, so its own steps/s says nothing of the group's pace."""
    return bool(rank.requests_running) and rank.decode_steps_per_s is not None


def node_steps_per_s(
    ranks: Sequence[EngineRankView], counted: float | None
) -> tuple[float | None, EngineRankView | None]:
    """(the node's decode steps/s, the rank named beside it) — the one definition.

    Under expert parallelism every rank of the step waits for the slowest, so the node
    steps at its slowest busy rank's pace: that is its figure, and that rank is named when
    the ranks differ by more than 5 % (in lockstep they read alike: none is named).
    Without a busy rank, `counted` (the fastest engine's counted steps: `figures.decode_steps_per_s`)."""
    busy = [r for r in ranks if _busy(r)]
    if not busy:
        return counted, None
    slowest = min(busy, key=lambda r: r.decode_steps_per_s or 0.0)
    fastest = max(r.decode_steps_per_s or 0.0 for r in busy)
    low = slowest.decode_steps_per_s or 0.0
    spread = (fastest - low) / fastest if fastest > 0 else 0.0
    return low, slowest if len(busy) >= 2 and spread > LOCKSTEP_SPREAD else None


def rank_fields(
    samples: Sequence[NodeSample], now: float, node_gpus: int | None, tp: int | None,
    rates: WindowRates | None, counted_steps_per_s: float | None,
) -> dict[str, Any]:
    """The node's engine fields its ranks set (none where it has no ranks): the ranks, and
    its decode steps/s by `node_steps_per_s` (`counted_steps_per_s`: the engine's counted
    figure, `figures.decode_steps_per_s`)."""
    ranks = rank_views(samples, now, node_gpus, tp, rates)
    if ranks is None:
        return {}
    steps, slowest = node_steps_per_s(ranks, counted_steps_per_s)
    return {
        "ranks": ranks, "decode_steps_per_s": steps, "fastest_rank_steps_per_s": counted_steps_per_s,
        "slowest_rank": slowest.label if slowest is not None else None,
    }
