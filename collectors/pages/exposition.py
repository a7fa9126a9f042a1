"""Prometheus text exposition → an index of samples by their exact name.

Parsing uses `prometheus_client`'s own text parser. That parser strips `_total` from a
counter's *family* name and emits `<name>_created` as a family of its own, so nothing
here looks at family names: every lookup is by the exact *sample* name
(`vllm:prompt_tokens_total`, `vllm:iteration_tokens_total_count`), never by prefix or
substring, so `_created`, `_bucket` and `_per_pos` series are never picked up by mistake.

A series (a sample name with one set of labels) exposed twice on one page is kept once:
its *first* value, as Prometheus does (it appends the first sample of a series and drops
later ones as duplicates, prometheus/prometheus#12933). Summing them would show an engine's
5 running requests and its 7 as 12; `Exposition.duplicates` counts what was dropped, and
`duplicate_note` says so.

One more quirk: a counter exposed *without* the `_total` suffix (dcgm-exporter's
`DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION`) comes back from the parser renamed to
`<name>_total`, and cannot be told apart from one exposed as `<name>_total`. Such
samples are indexed under the reported name and, as a fallback only, under the name
without the suffix — so the name as the exporter wrote it is found either way.

Whatever the text holds (garbage, truncation, binary, hostile labels) the only exception
that leaves this module is `ExpositionError`, whose message is short and never quotes
the text itself (it may hold terminal escapes or secrets).
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

from infertop.collectors.pages.exposition_fast import parse_wanted_fast
from infertop.collectors.safe_text import inert_text, redact_url

# A real node_exporter page is ~100–500 KiB; anything far larger is not a metrics page.
MAX_EXPOSITION_BYTES = 32 * 1024 * 1024
# Label values end up on screen (GPU model names, hostnames): cap them.
MAX_LABEL_CHARS = 200
# The fast path for wanted names (collectors/pages/exposition_fast.py); off only for a
# benchmark that measures the exact path inside a running monitor.
FAST_PATH = True


class ExpositionError(ValueError):
    """Text that is not usable Prometheus exposition. `str()` is short and safe to show."""


def clean_label(value: str | None) -> str | None:
    """A label value fit for display: controls shown visibly, length capped (`inert_text`).

    Rich markup is left as is: rendering it inert is the view's job, and the text may be
    a legitimate name with brackets in it.
    """
    if value is None:
        return None
    return inert_text(value, MAX_LABEL_CHARS)


def label_text(value: str | None) -> str | None:
    """`clean_label` of a label value. A page names the same devices, GPU models and
    UUIDs round after round: a short value is made inert once (a bounded cache, as the
    values come from the page; a long one, cut anyway, every time)."""
    if value is None or len(value) > MAX_LABEL_CHARS:
        return clean_label(value)
    return _short_label_text(value)


@functools.lru_cache(maxsize=4096)
def _short_label_text(value: str) -> str | None:
    return clean_label(value)


@dataclass
class Exposition:
    """Samples by exact sample name: name → [(labels, value)]. Non-finite values dropped.
    Labels are read-only (the fast path shares one dict among every sample with the same
    label text: `exposition_fast.ReadOnlyLabels`); `dict(labels)` to change them."""

    samples: dict[str, list[tuple[dict[str, str], float]]] = field(default_factory=dict)
    # counter samples the parser suffixed with `_total`, under their unsuffixed name
    aliases: dict[str, list[tuple[dict[str, str], float]]] = field(default_factory=dict)
    # sample name → how many later copies of an already seen series were dropped
    duplicates: dict[str, int] = field(default_factory=dict)

    def __contains__(self, name: object) -> bool:
        return name in self.samples or name in self.aliases

    def series(self, name: str) -> list[tuple[dict[str, str], float]]:
        found = self.samples.get(name)
        return found if found else self.aliases.get(name, [])

    def first_present(self, names: Iterable[str]) -> str | None:
        """The first of `names` (newest naming first, by convention) that has samples."""
        for name in names:
            if self.series(name):
                return name
        return None

    def names(self) -> list[str]:
        return sorted(self.samples)

    def has_prefix(self, prefix: str) -> bool:
        """Whether any sample name starts with `prefix` (used only to recognise an
        exporter's page, e.g. ``DCGM_FI_``; never to pick a value)."""
        return any(name.startswith(prefix) for name in self.samples)


# the metric name at the start of a sample line: `name{…} value` or `name value`
_SAMPLE_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*(?=[{ \t])")


def _keep_wanted(text: str, wanted: AbstractSet[str], where: str) -> str:
    """Only the sample lines whose name is wanted (and every comment line).

    prometheus_client's parser reads labels a character at a time (~20–50 µs a line);
    a real node_exporter page has thousands of lines of which a monitor needs a few
    dozen. A line that does not even start with a metric name is still garbage.
    """
    kept: list[str] = []
    for line in text.split("\n"):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            kept.append(line)
            continue
        found = _SAMPLE_NAME.match(stripped)
        if found is None or not _has_value(stripped, found.end()):
            raise ExpositionError(f"bad exposition from {where}: a line is not a metric sample")
        if found.group(0) in wanted:
            kept.append(line)
    return "\n".join(kept)


def _has_value(line: str, name_end: int) -> bool:
    """Whether a skipped line at least ends its name (and labels) with a number, so
    that prose or HTML is still called garbage without parsing every label."""
    rest = line[name_end:]
    if rest.startswith("{"):
        close = rest.rfind("}")
        if close < 0:
            return False
        rest = rest[close + 1 :]
    fields = rest.split()
    if not fields or len(fields) > 2:
        return False
    try:
        float(fields[0])
    except ValueError:
        return False
    return True


def _usable(text: str, where: str) -> str:
    """`where` made safe to show; `ExpositionError` if the text is too big or binary."""
    where = redact_url(where)
    if len(text) > MAX_EXPOSITION_BYTES:
        raise ExpositionError(f"bad exposition from {where}: larger than {MAX_EXPOSITION_BYTES} bytes")
    if "\x00" in text:
        raise ExpositionError(f"bad exposition from {where}: binary data, not text")
    return where


def parse_exposition(
    text: str, where: str = "text", wanted: AbstractSet[str] | None = None, skim: bool = False
) -> Exposition:
    """Parse exposition text; raise `ExpositionError` naming `where` on anything unusable.

    `wanted`, when given, is the set of sample names the caller will look up: other
    sample lines are skipped before parsing (a large saving on big pages), and an
    ordinary page is read by the fast path (`collectors/pages/exposition_fast.py`), which
    returns what the exact path below would, or hands the page back to it. With `skim`
    too, the lines skipped are not checked either (only the page's last line is), so
    a page with a bad line among them may be read all the same; the wanted figures are
    the same either way.
    """
    where = _usable(text, where)
    if wanted is not None and FAST_PATH:
        tables = parse_wanted_fast(text, wanted, skim)
        if tables is not None:
            return Exposition(*tables)
    return parse_exposition_exact(text, where, wanted)


def parse_exposition_exact(
    text: str, where: str = "text", wanted: AbstractSet[str] | None = None
) -> Exposition:
    """`parse_exposition` without the fast path: `prometheus_client`'s parser on the
    wanted lines (or all). The reference the fast path is tested against."""
    where = _usable(text, where)
    if wanted is not None:
        text = _keep_wanted(text, wanted, where)
    index = Exposition()
    seen: set[tuple[str, frozenset[tuple[str, str]]]] = set()
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                value = float(sample.value)
                if not math.isfinite(value):
                    continue
                labels = {str(k): str(v) for k, v in sample.labels.items()}
                name = str(sample.name)
                series = (name, frozenset(labels.items()))
                if series in seen:
                    index.duplicates[name] = index.duplicates.get(name, 0) + 1
                    continue
                seen.add(series)
                index.samples.setdefault(name, []).append((labels, value))
                if family.type == "counter" and name == f"{family.name}_total":
                    index.aliases.setdefault(family.name, []).append((labels, value))
    except Exception as exc:  # the parser raises ValueError, IndexError, TypeError, … on garbage
        # never echo the offending text: it may be huge, hostile or hold secrets
        raise ExpositionError(
            f"bad exposition from {where}: not Prometheus text ({type(exc).__name__})"
        ) from None
    return index


def duplicate_note(index: Exposition, where: str) -> str | None:
    """One line naming the series a page exposed more than once (first value kept)."""
    if not index.duplicates:
        return None
    count = sum(index.duplicates.values())
    names = sorted(index.duplicates)
    shown = ", ".join(clean_label(n[:80]) or "" for n in names[:3])
    more = f" and {len(names) - 3} more names" if len(names) > 3 else ""
    return (
        f"{redact_url(where)}: {count} duplicate series of {shown}{more}: "
        "first value kept, not summed"
    )
