"""Accepted draft tokens counted per draft position (speculative decoding).

vLLM counts, for each position of a draft (0 = the first drafted token), how many drafted
tokens at that position were accepted: `vllm:spec_decode_num_accepted_tokens_per_pos_total`
with a `position` label "0".."k-1" (vLLM 0.33 `vllm/v1/spec_decode/metrics.py`; every
position's series exists from start-up, one per configured draft token, beside `engine`).
A drafted token is only accepted when every token before it was, so the counts do not
rise with the position, and they sum to `vllm:spec_decode_num_accepted_tokens_total`.
Over a window, Δaccepted[i] / Δdrafts is the acceptance at position i — the figure vLLM's
own log prints as "Per-position acceptance rate" — which tells a drafter that fails at its
first token from one that fails late.

SGLang serves no per-position figure (only its mean accept length and rate gauges):
there the node's chart stays unknown.

Counts of one position are summed over the series that carry it (data-parallel engines);
the result is one counter per position, 0..k-1, or None where a position is missing or
out of bounds (a page that skips one is not trusted at all).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from infertop.collectors.safe_text import whole_number

# counters, first present wins (vLLM V1)
PER_POSITION_NAMES: tuple[str, ...] = ("vllm:spec_decode_num_accepted_tokens_per_pos_total",)
POSITION_LABEL = "position"
POSITION_FIELD = "accepted_tokens_by_position_total"  # the EngineSample field they fill
# MTP drafts 1–3 tokens, EAGLE up to ~8, n-gram up to ~10: 32 is beyond any real drafter
MAX_POSITIONS = 32
COUNTER_MAX = float(2**64)


def accepted_by_position(series: Iterable[tuple[Mapping[str, str], float]]) -> tuple[float, ...] | None:
    """Per position 0..k-1, the accepted-token counter summed over the series; None when
    no series has a position, a position is missing, or a value is not a count."""
    sums: dict[int, float] = {}
    for labels, value in series:
        position = whole_number(labels.get(POSITION_LABEL, ""), max_digits=2)
        if position is None or position >= MAX_POSITIONS:
            continue
        if not math.isfinite(value) or value < 0 or value > COUNTER_MAX:
            return None
        sums[position] = sums.get(position, 0.0) + value
    if not sums or sorted(sums) != list(range(len(sums))):
        return None
    return tuple(sums[i] for i in range(len(sums)))


def position_key(position: int) -> tuple[str, str]:
    """The rate key of one position's counter: (which, field), as a GPU's counters are."""
    return (f"position={position}", POSITION_FIELD)
