"""The node screen's engines (one sub-row per data-parallel rank), real GPU activity and
the processes holding each GPU. Pure (Rich `Text` only); outside text through `inert`.

Shown only where the snapshot carries them: a node whose page tells no engines apart,
whose GPUs report no activity and whose source lists no processes looks as before.
"""

from __future__ import annotations

from collections.abc import Iterator

from rich.text import Text

from infertop.monitor.format import UNKNOWN, fmt_bytes, fmt_latency, fmt_num, fmt_pct
from infertop.monitor.snapshot import EngineRankView, EngineView, GpuView
from infertop.tui.text import inert

RANK_COLUMNS: tuple[tuple[str, str, int | None], ...] = (
    ("rank", "ENGINE", 8),
    ("gpus", "GPUS", 9),
    ("steps", "STEPS/S", 8),
    ("running", "RUN", 5),
    ("waiting", "WAIT", 5),
    ("kv", "KV", 5),
    ("accept", "ACCEPT", 7),
    ("tokens", "TOK/S", 8),
    ("itl_p50", "ITL p50", 9),
    ("itl_p99", "ITL p99", 9),
    ("ttft_p50", "TTFT p50", 9),
)


def _r(text: str, style: str = "") -> Text:
    return Text(text, style=style, justify="right", no_wrap=True)


def _gpus(rank: EngineRankView) -> str:
    if not rank.gpus:
        return UNKNOWN
    if len(rank.gpus) > 1 and rank.gpus == list(range(rank.gpus[0], rank.gpus[-1] + 1)):
        return f"{rank.gpus[0]}–{rank.gpus[-1]}"
    return ",".join(str(g) for g in rank.gpus)


def rank_rows(engine: EngineView | None) -> Iterator[tuple[str, tuple[Text, ...]]]:
    """(row key, cells) per rank; nothing for a node with fewer than two ranks (its one
    engine is the node's engine block)."""
    ranks = (engine.ranks or []) if engine is not None else []
    if len(ranks) < 2:
        return
    for r in ranks:
        name = str(r.dp_rank) if r.dp_rank is not None else r.key
        yield r.key, (
            inert(name, max_len=16),
            _r(_gpus(r)),
            _r(fmt_num(r.decode_steps_per_s, 1)),
            _r(fmt_num(r.requests_running, 0)),
            _r(fmt_num(r.requests_waiting, 0)),
            _r(fmt_pct(r.kv_cache_usage)),
            _r(fmt_pct(r.draft_acceptance)),
            _r(fmt_num(r.accepted_tokens_per_s, 0)),
            _r(fmt_latency(r.itl_p50_s)),
            _r(fmt_latency(r.itl_p99_s)),
            _r(fmt_latency(r.ttft_p50_s)),
        )


def activity_text(gpus: list[GpuView]) -> Text:
    """Per GPU: util beside real activity (SM, occupancy, tensor, DRAM) and who holds it;
    empty when no GPU reports either."""
    out = Text()
    if any(g.sm_active_pct is not None or g.tensor_active_pct is not None for g in gpus):
        source = next((g.activity_source for g in gpus if g.activity_source), None)
        out.append(f"ACTIVITY ({source or '?'}): util beside what the SMs did\n", style="bold")
        for g in gpus:
            out.append(f"  GPU {g.index:<3} util {fmt_num(g.util_pct, 0, '%'):>5}"
                       f"  SM {fmt_num(g.sm_active_pct, 0, '%'):>5}"
                       f"  occupancy {fmt_num(g.sm_occupancy_pct, 0, '%'):>5}"
                       f"  tensor {fmt_num(g.tensor_active_pct, 0, '%'):>5}"
                       f"  DRAM {fmt_num(g.dram_active_pct, 0, '%'):>5}\n")
    if any(g.processes for g in gpus):
        out.append("PROCESSES holding each GPU\n", style="bold")
        for g in gpus:
            for p in g.processes or ():
                out.append(f"  GPU {g.index:<3} pid {p.pid:<8} ")
                out.append_text(inert(p.user or UNKNOWN, max_len=16))
                out.append(f"  {fmt_bytes(p.gpu_mem_bytes):>9}  ")
                out.append_text(inert(p.command or UNKNOWN, max_len=80))
                out.append("\n")
    out.rstrip()
    return out
