"""Parsing one page of each kind: the exact path against the fast path (issue 15).

The exact path is what `parse_exposition(text, wanted=…)` did before issue 15: every
line checked in Python, the wanted ones parsed by prometheus_client. The fast path
(collectors/pages/exposition_fast.py) must give the same result (checked here on every page
before timing) at least 5× faster. Pages: the bundled fixtures (tests/fixtures), the
real-size vLLM page built through prometheus_client from vLLM's definitions, and the
demo's realistic pages (infertop/demo/realistic.py). Timings are the best CPU time of
several rounds, the two paths interleaved, so a busy machine slows both alike.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks.common import Row
from infertop.collectors.pages.exporters import EXPORTER_WANTED
from infertop.collectors.pages.exposition import parse_exposition, parse_exposition_exact
from infertop.collectors.pages.exposition_fast import parse_wanted_fast
from infertop.collectors.pages.profiles import BUNDLED_PROFILES, engine_sample_from_exposition
from infertop.collectors.sources.scrape import WHOLE_PAGE_EVERY, latency_every_rounds
from infertop.demo import realistic, realistic_hosts
from infertop.demo.scenario import SimCluster

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # tests.support: the suite's servers and pages
from tests.support.vllm_dp_page import vllm_dp_page  # noqa: E402

COMMAND = "python -m benchmarks.run_all bench_parse"
TARGET = 5.0
NODES = 128
FIXTURES = ROOT / "tests" / "fixtures"


def pages() -> list[tuple[str, str, frozenset[str]]]:
    """(what, text, wanted names) for every page measured."""
    vllm = BUNDLED_PROFILES["deepinfer"].wanted
    exporters = frozenset(EXPORTER_WANTED)
    node = SimCluster(16, started_at=time.time() - 600).nodes["decode-01"]
    now = time.time()
    out = [
        ("vLLM, 8 DP engines, stock definitions (prometheus_client)", vllm_dp_page(8)[0], vllm),
        ("demo realistic engine page (vLLM, 8 DP engines)", realistic.engine_page(node, now), vllm),
        ("demo realistic dcgm-exporter, 8 GPUs, default counters", realistic_hosts.dcgm_page(node, now), exporters),
        ("demo realistic node_exporter, 36 interfaces, 224 CPUs", realistic_hosts.node_exporter_page(node, now),
         exporters),
    ]
    for name, wanted in (("exposition/vllm_v1.txt", vllm), ("exposition/sglang.txt",
                         BUNDLED_PROFILES["sglang"].wanted), ("exposition/dcgm.txt", exporters),
                         ("exposition/node_exporter.txt", exporters), ("npu/npu_exporter_current.txt", exporters)):
        out.append((f"bundled {name}", (FIXTURES / name).read_text(encoding="utf-8"), wanted))
    return out


def best_ms(fns: list[Callable[[], object]], rounds: int = 15, inner: int = 3) -> list[float]:
    """Best CPU time of each function (this process's, so other processes on a busy
    machine do not count), the functions interleaved round by round."""
    best = [float("inf")] * len(fns)
    for _ in range(rounds):
        for i, fn in enumerate(fns):
            start = time.process_time()
            for _ in range(inner):
                fn()
            best[i] = min(best[i], (time.process_time() - start) / inner * 1e3)
    return best


def measure() -> list[tuple[str, int, int, float, float, float]]:
    """(page, lines, bytes, exact ms, fast ms, skimmed ms), after checking all give the same."""
    rows = []
    for what, text, wanted in pages():
        exact, fast = parse_exposition_exact(text, wanted=wanted), parse_exposition(text, wanted=wanted)
        if (exact.samples, exact.aliases, exact.duplicates) != (fast.samples, fast.aliases, fast.duplicates):
            raise AssertionError(f"fast path differs on {what}")
        if parse_wanted_fast(text, wanted) is None:
            raise AssertionError(f"{what} fell back to the exact path")
        if parse_wanted_fast(text, wanted, skim=True) != parse_wanted_fast(text, wanted):
            raise AssertionError(f"{what} skimmed differs")
        exact_ms, fast_ms, skim_ms = best_ms([
            lambda t=text, w=wanted: parse_exposition_exact(t, wanted=w),
            lambda t=text, w=wanted: parse_exposition(t, wanted=w),
            lambda t=text, w=wanted: parse_exposition(t, wanted=w, skim=True),
        ])
        rows.append((what, text.count("\n"), len(text.encode()), exact_ms, fast_ms, skim_ms))
    return rows


def run() -> list[Row]:
    measured = measure()
    rows = []
    for what, lines, size, exact_ms, fast_ms, skim_ms in measured:
        ratio = exact_ms / fast_ms
        rows.append(Row(
            f"parse {what} ({lines} lines, {size / 1024:.0f} KiB): exact / fast path (/ skimmed), ms",
            f"{exact_ms:.2f} / {fast_ms:.3f} ({ratio:.1f}×) / {skim_ms:.3f}",
            f"≥ {TARGET:g}×",
            "met" if ratio >= TARGET else f"missed ({ratio:.1f}×)",
            COMMAND,
        ))
    by_name = {what: (exact_ms, fast_ms, skim_ms) for what, _, _, exact_ms, fast_ms, skim_ms in measured}
    node_pages = [w for w in by_name if w.startswith("demo realistic")]
    exact_s = sum(by_name[w][0] for w in node_pages) * NODES / 1e3
    fast_s = sum(by_name[w][1] for w in node_pages) * NODES / 1e3
    skim_s = sum(by_name[w][2] for w in node_pages) * NODES / 1e3
    # as collectors.sources.scrape reads them: whole one round in WHOLE_PAGE_EVERY, skimmed on the others
    mixed_s = (fast_s + (WHOLE_PAGE_EVERY - 1) * skim_s) / WHOLE_PAGE_EVERY
    rows.append(Row(
        f"parse CPU per second, {NODES} nodes × 3 realistic pages at 1 s: exact / fast path / "
        f"read whole 1 round in {WHOLE_PAGE_EVERY}, skimmed on the others (s of CPU per s)",
        f"{exact_s:.2f} / {fast_s:.2f} / {mixed_s:.2f}",
        "—",
        "info",
        COMMAND,
    ))
    rows.append(latency_cadence_row())
    return rows


def latency_cadence_row() -> Row:
    """The demo's realistic engine page read into an EngineSample (parse + the
    profile's figures), with its latency buckets and without them, and on average at the
    cadence the scrape source reads them (collectors.sources.scrape.latency_every_rounds)."""
    profile = BUNDLED_PROFILES["deepinfer"]
    node = SimCluster(16, started_at=time.time() - 600).nodes["decode-01"]
    text = realistic.engine_page(node, time.time())
    every = latency_every_rounds(1.0, 10.0)

    def read(wanted: frozenset[str]) -> object:
        return engine_sample_from_exposition(parse_exposition(text, wanted=wanted), profile)

    def with_buckets() -> object:
        return read(profile.wanted)

    def without_buckets() -> object:
        return read(profile.wanted_without_latency)

    with_ms, without_ms = best_ms([with_buckets, without_buckets])
    mean_ms = (with_ms + (every - 1) * without_ms) / every
    return Row(
        f"read the realistic engine page (parse + figures): with / without latency buckets; "
        f"mean at 1 in {every} rounds (1 s, 10 s window) (ms)",
        f"{with_ms:.2f} / {without_ms:.2f}; {mean_ms:.2f} ({NODES * (with_ms - mean_ms):.0f} ms of CPU a second "
        f"less at {NODES} nodes)",
        "—",
        "info",
        COMMAND,
    )


if __name__ == "__main__":
    for row in run():
        print(f"{row.figure}: {row.value} ({row.verdict})")
