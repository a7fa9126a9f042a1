"""The `prom` source: every node's figures read from Prometheus (large clusters).

prometheus-api-client is synchronous (requests), so its calls run on a small thread
pool of this source's own (the default executor is shared with NVML/psutil reads): one
round of queries per tick, all at once, each bounded by `timeout_s`. Queries aggregate on
the server (collectors/sources/promql.py), so a tick pulls O(nodes) engine and host series, plus
O(GPUs) per-GPU series for the nodes whose detail a tick reads (collectors/sources/prom_detail.py:
in view, flagged, and a rotation that reaches every node within 30 s; every node up to 64).

Each exporter family becomes its own stream of samples ("prom:engine", "prom:gpu",
"prom:node") stamped with Prometheus' scrape time, so a part's rates are taken over one
exporter's scrapes and a node whose exporter stopped goes stale with its true age.

Secrets (bearer token, raw header) are read once, sent only as a header, and never
appear in a message: errors are rebuilt from the exception's kind, not its text. They go
to the configured URL only: a redirect is refused (requests would strip `Authorization`
on a cross-host redirect, but carry a custom `header_name` such as `X-Api-Key` along).
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import logging
import math
import os
import re
import time
from collections.abc import Callable, Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

import requests
from prometheus_api_client import PrometheusApiClientException
from prometheus_api_client.prometheus_connect import PrometheusConnect
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

from infertop.collectors.process.loop_stalls import wire_timeout
from infertop.collectors.safe_text import inert_text, redact_url
from infertop.collectors.sample import NodeSample
from infertop.collectors.sources import prom_rules, promql
from infertop.collectors.sources.prom_detail import DETAIL_EVERY_S, SMALL_FLEET_NODES, DetailPlan, plan_detail
from infertop.collectors.sources.routing import route_layout
from infertop.collectors.sources.scrape import latency_every_rounds
from infertop.collectors.sources.source import BackendState, Emit, PollingSource
from infertop.layouts.model import Layout, PrometheusConfig

log = logging.getLogger(__name__)

# the same for the engines' latency histograms' buckets (~22 a histogram, 6 histograms a
# node: 135k series at 1,024 nodes, three quarters of a round's answer): read every few
# ticks past this many, never so rarely that a window holds fewer readings than the scrape
# source keeps (collectors/sources/scrape.py `latency_every_rounds`)
LATENCY_SERIES_PER_TICK = 40_000
# past this many nodes the histograms are read per node only, not again per data-parallel
# engine: 8 engines a node make the per-engine copies 8 times the node's (1.1M series a
# tick at 1,024 nodes); each engine's counters and gauges are still read
RANK_LATENCY_MAX_NODES = 128
MAX_WORKERS = 8
BACKFILL_WORKERS = 2
# after a backend comes back (down, restarted, reloaded): how long its nodes not scraped
# since are waiting for it, not stale — at least this, or this many intervals
SETTLE_MIN_S = 30.0
SETTLE_INTERVALS = 5
# how often the source looks again for infertop's recorded series (collectors/sources/prom_rules.py)
RECORDED_RECHECK_S = 300.0


class PromSetupError(ValueError):
    """Bad credentials setup (missing env var, unreadable token file). Safe to show."""


def auth_headers(config: PrometheusConfig, environ: dict[str, str] | None = None) -> dict[str, str]:
    """The auth header from the environment or a file. Raises PromSetupError (no secret in it)."""
    env = os.environ if environ is None else environ
    if config.token_env:
        token = env.get(config.token_env)
        if not token:
            raise PromSetupError(f"environment variable {config.token_env} (token_env) is not set")
        return {"Authorization": f"Bearer {token.strip()}"}
    if config.token_file:
        try:
            with open(os.path.expanduser(config.token_file), encoding="utf-8") as f:
                token = f.read().strip()
        except OSError as exc:
            raise PromSetupError(f"token_file {config.token_file}: {exc.strerror or 'unreadable'}") from None
        if not token:
            raise PromSetupError(f"token_file {config.token_file} is empty")
        return {"Authorization": f"Bearer {token}"}
    if config.header_env:
        value = env.get(config.header_env)
        if not value:
            raise PromSetupError(f"environment variable {config.header_env} (header_env) is not set")
        return {config.header_name: value.strip()}
    return {}


_STATUS = re.compile(r"HTTP Status Code (\d+)")


def describe_error(exc: BaseException, timeout_s: float) -> str:
    """A short message from the exception's kind; never its text (it may quote headers)."""
    if isinstance(exc, PromSetupError):
        return str(exc)
    if isinstance(exc, PrometheusApiClientException):
        found = _STATUS.search(str(exc))
        code = int(found.group(1)) if found else 0
        if code in (401, 403):
            return f"rejected the credentials (HTTP {code})"
        if code == 400:
            return "rejected a query (HTTP 400): check selector and node_label"
        return f"answered HTTP {code}" if code else "answered with an error"
    if isinstance(exc, requests.TooManyRedirects):
        return _redirect_refused(exc.response)
    if isinstance(exc, requests.Timeout | TimeoutError):
        return f"timed out after {timeout_s:g} s"
    if isinstance(exc, requests.exceptions.SSLError):
        return "TLS error: " + (
            "certificate verify failed" if "CERTIFICATE_VERIFY_FAILED" in str(exc) else "handshake failed"
        )
    if isinstance(exc, requests.ConnectionError):
        text = str(exc)
        for needle, said in (
            ("Connection refused", "connection refused"),
            ("timed out", f"timed out after {timeout_s:g} s"),
            ("Name or service not known", "host name not found"),
            ("Temporary failure in name resolution", "host name not found"),
            ("No route to host", "no route to host"),
            ("Connection reset", "connection reset"),
            ("Network is unreachable", "network unreachable"),
        ):
            if needle in text:
                return said
        return "connection failed"
    if isinstance(exc, ValueError | KeyError | TypeError):
        return "answered something that is not a Prometheus API response"
    return f"failed ({type(exc).__name__})"


