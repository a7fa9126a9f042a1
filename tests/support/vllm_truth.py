"""The truth of a real vLLM's /metrics pages: what each engine figure infertop shows must
be over a window, computed independently of infertop (prometheus_client's parser)."""

from __future__ import annotations

import json
import math
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from tests.support.paths import infertop_bin
from tests.support.vllm_load import Load, LoadCounts, MetricsRelay, Page
from tests.support.vllm_server import RealVllmServer
from tests.support.waiting import until

WARM_REQUESTS_PER_CLIENT = 2  # answers the load has had per client (on average) before the window opens

LATENCIES = {
    "ttft": "vllm:time_to_first_token_seconds",
    "itl": "vllm:inter_token_latency_seconds",
    "e2e": "vllm:e2e_request_latency_seconds",
    "queue": "vllm:request_queue_time_seconds",
}


# the [slo] targets `drive` writes into its layout (s)
SLO_TARGETS_S = {"ttft": 0.3, "itl": 0.03}


def share_within_from_pages(first: Page, last: Page, family: str, target_s: float) -> tuple[float, float] | None:
    """The share of a latency's observations between two pages that lie within `target_s`,
    at least and at most, computed here from the two pages' cumulative buckets: at least
    the count at the last bound under the target, at most the count at the first bound
    at or over it (equal where the target is a bound). None with no observation."""
    a, b = page_values(first.text)["buckets"].get(family, {}), page_values(last.text)["buckets"][family]
    les = sorted(b)
    increase = {le: b[le] - a.get(le, 0.0) for le in les}
    total = increase[les[-1]]
    if total <= 0:
        return None
    at_least = max((increase[le] for le in les if le <= target_s), default=0.0)
    at_most = min(increase[le] for le in les if le >= target_s)
    return at_least / total, at_most / total


def page_values(text: str) -> dict[str, Any]:
    """The page's families as {sample name: summed value} plus bucket lists."""
    sums: dict[str, float] = {}
    buckets: dict[str, dict[float, float]] = {}
    finished = {"stop": 0.0, "length": 0.0}
    aborted = 0.0
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            sums[s.name] = sums.get(s.name, 0.0) + s.value
            if s.name.endswith("_bucket"):
                le = float(s.labels["le"])
                per = buckets.setdefault(s.name[: -len("_bucket")], {})
                per[le] = per.get(le, 0.0) + s.value
            if s.name == "vllm:request_success_total":
                reason = s.labels.get("finished_reason")
                if reason in finished:
                    finished[reason] += s.value
                else:
                    aborted += s.value
    sums["finished"] = sum(finished.values())
    sums["aborted"] = aborted
    return {"sums": sums, "buckets": buckets}


# the figures that are a counter's increase over the window's seconds
RATES = frozenset({
    "decode_steps_per_s", "accepted_tokens_per_s", "full_acceptance_tokens_per_s", "prompt_tokens_per_s",
    "requests_finished_per_s", "requests_aborted_per_s", "preemptions_per_s",
})


@dataclass
class Truth:
    figures: dict[str, float | None]
    bounds: dict[str, tuple[float, float | None]]
    # when the engine drew each edge page is known only to within the relay's fetch of it
    # (seconds on a loaded host): a rate's truth lies between its increase over the longest
    # and over the shortest span those fetches allow, as factors of the midpoint figure
    rate_range: tuple[float, float] = (1.0, 1.0)

    def agrees(self, name: str, got: float | None, rel: float) -> bool:
        """`got` is this figure's truth within `rel` (a rate: anywhere in its range)."""
        want = self.figures[name]
        if want is None or got is None:
            return got is None and want is None
        if want == 0:
            return got == 0
        low, high = self.rate_range if name in RATES else (1.0, 1.0)
        return want * low * (1 - rel) <= got <= want * high * (1 + rel)


def _bucket_bounds(first: dict[float, float], last: dict[float, float], q: float) -> tuple[float, float | None] | None:
    les = sorted(last)
    inc = [last[le] - first.get(le, 0.0) for le in les]
    total = inc[-1]
    if total <= 0:
        return None
    rank = q * total
    lower = 0.0
    for le, cum in zip(les, inc, strict=True):
        if cum >= rank:
            return (lower, None if math.isinf(le) else le)
        lower = le
    return None


