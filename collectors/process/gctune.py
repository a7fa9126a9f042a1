"""Garbage-collector settings for a long-running monitoring process (imports nothing).

A tick makes ~40k short-lived objects (samples, views, the snapshot) while a window of
samples stays alive. With Python's default gen-0 threshold (700) every 2-3 ticks ended
in a full collection, 60-120 ms each at 128 nodes × 8 GPUs: a third of the process's
CPU and the worst tick times (benchmarks/bench_tick.py). Collecting the young
generation every 10,000 allocations instead leaves about one full collection a minute.
"""

from __future__ import annotations

import gc

GC_GEN0_THRESHOLD = 10_000


def tune_gc() -> None:
    """Call once, at the start of a process of our own (not from library code)."""
    gen0, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(max(GC_GEN0_THRESHOLD, gen0), gen1, gen2)