def _redirect_refused(response: requests.Response | None) -> str:
    code = response.status_code if response is not None else None
    where = response.headers.get("Location") if response is not None else None
    to = f" to {inert_text(redact_url(where), 120)}" if where else ""
    return (
        f"answered a redirect (HTTP {code}){to}: refused, the credentials go to the configured "
        "url only; set [prometheus] url to the final address"
    )


class NodeNamer:
    """Node label value → layout node name (exact, then the short host name), or discovered."""

    def __init__(self, layout_names: Sequence[str], discover: bool):
        self.names = set(layout_names)
        self.discover = discover
        self._cache: dict[str, str | None] = {}

    def __call__(self, value: str) -> str | None:
        if value in self._cache:
            return self._cache[value]
        name: str | None = None
        if value in self.names:
            name = value
        elif not re.fullmatch(r"[0-9.]+", value) and value.split(".", 1)[0] in self.names:
            name = value.split(".", 1)[0]  # decode-01.cluster.local → decode-01
        elif self.discover:
            # label values end up on screen: keep only what a layout node name may hold
            cleaned = re.sub(r"[^A-Za-z0-9_.:@-]", "_", value)[:128]
            name = cleaned or None
        self._cache[value] = name
        return name


class Backend:
    """One PromQL endpoint the source reads: a Prometheus, one shard of a sharded fleet, or
    a global layer (federation, Thanos, Mimir, VictoriaMetrics cluster). Its own client,
    recorded series, delay, and whether it answered; the nodes it answered for."""

    def __init__(self, url: str):
        self.url = url.rstrip("/")
        self.shown_url = redact_url(self.url)
        self.name = f"prometheus {self.shown_url}"
        self.client: PrometheusConnect | None = None
        # infertop's recorded series this server has (collectors/sources/prom_rules.py)
        self.recorded: set[str] = set()
        self.recorded_at: float | None = None
        self.behind_s: float | None = None  # its newest sample's age, last round it answered
        self.error: str | None = None  # why it did not answer the last round
        self.down_since: float | None = None
        self.nodes: set[str] = set()  # the nodes it answered for, last round it answered
        self.note: str | None = None  # said on it: duplicate series found and collapsed
        self.checked = False  # looked for duplicate series once
        self.session: requests.Session | None = None
        # back after being down, restarted or its config reloaded: when, and which; its
        # nodes not scraped since are waiting for it, not stale (SETTLE_S at most)
        self.resumed_at: float | None = None  # nodes with no scrape since this wait for it
        self.back_at: float | None = None  # when it came back
        self.resumed_why = ""
        self.runtime: tuple[str, str] | None = None  # (startTime, lastConfigTime) it said last

    def answered(self, at: float) -> None:
        if self.error is not None and self.down_since is not None:
            # its nodes not scraped since it went away wait for it
            self.resume(self.down_since, at, f"back after {at - self.down_since:.0f} s down")
        self.error = self.down_since = None

    def resume(self, waiting_since: float, at: float, why: str) -> None:
        self.resumed_at, self.back_at, self.resumed_why = waiting_since, at, why

    def saw_runtime(self, started: str, configured: str, at: float) -> None:
        """A Prometheus' start and last config load times (/api/v1/status/runtimeinfo):
        a change since the last round is a restart or a reload (its scrape loops start
        again, up to an interval apart: its targets' newest samples age meanwhile). On the
        first read, one lately (a `snapshot` taken seconds after a reload) counts too."""
        before, self.runtime = self.runtime, (started, configured)
        if before == self.runtime:
            return
        restarted = before is None or started != before[0]
        if before is None:  # the newer of the two, however long ago (settle_s decides)
            times = [t for t in (_rfc3339(started), _rfc3339(configured)) if t is not None]
            when = max(times, default=None)
            restarted = when is not None and when == _rfc3339(started)
        else:
            when = _rfc3339(started if restarted else configured)
        if when is None:
            return
        when = min(when, at)
        self.resume(when, when, "restarted" if restarted else "config reloaded")

    def failed(self, message: str, at: float) -> None:
        if self.error is None:
            self.down_since = at
        self.error = message


def _rfc3339(text: str) -> float | None:
    """Prometheus' time text ("2026-12-07T18:00:00.123456789Z") → unix seconds; None if not one."""
    try:
        return dt.datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None


