"""Histogram `_bucket` sample lines read without prometheus_client's parser.

That parser reads labels a character at a time (~20–50 µs a line); a vLLM node with 8
data-parallel engines serves ~700 latency bucket lines a scrape, which would cost ~20 ms
a node — more than the rest of its page. A bucket line has one simple shape,
`name{k="v",…,le="0.05"} 123 [timestamp]`, and infertop needs only its `le` and its
value (buckets are summed by `le` over a node's engines, collectors/histograms.py): both
are read here with C-speed regular expressions. A line of any other shape, or whose
`le` is not a number, is left to the full parser (which judges garbage as before).

The labels given back are `{"le": …}` only; `series_key` is the raw label text, which
tells one series from another for the first-value-kept rule on duplicates.
"""

from __future__ import annotations

import math
import re

# name, the label text (quoted values may hold `}` and escaped quotes), value, timestamp
_LINE = re.compile(
    r'([a-zA-Z_:][a-zA-Z0-9_:]*_bucket)\{((?:[^"}]|"(?:[^"\\]|\\.)*")*)\}\s+(\S+)(?:\s+\S+)?\s*')
# `le="…"` at a label boundary. A look-alike inside another label's quoted value can only
# capture text that starts after a closing quote (`,`, `}` or spaces): never a number, so
# it falls to the full parser instead of being misread.
_LE = re.compile(r'(?:^|,)\s*le\s*=\s*"([^"\\]*)"')


def parse_bucket_line(line: str) -> tuple[str, dict[str, str], float, str] | None:
    """(sample name, {"le": bound}, value, series key) of one bucket line; None when it
    has another shape (the full parser reads it) or a value that is not finite."""
    m = _LINE.fullmatch(line)
    if m is None:
        return None
    name, raw, value_text = m.groups()
    le = _LE.search(raw)
    if le is None:
        return None
    try:
        float(le.group(1))
        value = float(value_text)
    except ValueError:
        return None
    if not math.isfinite(value):
        return None
    return name, {"le": le.group(1)}, value, raw