def truth_from_pages(first: Page, last: Page, monitor_span_s: float | None = None) -> Truth:
    """The figures over the span from page `first` to page `last`. `monitor_span_s`: the
    monitor's own time between its readings of them (reading_span_s), which the rates'
    range takes in: it stamps a reading at the midpoint of its request and the answer,
    and a request may wait for the relay (a thread of the busy test process) to take it,
    so its span may differ from the relay's by that wait at either end (seen 4.5 % of a
    10 s window with make bench beside the suite)."""
    a, b = page_values(first.text), page_values(last.text)
    dt = last.served_at - first.served_at

    def delta(name: str) -> float:
        return b["sums"].get(name, 0.0) - a["sums"].get(name, 0.0)

    gen = delta("vllm:generation_tokens_total")
    drafts = delta("vllm:spec_decode_num_drafts_total")
    drafted = delta("vllm:spec_decode_num_draft_tokens_total")
    accepted = delta("vllm:spec_decode_num_accepted_tokens_total")
    figures: dict[str, float | None] = {
        "decode_steps_per_s": delta("vllm:iteration_tokens_total_count") / dt,
        "accepted_tokens_per_s": gen / dt,
        "full_acceptance_tokens_per_s": (gen + drafted - accepted) / dt,
        "prompt_tokens_per_s": delta("vllm:prompt_tokens_total") / dt,
        "draft_acceptance": accepted / drafted if drafted else None,
        "mean_acceptance_length": 1 + accepted / drafts if drafts else None,
        "requests_finished_per_s": delta("finished") / dt,
        "requests_aborted_per_s": delta("aborted") / dt,
        "preemptions_per_s": delta("vllm:num_preemptions_total") / dt,
        "prefix_cache_hit_rate": (delta("vllm:prefix_cache_hits_total") / delta("vllm:prefix_cache_queries_total")
                                  if delta("vllm:prefix_cache_queries_total") else None),
        "requests_running": b["sums"]["vllm:num_requests_running"],
        "requests_waiting": b["sums"]["vllm:num_requests_waiting"],
        "kv_cache_usage": b["sums"]["vllm:kv_cache_usage_perc"],
    }
    bounds = {}
    for short, family in LATENCIES.items():
        for q, p in ((0.5, "p50"), (0.99, "p99")):
            got = _bucket_bounds(a["buckets"].get(family, {}), b["buckets"][family], q)
            if got is not None:
                bounds[f"{short}_{p}"] = got
    longest = last.read_at - (first.asked_at if first.asked_at is not None else first.read_at)
    shortest = (last.asked_at if last.asked_at is not None else last.read_at) - first.read_at
    if monitor_span_s is not None:
        longest, shortest = max(longest, monitor_span_s), min(shortest, monitor_span_s)
    return Truth(figures, bounds, (dt / longest, dt / shortest if shortest > 0 else math.inf))


def _epoch(iso: str | None) -> float | None:
    return None if iso is None else datetime.fromisoformat(iso).timestamp()


# the edges of the readings behind an engine's window figures: a scrape's first and last
# reading, a log's first and last line
SCRAPE_EDGES = ("window_first_reading_at", "window_last_reading_at")
LOG_EDGES = ("log_window_start_at", "log_window_end_at")


# how far a reading's stamp may lie from the relay's span of its page: the monitor stamps
# the midpoint of its request and the answer, and the request may wait for the relay (a
# thread of the busy test process) to take it: seen 0.56 s before the relay's span with
# make bench beside the suite. Rounds are an interval (2 s) apart: the page within 1 s is it.
PAGE_MATCH_S = 1.0


def window_pages(pages: list[Page], engine: dict[str, Any]) -> tuple[Page, Page]:
    """The relay's pages the monitor's window figures were computed from: the engine view
    says when its first and last readings were (`window_first_reading_at` /
    `window_last_reading_at`: the midpoint of the monitor's request and its answer), and
    each is the page the relay was serving then — nearest its ask-to-answer span (rounds
    are an interval apart; at start-up the monitor may read twice in a moment)."""
    edges = [_epoch(engine[k]) for k in SCRAPE_EDGES]
    assert None not in edges, f"the monitor gave no window edges: {edges}"
    out = []
    for edge in edges:
        assert edge is not None
        ranked = sorted(pages, key=lambda p: p.distance(edge))
        page = ranked[0]
        assert page.distance(edge) < PAGE_MATCH_S, (edge, [(p.asked_at, p.read_at) for p in ranked[:2]])
        out.append(page)
    return out[0], out[1]


def _span_s(engine: dict[str, Any], edges: tuple[str, str]) -> float | None:
    first, last = (_epoch(engine.get(k)) for k in edges)
    return None if first is None or last is None else last - first