class PromSource(PollingSource):
    kind = "prom"

    def __init__(
        self,
        config: PrometheusConfig,
        nodes: Sequence[str],
        interval_s: float,
        *,
        profiles: dict[str, dict[str, str | list[str]]] | None = None,
        profile_names: Sequence[str] = (),
        history: int = 600,
        clock: Callable[[], float] = time.time,
        keep_s: float | None = None,
        window_s: float | None = None,
    ):
        """`keep_s`: how far behind its newest sample the monitor keeps a node's samples
        (window + slack): the backfill pulls no more than that. `window_s`: the layout's
        window, which bounds how rarely the latency histograms may be read."""
        # a round is two waves of queries, each bounded by timeout_s (the stamps, then every
        # query at their instant): a backend's round gets both, the poll a second more
        self.round_s = 2 * config.timeout_s
        super().__init__(nodes, interval_s, timeout_s=self.round_s + 1.0)
        self.config = config
        # queried concurrently, their answers merged by node (each node from the one that
        # holds its newest scrape): shards, pools, or a global layer beside them
        self.backends = [Backend(u) for u in config.urls]
        self.shown_url = ", ".join(b.shown_url for b in self.backends)
        self.history = history
        self.clock = clock
        labels = config.node_label if isinstance(config.node_label, list) else [config.node_label]
        self.builder = promql.QueryBuilder(
            node_labels=tuple(labels),
            strip_port=config.strip_port,
            selector=config.selector,
            engine_metrics=promql.profile_metrics(profile_names, profiles),
            engine_matchers=promql.profile_matchers(profile_names, profiles),
            replica_labels=config.replica_labels,
        )

        self.namer = NodeNamer(nodes, config.discover)
        self._node_set = set(self.nodes)
        self.keep_s = keep_s
        self._executor = ThreadPoolExecutor(MAX_WORKERS, thread_name_prefix="prom")
        # the backfill's range queries run beside live polling: on threads of their own,
        # so a live query never queues behind one
        self._history_executor = ThreadPoolExecutor(BACKFILL_WORKERS, thread_name_prefix="prom-backfill")
        self._backfill_task: asyncio.Task[int] | None = None
        self._headers: dict[str, str] | None = None
        self._setup_error: str | None = None
        self._owner: dict[str, Backend] = {}  # node → the backend that answered for it last
        self._last_at: dict[tuple[str, str], float] = {}  # (node, tier) → newest scrape time sent
        self._seen_tiers: dict[str, set[str]] = {}
        self._label_value: dict[str, str] = {}  # node → its node label's value, as last answered
        # the nodes whose detail the monitor asks for (in view, flagged): read every tick
        self._wanted: frozenset[str] = frozenset()
        self.detail: DetailPlan | None = None  # this tick's, once polled
        # the plan's fleet size up to which every node's detail is read, and its bound
        self.detail_small_nodes = SMALL_FLEET_NODES
        self.detail_every_s = DETAIL_EVERY_S
        self.series_read = 0  # series the last round's answers held
        self.window_s = window_s
        self._latency_series_seen = 0  # bucket series the latency queries answered last time
        self._ticks = 0
        # how far the newest sample the backends held trailed the wall clock, last round
        self.behind_s: float | None = None
        # infertop's recording rules: a query whose text is the rule's own is read from
        # the recorded series when the server has it (collectors/sources/prom_rules.py)
        self._rule_exprs = {
            (q.tier, q.key): q.promql for t in prom_rules.TIERS for q in prom_rules.builder().tier(t)
        }

    # ------------------------------------------------------------------ client

    def _connect(self, backend: Backend | None = None) -> PrometheusConnect:
        """The backend's client (the first backend's by default). Raises PromSetupError
        when the credentials' setup is bad (the same for every backend)."""
        backend = backend or self.backends[0]
        if backend.client is None:
            if self._headers is None:
                self._headers = auth_headers(self.config)
            session = requests.Session()
            # no redirect is followed (TooManyRedirects at the first): the auth header
            # must never reach another origin
            session.max_redirects = 0
            session.verify = self.config.ca_file or self.config.verify_tls
            # no retries inside a tick (the next tick is the retry), and a pool as wide as
            # the threads that may ask at once (live queries and the backfill's), so
            # connections are reused, never discarded (urllib3 warned "Connection pool is
            # full" on every snapshot when the backfill's threads came on top)
            adapter = HTTPAdapter(
                # read=False: a read timeout surfaces as itself, not as a "connection error"
                max_retries=Retry(total=0, read=False, redirect=2),
                pool_maxsize=MAX_WORKERS + BACKFILL_WORKERS,
            )
            # requests takes a float timeout; the client's hints say int
            timeout: Any = self.config.timeout_s
            client = PrometheusConnect(
                url=backend.url, headers=self._headers or {}, session=session, timeout=timeout
            )
            session.mount(backend.url, adapter)
            backend.client = client
            backend.session = session
        return backend.client

    async def _call(
        self, fn: Callable[..., Any], *args: Any, executor: ThreadPoolExecutor | None = None
    ) -> Any:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(executor or self._executor, partial(fn, *args))

    async def _instant(self, backend: Backend, query: promql.Query, at: float) -> promql.Grouped:
        """One query, its result grouped by node in the worker thread (off the event loop)."""
        client = self._connect(backend)

        def fetch() -> promql.Grouped:
            result = client.custom_query(query.promql, {"time": f"{at:.3f}"})
            grouped: promql.Grouped = {}
            promql.group_instant(query.key, result, promql.subkeys(query.tier, query.key), grouped)
            return grouped

        grouped: promql.Grouped = await self._call(fetch)
        return grouped

    async def _range(
        self, backend: Backend, query: promql.Query, start: float, end: float, step: float
    ) -> dict[str, dict[tuple[str, ...], dict[float, float | None]]]:
        """One range query, grouped by node in the worker thread (off the event loop)."""
        client = self._connect(backend)
        timeout: Any = self.config.timeout_s * 4  # a range query returns far more

        def fetch() -> dict[str, dict[tuple[str, ...], dict[float, float | None]]]:
            result = client.custom_query_range(
                query.promql, dt.datetime.fromtimestamp(start, dt.UTC),
                dt.datetime.fromtimestamp(end, dt.UTC), f"{step:g}", timeout=timeout,
            )
            return promql.group_range(query.key, result, promql.subkeys(query.tier, query.key))

        return await self._call(fetch, executor=self._history_executor)  # type: ignore[no-any-return]

    def backend_states(self) -> list[BackendState]:
        """Each backend as of the last round. While one is down, the nodes it served (and,
        with several, those no backend has answered for yet: they may be its) are its
        to say, not stale or unreachable on their own."""
        single = len(self.backends) == 1
        unowned = frozenset(n for n in self.nodes if n not in self._owner)
        out = []
        now = self.clock()
        for b in self.backends:
            nodes = frozenset(self.nodes) if single else (
                frozenset(b.nodes) | (unowned if b.error else frozenset()))
            waiting, settling = frozenset[str](), None
            back, since = b.back_at, b.resumed_at
            if b.error is None and back is not None and since is not None and now - back <= self.settle_s():
                waiting = frozenset(n for n in nodes if self._newest_at(n) < since)
                if waiting:
                    settling = f"{b.resumed_why} {now - back:.0f} s ago"
            out.append(BackendState(
                name=b.name, behind_s=b.behind_s, error=b.error, since=b.down_since, nodes=nodes,
                role="backend" if single else "shard", note=b.note, settling=settling, waiting=waiting,
            ))
        return out

    def settle_s(self) -> float:
        """How long after a backend came back its nodes not scraped since wait for it
        (unknown) before they are judged on their own again: a scrape loop restarts within
        an interval; a node still silent after this is the node's."""
        return max(SETTLE_MIN_S, SETTLE_INTERVALS * self.interval_s)

    def _newest_at(self, node: str) -> float:
        return max((self._last_at.get((node, t), -math.inf) for t in prom_rules.TIERS), default=-math.inf)

    def error_text(self, exc: BaseException) -> str:
        return describe_error(exc, self.config.timeout_s)

    def timed_out(self) -> list[NodeSample]:
        # every backend's round is bounded below this; a poll past it is the source's
        # own trouble, said on the backends (their nodes unknown), never on each node
        for b in self.backends:
            b.failed(f"timed out after {self.round_s:g} s", self.clock())
        return []

    # ------------------------------------------------------------------ polling

    def gpu_detail_every(self) -> int:
        """Every how many ticks the per-GPU tier is read (for the nodes the detail plan
        names): every tick unless the layout says otherwise."""
        if self.config.gpu_detail_every is not None:
            return self.config.gpu_detail_every
        return 1

    def want_detail(self, nodes: Collection[str]) -> None:
        """The nodes whose per-GPU detail is read every tick from now on: in view on a
        viewer, or flagged by a verdict (the monitor says which; collectors/sources/prom_detail.py)."""
        self._wanted = frozenset(nodes)

    def detail_read(self) -> DetailPlan | None:
        return self.detail

    def detail_plan(self, tick: int) -> DetailPlan:
        """Whose detail tick `tick` reads: the layout's `gpu_detail_every` reads every node
        on the ticks it names (as it always did); otherwise the one rule, over the listed
        nodes and those found since."""
        fleet = self.nodes + sorted(set(self._seen_tiers) - self._node_set)
        if self.config.gpu_detail_every is not None:
            return DetailPlan(None, len(fleet), self.config.gpu_detail_every * self.interval_s)
        return plan_detail(fleet, tick, self.interval_s, self._wanted,
                           bound_s=self.detail_every_s, small=self.detail_small_nodes)

    def tiers_this_tick(self) -> list[str]:
        every = self.gpu_detail_every()
        tiers = ["engine", "node"]
        if self._ticks % every == 0:
            tiers.append("gpu")
        return tiers

    def latency_every(self) -> int:
        """Every how many ticks the latency histograms are read: as many ticks as their
        buckets need to stay within LATENCY_SERIES_PER_TICK, at most as many as leave the
        window its readings (a percentile over the window needs two of them)."""
        by_cost = max(1, math.ceil(self._latency_series_seen / LATENCY_SERIES_PER_TICK))
        if self.window_s is None:
            return 1
        return min(by_cost, latency_every_rounds(self.interval_s, self.window_s))

    def latency_this_tick(self) -> bool:
        every = self.latency_every()
        # on the ticks the GPU detail skips, when both are read every other tick
        return every == 1 or self._ticks % every == every - 1

    def rank_latency(self) -> bool:
        return len(self.nodes) <= RANK_LATENCY_MAX_NODES

    async def _look_for_recorded(self, backend: Backend, now: float) -> None:
        """Which of infertop's recorded series the server has now (two small asks, now
        and then): their names from the metric names the server knows (its index, no
        samples read), kept for the tiers whose recorded `timestamp` series is current. One instant
        query over every recorded series selects ~130 series a node: past 300k (~2,300
        nodes) VictoriaMetrics refuses it (-search.maxUniqueTimeseries) and at 4,096
        nodes the rules were never read (benchmarks/bench_prom.py)."""
        if backend.recorded_at is not None and now - backend.recorded_at < RECORDED_RECHECK_S:
            return
        backend.recorded_at = now
        client = self._connect(backend)
        prefix = prom_rules.RECORDED_PREFIX
        stamps = f'count by (__name__) ({{__name__=~"{prefix}({"|".join(prom_rules.TIERS)})_timestamp"}})'
        try:
            # every metric name, filtered here: a `match[]` selects the series, and
            # VictoriaMetrics counts them against the same 300k limit
            names = await self._call(client.get_label_values, "__name__")
            current = await self._call(client.custom_query, stamps, {"time": f"{now:.3f}"})
        except Exception as exc:  # the raw queries still work; try again later
            log.debug("prom: looking for recorded series failed", exc_info=exc)
            return
        stamped = {r.get("metric", {}).get("__name__") for r in current if isinstance(r, dict)}
        tiers = tuple(f"{prefix}{t}_" for t in prom_rules.TIERS if f"{prefix}{t}_timestamp" in stamped)
        kept = [n for n in names or () if isinstance(n, str) and n.startswith(tiers)] if tiers else []
        backend.recorded = set(kept)

    def queries(self, tier: str, latency: bool = True, backend: Backend | None = None,
                detail: DetailPlan | None = None) -> list[promql.Query]:
        """The tier's queries, each read from its recorded series when the server (the
        first backend by default) has it and the rule computes exactly this query (the
        same node labels and metric names). `latency`: the latency histograms too (per
        engine only up to RANK_LATENCY_MAX_NODES). `detail`: the per-GPU tier only for
        the nodes it names."""
        recorded = (backend or self.backends[0]).recorded
        only = detail.nodes if detail is not None else None
        values = [self._label_value.get(n, n) for n in sorted(only)] if only is not None else []
        narrows_raw = tier == "gpu" or (tier == "engine" and latency and self.rank_latency())
        raw_narrowed = (promql.raw_for_nodes(self.builder, tier, values)
                        if only is not None and narrows_raw else None)
        # several node labels: narrowed on the answer, by the nodes of a recorded series
        stamps = prom_rules.recorded_name(promql.Query(tier, "timestamp", ""))
        out = []
        for q in self.builder.tier(tier):
            if promql.is_latency(q) and not latency:
                continue
            if promql.is_rank_latency(q) and not self.rank_latency():
                continue
            # detail: the per-GPU series, and each data-parallel engine's latency buckets
            # (the node screen's ranks: ~1,000 series a node of 8 engines)
            narrow = only is not None and (tier == "gpu" or promql.is_rank_latency(q))
            name = prom_rules.recorded_name(q)
            if name in recorded and self._rule_exprs.get((q.tier, q.key)) == q.promql:
                q = promql.Query(q.tier, q.key, name)
                if narrow:
                    q = promql.recorded_for_nodes(q, values)
            elif narrow and raw_narrowed is not None:
                q = raw_narrowed.get(q.key, q)
            elif narrow and stamps in recorded:
                q = promql.answer_for_nodes(q, stamps, values)
            out.append(q)
        return out

    async def poll(self) -> Sequence[NodeSample]:
        now = self.clock()
        tiers = self.tiers_this_tick()
        latency = self.latency_this_tick()
        detail = self.detail = self.detail_plan(self._ticks)
        self._ticks += 1
        try:
            self._connect()
        except PromSetupError as exc:
            for b in self.backends:
                b.failed(str(exc), now)
            return []
        rounds = await asyncio.gather(*(self._backend_round(b, tiers, latency, now, detail)
                                        for b in self.backends))
        grouped: dict[str, promql.Grouped] = {t: {} for t in tiers}
        behind_of: dict[str, float | None] = {}  # node label value → its backend's delay
        stamp_of: dict[tuple[str, str], float] = {}
        owner_of: dict[str, Backend] = {}
        answered: set[str] = set()
        notes: list[str] = []
        for backend, result in zip(self.backends, rounds, strict=True):
            if result is None:
                continue
            by_tier, failed_tiers = result
            several = len(self.backends) > 1
            notes += [f"{tier} queries{f' ({backend.shown_url})' if several else ''}: {msg}"
                      for tier, msg in failed_tiers.items()]
            answered |= set(by_tier) - set(failed_tiers)
            for tier, per_node in by_tier.items():
                into = grouped[tier]
                for value, fig in per_node.items():
                    # a node two backends hold (a shard and the global layer, overlapping
                    # shards): the newest scrape wins, whole (never a figure from each)
                    stamp = promql.single(fig, "timestamp") or -math.inf
                    if value in into and stamp <= stamp_of.get((tier, value), -math.inf):
                        continue
                    into[value] = fig
                    stamp_of[(tier, value)] = stamp
                    behind_of[value] = backend.behind_s
                    owner_of[value] = backend
        live = [b for b, r in zip(self.backends, rounds, strict=True) if r is not None]
        self.behind_s = min((b.behind_s for b in live if b.behind_s is not None), default=None)
        samples = self._build(grouped, answered, now, notes, behind_of)
        for b in live:
            b.nodes = set()
        for value, backend in owner_of.items():
            node = self.namer(value)
            if node is not None:
                backend.nodes.add(node)
                self._owner[node] = backend
        samples += self._missing(grouped, answered, detail)
        self.series_read = sum(len(by_sub) for per_node in grouped.values() for fig in per_node.values()
                               for by_sub in fig.values())
        self._start_backfill()
        return samples

    async def _backend_round(
        self, backend: Backend, tiers: list[str], latency: bool, now: float, detail: DetailPlan | None = None,
    ) -> tuple[dict[str, promql.Grouped], dict[str, str]] | None:
        """One backend's answers to the round (tier → grouped figures, and the tiers that
        failed with why), or None when it did not answer at all: it is then down, said on
        the backend. Bounded by `round_s`, measured on the wire. Beside the queries: its
        runtime (restarts, reloads) and, once checked, whether copies of series appeared
        (a job added later: collapsed from the next round)."""
        try:
            async with wire_timeout(self.round_s):
                await self._look_for_recorded(backend, now)
                checked = backend.checked
                if not checked:  # first, once: the first figures must not be doubled
                    await self._look_for_duplicates(backend, now)
                queries = [q for t in tiers for q in self.queries(t, latency, backend, detail)]
                results, *_ = await asyncio.gather(
                    self._consistent_round(backend, queries, now), self._look_at_runtime(backend, now),
                    *([self._look_for_duplicates(backend, now)] if checked else []),
                )
        except TimeoutError:
            backend.failed(f"timed out after {self.round_s:g} s", now)
            return None
        failures = [r for r in results if isinstance(r, BaseException)]
        for failure in failures:
            if isinstance(failure, asyncio.CancelledError):
                raise failure
        if len(failures) == len(results):
            # the credentials message wins: it is the one the user can act on
            worst = next((f for f in failures if "credentials" in describe_error(f, 0)), failures[0])
            log.debug("prom backend %s failed", backend.shown_url, exc_info=worst)
            backend.failed(self.error_text(worst), now)
            return None
        backend.answered(now)
        grouped: dict[str, promql.Grouped] = {t: {} for t in tiers}
        failed_tiers: dict[str, str] = {}
        for q, r in zip(queries, results, strict=True):
            if isinstance(r, BaseException):
                failed_tiers.setdefault(q.tier, self.error_text(r))
                log.debug("prom query %s failed", q.key, exc_info=r)
                continue
            into = grouped[q.tier]
            for node, figures in r.items():
                into.setdefault(node, {}).update(figures)
        if latency and "engine" not in failed_tiers:
            self._latency_series_seen = sum(
                len(by_sub) for fig in grouped["engine"].values()
                for key, by_sub in fig.items() if promql.is_latency_key(key)
            )
        backend.behind_s = backend_behind_s(grouped, now)
        return grouped, failed_tiers

    async def _look_at_runtime(self, backend: Backend, now: float) -> None:
        """Whether the backend restarted or reloaded its config since the last round
        (Prometheus says when; a backend without the page, VictoriaMetrics, is left be)."""
        session = backend.session
        if session is None:
            return

        def fetch() -> Any:
            url = f"{backend.url}/api/v1/status/runtimeinfo"
            response = session.get(url, headers=self._headers or {}, timeout=self.config.timeout_s)
            return response.json() if response.status_code == 200 else None

        try:
            answer = await self._call(fetch)
            data = answer.get("data") if isinstance(answer, dict) else None
        except Exception as exc:  # the round says whether it answers; this is a detail
            log.debug("prom: runtime info of %s failed", backend.shown_url, exc_info=exc)
            return
        if isinstance(data, dict):
            backend.saw_runtime(str(data.get("startTime")), str(data.get("lastConfigTime")), now)

    async def _look_for_duplicates(self, backend: Backend, at: float) -> None:
        """Targets scraped twice (a second job over the same nodes): every counter-derived
        figure would be their sum, twice the truth. One small query a round; once found,
        the copies are collapsed by that label from the next round on (the `max` of the
        copies: equal but for their scrape phase) and the backend says so. Only `job`
        is looked for unasked: series identical in every other label, instance included,
        are one target read twice. Other replica labels are the layout's to name."""
        if "job" in self.builder.replica_labels:
            return
        try:
            query = promql.Query("check", "duplicates", self.builder.duplicates("job"))
            found = await self._instant(backend, query, at)
        except Exception as exc:  # the round says whether the backend answers; this waits
            log.debug("prom: looking for duplicate series failed", exc_info=exc)
            return
        backend.checked = True
        if not found:
            return
        nodes = len(found)
        self.builder = dataclasses.replace(self.builder, replica_labels=(*self.builder.replica_labels, "job"))
        backend.note = (
            f"{nodes} node{'s' if nodes != 1 else ''}' targets scraped by more than one job: copies "
            'collapsed (their max, never their sum); replica_label = ["job"] in [prometheus] says so'
        )

    def _start_backfill(self) -> None:
        """After the first live round: the history, fetched beside live polling and merged
        behind the live readings. Never before them: a backfill of many nodes takes
        longer than the stale threshold, and every node would wait for it."""
        if self._backfill_task is not None or self.emit_early is None or self.config.backfill_s <= 0:
            return
        emit = self.emit_early
        loop = asyncio.get_running_loop()
        self._backfill_task = loop.create_task(self.backfill(emit), name="prom:backfill")

    async def _consistent_round(self, backend: Backend, queries: list[promql.Query], now: float) -> list[Any]:
        """Every query's answer (or exception), all as of one instant: the newest scrape
        the tiers' `timestamp` queries find at `now`; then every query (those too) at that
        instant. Asked at `now`, a scrape that becomes visible while the round runs would
        be in some answers and not in others (VictoriaMetrics shows a point once it is
        -search.latencyOffset old by its own clock, which moves on during the round; a
        Prometheus commits a scrape mid-round), and a counter stamped with one scrape but
        read from another gives a rate off by a whole scrape interval."""
        stamp_queries = [q for q in queries if q.key == "timestamp"]
        first = await asyncio.gather(*(self._instant(backend, q, now) for q in stamp_queries),
                                     return_exceptions=True)
        newest = max(
            (stamp for r in first if isinstance(r, dict) for fig in r.values()
             if (stamp := promql.single(fig, "timestamp")) is not None),
            default=None,
        )
        pairs = zip(stamp_queries, first, strict=True)
        failed = {q.tier: r for q, r in pairs if isinstance(r, BaseException)}
        if first and len(failed) == len(first):
            # the backend did not answer: say so now, not after a second timeout
            return [failed.get(q.tier, next(iter(failed.values()))) for q in queries]
        # a scrape stamped at `newest` is in; a later one is not (and never past now)
        at = now if newest is None else min(newest + 0.001, now)
        return await asyncio.gather(*(self._instant(backend, q, at) for q in queries), return_exceptions=True)

    def _adopt(self, value: str) -> str | None:
        name = self.namer(value)
        if name is not None and name not in self._node_set:
            self._node_set.add(name)  # a set: `in self.nodes` made a round O(nodes²)
            self.nodes.append(name)  # discovered: errors are reported on it from now on
        return name

    def _build(
        self, grouped: dict[str, promql.Grouped], tiers: set[str], now: float, notes: list[str],
        behind_of: dict[str, float | None] | None = None,
    ) -> list[NodeSample]:
        """Samples of the answered `tiers`. `behind_of`: node label value → the delay of
        the backend that answered for it (default: the round's, `behind_s`)."""
        out: list[NodeSample] = []
        extras: dict[float | None, dict[str, Any]] = {}

        def extra_for(behind: float | None) -> dict[str, Any]:
            extra = extras.get(behind)
            if extra is None:
                extra = extras[behind] = {"backend_behind_s": behind, **({"notes": notes} if notes else {})}
            return extra
        for tier in sorted(tiers):
            for value, fig in grouped[tier].items():
                node = self._adopt(value)
                if node is None:
                    continue
                self._seen_tiers.setdefault(node, set()).add(tier)
                self._label_value[node] = value
                stamp = promql.single(fig, "timestamp")
                taken_at = stamp if stamp is not None else now
                key = (node, tier)
                if taken_at <= self._last_at.get(key, -math.inf):
                    continue  # Prometheus has not scraped it again since the last tick
                behind = self.behind_s if behind_of is None else behind_of.get(value)
                own = self._node_extra(extra_for(behind), taken_at, now)
                sample = promql.BUILDERS[tier](node, taken_at, fig, f"prom:{tier}", own)
                if sample is None:
                    continue
                self._last_at[key] = taken_at
                out.append(sample)
        return out

    def _node_extra(self, extra: dict[str, Any], taken_at: float, read_at: float) -> dict[str, Any]:
        """The sample's backend delay: the backend's own (its newest sample's age), plus
        where this target sits in the backend's scrape cycle. A target scraped just before
        the round's newest is up to one scrape interval older than it: read directly, it
        would have been read that much later. Not excused, a healthy node whose scrape
        phase trails the others by most of an interval, read just before a late tick,
        crossed the stale threshold of 2 intervals (seen: 3 of 16 demo nodes stale through
        Prometheus at a 2 s scrape and interval). Capped at one interval past the backend's
        delay: a target the backend no longer scrapes still ages into stale / unreachable."""
        behind = extra.get("backend_behind_s")
        if behind is None:
            return extra
        own = min(max(read_at - taken_at, behind), behind + self.interval_s)
        if own == behind:
            return extra
        return {**extra, "backend_behind_s": own}

    def _missing(
        self, grouped: dict[str, promql.Grouped], tiers: set[str], detail: DetailPlan | None = None
    ) -> list[NodeSample]:
        """Error samples for nodes that no backend returned anything for in any tier asked.
        Not for a node whose backend is down (or, with several, one no backend has
        answered for while one is down: it may be that one's): the backend says it. The
        GPU tier is asked only of the nodes `detail` names."""
        present = {self.namer(v) for t in tiers for v in grouped.get(t, {})}
        some_down = any(b.error for b in self.backends)
        out = []
        for node in self.nodes:
            if node in present:
                continue
            owner = self._owner.get(node)
            if (owner is not None and owner.error) or (owner is None and some_down):
                continue
            seen = self._seen_tiers.get(node)
            if seen is None:
                labels = "/".join(self.builder.node_labels)
                msg = (
                    f"prometheus {self.shown_url}: no series with {labels}={node}"
                    " (check node_label, selector)"
                )
            elif seen & (tiers if detail is None or detail.nodes is None or node in detail.nodes
                         else tiers - {"gpu"}):
                where = owner.shown_url if owner is not None else self.shown_url
                msg = f"prometheus {where}: no fresh series for {node} (scrape targets down?)"
            else:
                continue  # only its GPU tier exists, and that was not asked this tick
            out.append(self.error_sample(node, msg))
        return out

    # ------------------------------------------------------------------ backfill

    async def backfill(self, emit: Emit) -> int:
        """Emit past samples from range queries (oldest first), so rates and windows are
        full from the first frames. Readings older than a live one already sent go to
        `emit_history` (merged behind it), newer ones to `emit`; none is sent twice.
        Returns how many were sent."""
        if self.config.backfill_s <= 0:
            return 0
        step = max(self.interval_s, 1.0)
        # the monitor keeps a node's samples only `keep_s` behind its newest: older
        # history would be pulled, decoded and built only to be dropped
        span = min(self.config.backfill_s, step * min(self.history, 10_000), self.keep_s or math.inf)
        end = self.clock()
        start = end - span
        # the per-GPU history only where every node's detail is read every tick
        tiers = ["engine", "node"] + (["gpu"] if self.detail_plan(1).nodes is None
                                      and self.gpu_detail_every() == 1 else [])
        # info gauges are not history (their labels are read live); nor the latency buckets
        # where they are read only every few ticks: their history is the largest answer
        latency = self.latency_every() == 1
        built: list[NodeSample] = []
        for backend in self.backends:  # one at a time: the backfill's threads are few
            built += await self._backfill_from(backend, tiers, latency, start, end, step)
        built.sort(key=lambda s: s.taken_at)  # a node two backends hold: sent once (below)
        sent = 0
        for sample in built:  # oldest first
            key = (sample.node, sample.source.removeprefix("prom:"))
            self._seen_tiers.setdefault(sample.node, set()).add(key[1])
            last = self._last_at.get(key)
            if last is None or sample.taken_at > last:
                self._last_at[key] = sample.taken_at
                emit(sample)
            elif sample.taken_at < last and self.emit_history is not None:
                self.emit_history(sample)
            else:
                continue
            sent += 1
        return sent

    async def _backfill_from(
        self, backend: Backend, tiers: list[str], latency: bool, start: float, end: float, step: float
    ) -> list[NodeSample]:
        queries = [q for t in tiers for q in self.queries(t, latency, backend)
                   if not q.key.startswith(promql.LABELS_KEY)]
        try:
            self._connect(backend)
            results = await asyncio.gather(*(self._range(backend, q, start, end, step) for q in queries))
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # live polling reports it; a failed backfill only loses history
            log.info("prom backfill from %s skipped: %s", backend.shown_url, self.error_text(exc))
            return []
        by_tier: dict[str, dict[str, Any]] = {t: {} for t in tiers}
        for q, r in zip(queries, results, strict=True):
            by_tier[q.tier][q.key] = r
        stamps = [keys.get("timestamp", {}) for keys in by_tier.values()]
        nodes = {value: self._adopt(value) for per_node in stamps for value in per_node}
        built: list[NodeSample] = await self._call(
            partial(history_samples, by_tier, nodes), executor=self._history_executor
        )
        return built

    async def run(self, emit: Emit) -> None:
        await super().run(emit)  # the backfill starts after the first live round

    async def close(self) -> None:
        if self._backfill_task is not None and not self._backfill_task.done():
            self._backfill_task.cancel()
        for backend in self.backends:
            if backend.client is not None:
                backend.client.close()
        self._executor.shutdown(wait=False, cancel_futures=True)
        self._history_executor.shutdown(wait=False, cancel_futures=True)