def reading_span_s(engine: dict[str, Any]) -> float:
    """The monitor's time from its window's first engine reading to its last (s)."""
    span = _span_s(engine, SCRAPE_EDGES)
    assert span is not None, "the monitor gave no window edges"
    return span


def scrape(base_url: str) -> dict[str, float]:
    with urllib.request.urlopen(base_url + "/metrics", timeout=60) as response:
        return page_values(response.read().decode())["sums"]


@dataclass
class Run:
    snapshot: dict[str, Any]
    pages: list[Page]  # every page the monitor read, as the relay passed it on
    counts: LoadCounts  # what the load's client got back
    before: dict[str, float]  # the engine's page before the load, and after it ended
    after: dict[str, float]
    log: Path
    taken_at: float  # the snapshot's end of window (unix s)
    wall_s: float
    attempts: int = 1  # snapshots taken until one's window held enough readings (SNAPSHOT_ATTEMPTS)


# a snapshot whose window the starved engine answered too rarely in is taken again, this
# many times at most: under make bench beside the suite, vLLM (at nice 10) once answered
# 2 pages 2.9 s apart and logged 2 stats lines in a 10 s window; the checks compare
# figures with the truth of the readings, which takes readings spanning half a window
SNAPSHOT_ATTEMPTS = 3


def window_spans(snapshot: dict[str, Any]) -> dict[str, float | None]:
    """How much of the window the readings behind each node's engine figures span (s):
    the scraped engine's first to last reading, the logged engine's first to last line."""
    edges = {"scraped": SCRAPE_EDGES, "logged": LOG_EDGES}
    return {node["name"]: _span_s(node["engine"], edges[node["name"]])
            for node in snapshot["nodes"] if node["name"] in edges and node.get("engine")}


def drive(server: RealVllmServer, work: Path, interval_s: float, window_s: float) -> Run:
    """`infertop snapshot --json` over one window of a bounded load: node "scraped" reads
    the engine's /metrics through a recording relay, node "logged" (local) its log."""
    started = time.monotonic()
    before = scrape(server.base_url)
    with MetricsRelay(server.base_url) as relay:
        layout = work / "cluster.toml"
        layout.write_text(
            f'[cluster]\nname = "real-vllm"\ninterval_s = {interval_s}\n\n'
            # targets between vLLM's bucket bounds (TTFT 0.25|0.5, ITL 0.025|0.05): the
            # shares within them are bounds, checked against the pages (SLO_TARGETS_S)
            f'[slo]\nttft_p99_s = {SLO_TARGETS_S["ttft"]}\nitl_p99_s = {SLO_TARGETS_S["itl"]}\n\n'
            f'[[nodes]]\nname = "scraped"\nrole = "decode"\nengine = {{ url = {json.dumps(relay.url)} }}\n\n'
            f'[[nodes]]\nname = "logged"\nrole = "decode"\nlocal = true\n'
            f'engine = {{ log = {json.dumps(str(server.log_path))} }}\n'
        )
        # no cap on requests: the load runs from before the window opens until after the
        # snapshot returned, so it is steady over every reading (bounded by that time)
        load = Load(server.base_url, server.name).start()
        try:
            # warm before the window opens: every client has had answers (an event, polled)
            assert load.first_done.wait(600), f"no answer from vLLM: {load.counts.errors[:3]}\n{server.log_tail()}"
            until(lambda: load.counts.requests >= WARM_REQUESTS_PER_CLIENT * load.workers, 600, "a warm load")
            attempts = 0
            while attempts < SNAPSHOT_ATTEMPTS:
                attempts += 1
                out = subprocess.run(
                    [infertop_bin(), "snapshot", "--layout", str(layout), "--window", str(window_s), "--json"],
                    capture_output=True, text=True, timeout=900, check=False,
                )
                assert load.running(), f"the load ended inside the window: {load.counts.errors[:3]}"
                if out.returncode != 0:
                    break
                spans = window_spans(json.loads(out.stdout))
                # the log's span only where it has one (an engine that logs no stats lines)
                if (spans.get("scraped") or 0.0) >= window_s / 2 and (spans.get("logged") or window_s) >= window_s / 2:
                    break
        finally:
            counts = load.finish()
        pages = list(relay.pages)
    after = scrape(server.base_url)
    assert out.returncode == 0, out.stderr[-3000:]
    snapshot = json.loads(out.stdout)
    taken_at = datetime.fromisoformat(snapshot["taken_at"]).timestamp()
    return Run(snapshot, pages, counts, before, after, server.log_path, taken_at, time.monotonic() - started,
               attempts)