def backend_behind_s(grouped: dict[str, promql.Grouped], read_at: float) -> float | None:
    """How far the newest scrape among a round's answers trails the instant asked for:
    the backend's own delay (VictoriaMetrics answers ~30 s in the past by default; a
    Prometheus may be behind on its scrapes). None when nothing was answered."""
    newest = max(
        (stamp for per_node in grouped.values() for fig in per_node.values()
         if (stamp := promql.single(fig, "timestamp")) is not None),
        default=None,
    )
    return None if newest is None else max(read_at - newest, 0.0)


def history_samples(
    by_tier: dict[str, dict[str, Any]], nodes: dict[str, str | None]
) -> list[NodeSample]:
    """Range results (tier → key → node value → sub-key → {eval time → value}) → samples,
    oldest first; one per scrape (the `timestamp` series says when each was taken).
    `nodes`: node label value → node name (None: not ours)."""
    samples: list[NodeSample] = []
    for tier, keys in by_tier.items():
        for value, subs in keys.get("timestamp", {}).items():
            node = nodes.get(value)
            if node is None:
                continue
            points: dict[float, float | None] = next(iter(subs.values()), {})
            per_node = {key: per.get(value, {}) for key, per in keys.items()}
            prev = -math.inf
            for t in sorted(points):
                taken_at = points[t]
                if taken_at is None or taken_at <= prev:
                    continue  # evaluated again before the next scrape: the same reading
                prev = taken_at
                fig = {key: {sub: pts.get(t) for sub, pts in subs_of.items()}
                       for key, subs_of in per_node.items()}
                sample = promql.BUILDERS[tier](node, taken_at, fig, f"prom:{tier}")
                if sample is not None:
                    samples.append(sample)
    samples.sort(key=lambda s: s.taken_at)
    return samples


def prom_source_for(layout: Layout) -> PromSource | None:
    """The layout's Prometheus source: the nodes whose series collectors/sources/routing.py gives
    to PromQL (those no other source reads), plus discovered ones."""
    config = layout.prometheus
    if config is None:
        return None
    routing = route_layout(layout)
    mine = [route.node for route in routing.read_by("prom")]
    names = [route.name for route in routing.read_by("prom")]
    if not names and not routing.discover:
        return None
    return PromSource(
        config,
        names,
        layout.cluster.interval_s,
        profiles=layout.profiles,
        profile_names=sorted({n.engine.profile for n in mine if n.engine is not None}),
        history=layout.cluster.history,
        keep_s=layout.cluster.window_s + 2 * layout.cluster.interval_s,
        window_s=layout.cluster.window_s,
    )
