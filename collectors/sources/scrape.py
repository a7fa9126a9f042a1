"""The scrape source: HTTP GET of Prometheus text from engines and exporters.

One `aiohttp.ClientSession` (kept-alive connections) serves every node; a semaphore
bounds how many requests are in flight; every request has its own timeout, and a poll
has a deadline after which a node that has not answered gets a "timed out" error while
every node that did answer is emitted as usual. One `NodeSample(source="scrape")` per
node per poll merges that node's endpoints: the engine page fills `engine`, exporter
pages fill `gpus` / `nics`. An endpoint that fails adds a note; a node whose every
endpoint failed gets an error sample. Nothing a node serves can stall or break another.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from infertop.collectors.pages.exporters import EXPORTER_WANTED, parts_from_exporter
from infertop.collectors.pages.exposition import (
    MAX_EXPOSITION_BYTES,
    ExpositionError,
    duplicate_note,
    parse_exposition,
)
from infertop.collectors.pages.profiles import (
    Profile,
    ProfileError,
    custom_profile,
    engine_sample_from_exposition,
    resolve_profile,
)
from infertop.collectors.process.loop_stalls import wire_timeout
from infertop.collectors.safe_text import redact_url
from infertop.collectors.sample import EngineSample, GpuSample, NicSample, NodeSample, PageKind, PageOutcome
from infertop.collectors.sources.http_pages import (
    ACCEPT_ENCODING,
    ConnectError,
    PageClient,
    PageError,
    TooBig,
)
from infertop.collectors.sources.routing import route_layout
from infertop.collectors.sources.source import PollingSource
from infertop.layouts.loader import LayoutError
from infertop.layouts.model import Layout

log = logging.getLogger(__name__)
ACCEPT = "text/plain;version=0.0.4;q=1,*/*;q=0.1"  # classic text, not OpenMetrics
# a latency percentile is taken over the window from the histogram's first and last
# reading in it; this many readings in a window keep it covering most of the window
LATENCY_READINGS_PER_WINDOW = 3
MAX_NOTES = 6
# A page is read whole (every line checked, as Prometheus would) one round in this many;
# on the others only its wanted, HELP and TYPE lines are read (`parse_exposition(skim=…)`:
# ~35 % less CPU on a vLLM page without its latency buckets, BENCHMARKS.md). A page that
# goes bad in lines nobody reads is so called within this many rounds, and then every
# round until it reads right.
WHOLE_PAGE_EVERY = 10
# each request is bounded by `wire_timeout` instead (aiohttp's default is 5 minutes)
NO_CLIENT_TIMEOUT = aiohttp.ClientTimeout(total=None)


@dataclass(frozen=True)
class Endpoint:
    """One URL of a node: its engine (read with `profile`) or an exporter page."""

    url: str
    profile: Profile | None = None  # set for the engine endpoint
    # the ports the layout expects on the node: an exporter page's devices named like
    # container / virtual plumbing are left out, these never (collectors.virtual_nics)
    keep_nics: frozenset[str] = frozenset()


class ScrapeError(Exception):
    """One endpoint could not be read; `str()` is a short line naming the URL."""


@dataclass
class _Result:
    engine: EngineSample | None = None
    parts: dict[str, Any] | None = None
    error: str | None = None
    received_at: float | None = None  # when the page was read (request/answer midpoint)
    notes: tuple[str, ...] = ()  # what was odd about a page that was read


# An exporter page that has never answered is named by its usual port, so that the very
# first failure already says which parts it leaves unknown.
USUAL_PORTS: dict[int, tuple[PageKind, tuple[str, ...]]] = {
    9100: ("node_exporter", ("nics",)),
    9400: ("dcgm-exporter", ("gpus",)),
    8082: ("npu-exporter", ("gpus", "nics")),
}


def shard_of(node: str, shards: int) -> int:
    """A node's share among `shards`: its worker (`collectors.sources.scrape_shards`), the round it
    reads its latency buckets on. Stable across runs and restarts (not Python's salted hash)."""
    return zlib.crc32(node.encode("utf-8")) % shards


def latency_every_rounds(interval_s: float, window_s: float) -> int:
    """Every how many rounds an engine page's latency histograms are read.

    They are most of a vLLM page's wanted lines (8 engines × 5 histograms × ~20 buckets)
    and most of what reading it costs (1.78 ms a realistic page with them, 1.17 without;
    BENCHMARKS.md), yet a percentile over the window needs only its first and last
    reading in it: `LATENCY_READINGS_PER_WINDOW` readings a window keep it over most of
    the window (a 10 s window at 1 s: every 3rd round, spanning 6–9 s)."""
    if interval_s <= 0:
        return 1
    return max(1, int(window_s / (LATENCY_READINGS_PER_WINDOW * interval_s)))


def exporter_kind(parts: Mapping[str, Any]) -> PageKind:
    """Which exporter a page that read right came from, by what it filled."""
    gpus = parts.get("gpus") or ()
    if any(getattr(g, "kind", "gpu") == "npu" for g in gpus):
        return "npu-exporter"
    if "gpus" in parts:
        return "dcgm-exporter"
    if "nics" in parts:
        return "node_exporter"
    return "exporter"


def usual_kind(url: str) -> tuple[PageKind, tuple[str, ...]]:
    try:
        port = urlsplit(url).port
    except ValueError:
        port = None
    return USUAL_PORTS.get(port or 0, ("exporter", ()))


class ScrapeSource(PollingSource):
    kind = "scrape"

    def __init__(
        self,
        targets: Mapping[str, Sequence[Endpoint]],
        interval_s: float,
        timeout_s: float | None = None,
        max_concurrency: int = 64,
        max_bytes: int = MAX_EXPOSITION_BYTES,
        latency_every: int = 1,
    ):
        super().__init__(list(targets), interval_s, timeout_s)
        self.targets = {node: list(eps) for node, eps in targets.items()}
        # engine latency buckets on one round in `latency_every` (`latency_every_rounds`),
        # each node on its own phase, so the rounds cost alike
        self.latency_every = max(1, latency_every)
        self._latency_phase = {n: shard_of(n, self.latency_every) for n in targets}
        # when each node's latency buckets were last asked for (monotonic): rounds that run
        # late (a loaded host) must not thin the readings below two a window (issue 33)
        self._latency_read_at: dict[str, float] = {}
        self._polls = 0
        # pages skimmed (their unwanted lines passed over unchecked) but read whole on one
        # round in WHOLE_PAGE_EVERY, each node on its own phase; a page whose last whole
        # reading failed is read whole every round until one succeeds. URLs whose last
        # whole reading succeeded:
        self._whole_page_phase = {n: shard_of(n, WHOLE_PAGE_EVERY) for n in targets}
        self._page_read_whole: set[str] = set()
        # answers must be in before PollingSource's own bound cancels the whole poll
        self.deadline_s = self.timeout_s * 0.85
        self.max_bytes = max_bytes
        self._semaphore = asyncio.Semaphore(max_concurrency)
        self._max_concurrency = max_concurrency
        self._session: aiohttp.ClientSession | None = None
        # plain-http pages: a leaner client than aiohttp's (collectors.sources.http_pages); aiohttp
        # reads the rest (https, credentials)
        self._pages = PageClient(ACCEPT)
        # URL → (kind, parts) of what the page gave when it last read right: a failed
        # page's outcome says which parts it leaves unknown
        self._page_kinds: dict[str, tuple[PageKind, tuple[str, ...]]] = {}

    # ------------------------------------------------------------------ http

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(limit=self._max_concurrency, ttl_dns_cache=300)
            self._session = aiohttp.ClientSession(
                connector=connector,
                headers={"Accept": ACCEPT, "Accept-Encoding": ACCEPT_ENCODING, "User-Agent": "infertop"},
                # aiohttp would otherwise read HTTP_PROXY for loopback exporters too
                trust_env=False,
            )
        return self._session

    async def fetch(self, url: str, timeout_s: float) -> tuple[str, float]:
        """GET one page as text, and when it was read: the midpoint of the request and its
        answer (the server read its counters in between; stamping the end instead skews
        rates by the jitter). `ScrapeError` with a short reason on any failure."""
        where = redact_url(url)
        plain = self._pages.handles(url)
        try:
            async with self._semaphore:
                sent_at = time.time()  # after the semaphore: queueing is not reading
                # the timeout is measured on the wire, not against this process's loop: a
                # page that arrived while the monitor stood still is read, not "timed out"
                # (collectors.process.loop_stalls); aiohttp's own timer would fire as the loop wakes
                async with wire_timeout(timeout_s):
                    if plain:
                        status, body = await self._pages.get(url, self.max_bytes)
                        if status != 200:
                            raise ScrapeError(f"HTTP {status} from {where}")
                    else:
                        async with self._client().get(
                            url, timeout=NO_CLIENT_TIMEOUT, allow_redirects=False
                        ) as resp:
                            if resp.status != 200:
                                raise ScrapeError(f"HTTP {resp.status} from {where}")
                            body = await self._read_body(resp, where)
        except ScrapeError:
            raise
        except TimeoutError:
            raise ScrapeError(f"no answer from {where} within {timeout_s:.2g} s") from None
        except TooBig:
            raise self._too_big(where) from None
        except (ConnectError, aiohttp.ClientConnectorError):
            raise ScrapeError(f"cannot connect to {where}") from None
        except PageError as exc:
            raise ScrapeError(f"cannot read {where}: {exc}") from None
        except (aiohttp.ClientError, OSError, ValueError) as exc:
            raise ScrapeError(f"cannot read {where}: {type(exc).__name__}") from None
        read_at = (sent_at + time.time()) / 2
        return body.decode("utf-8", errors="replace"), read_at

    def _too_big(self, where: str) -> ScrapeError:
        return ScrapeError(f"bad exposition from {where}: larger than the {self.max_bytes}-byte cap")

    async def _read_body(self, resp: aiohttp.ClientResponse, where: str) -> bytes:
        """The whole body, at most `max_bytes` of it (decompressed). A page arrives in many
        network reads (a vLLM node with 8 DP engines serves ~320 KB): one `read(n)` returns
        only what has arrived so far, and a cut page parses as garbage."""
        too_big = self._too_big(where)
        if resp.content_length is not None and resp.content_length > self.max_bytes:
            raise too_big
        chunks: list[bytes] = []
        size = 0
        try:
            async for chunk in resp.content.iter_any():
                size += len(chunk)
                if size > self.max_bytes:
                    raise too_big
                chunks.append(chunk)
        except RuntimeError as exc:
            # aiohttp's stream reader says so when the connection closed under the body
            # (the source closing as the monitor stops, a connection dropped between reads)
            if str(exc) != "Connection closed.":
                raise
            raise ScrapeError(
                f"cannot read {where}: the connection closed in the middle of the page"
            ) from None
        return b"".join(chunks)

    # ------------------------------------------------------------------ one node

    async def _read(
        self, endpoint: Endpoint, timeout_s: float, with_latency: bool = True, whole: bool = True
    ) -> _Result:
        skim = not whole and endpoint.url in self._page_read_whole
        try:
            text, received_at = await self.fetch(endpoint.url, timeout_s)
            if endpoint.profile is None:
                wanted = EXPORTER_WANTED
            elif with_latency:
                wanted = endpoint.profile.wanted
            else:
                wanted = endpoint.profile.wanted_without_latency
            index = parse_exposition(text, endpoint.url, wanted=wanted, skim=skim)
            if not skim:
                self._page_read_whole.add(endpoint.url)
            duplicates = duplicate_note(index, endpoint.url)
            notes = (duplicates,) if duplicates else ()
            if endpoint.profile is not None:
                engine = engine_sample_from_exposition(index, endpoint.profile, where=endpoint.url)
                return _Result(engine=engine, received_at=received_at, notes=notes)
            parts = parts_from_exporter(index, endpoint.keep_nics)
            if not parts:
                where = redact_url(endpoint.url)
                return _Result(error=f"no dcgm-exporter or node_exporter metrics in {where}")
            return _Result(parts=parts, received_at=received_at, notes=notes)
        except ExpositionError as exc:
            self._page_read_whole.discard(endpoint.url)  # read it whole until it reads right
            return _Result(error=str(exc))
        except ScrapeError as exc:
            return _Result(error=str(exc))

    def _due(self, phases: Mapping[str, int], node: str, every: int) -> bool:
        """Whether this round is the node's one in `every`, on its phase."""
        return (self._polls + phases.get(node, 0)) % every == 0

    def _latency_due(self, node: str) -> bool:
        """Whether to read the node's latency buckets this round: on its phase, and also
        whenever the rounds meant to lie between two readings took longer than planned
        (`latency_every` × interval: the monitor runs late), so a window keeps the readings
        `latency_every_rounds` planned for it however few rounds it gets."""
        now = time.monotonic()
        last = self._latency_read_at.setdefault(node, now)  # counted from the first round
        due = self._due(self._latency_phase, node, self.latency_every) or (
            now - last >= self.latency_every * self.interval_s
        )
        if due:
            self._latency_read_at[node] = now
        return due

    async def read_node(self, node: str, timeout_s: float) -> NodeSample:
        endpoints = self.targets[node]
        with_latency = self._latency_due(node)
        whole = self._due(self._whole_page_phase, node, WHOLE_PAGE_EVERY)
        results = await asyncio.gather(*(self._read(ep, timeout_s, with_latency, whole) for ep in endpoints))
        # stamp the reading when the pages arrived, not after parsing them: under load the
        # parse can take longer than the fetch, and a late stamp skews every rate
        arrived = [r.received_at for r in results if r.received_at is not None]
        taken_at = sum(arrived) / len(arrived) if arrived else time.time()
        errors = [r.error for r in results if r.error is not None]
        pages = [self._outcome(ep, r) for ep, r in zip(endpoints, results, strict=True)]
        if len(errors) == len(results):
            # every endpoint's own error, each once: "(and 1 more)" named nothing
            return NodeSample(
                node=node, source=self.kind, taken_at=taken_at, error="; ".join(dict.fromkeys(errors)),
                pages=pages,
            )
        engine = next((r.engine for r in results if r.engine is not None), None)
        gpus: list[GpuSample] | None = None
        nics: list[NicSample] | None = None
        notes = list(errors)
        unseen: dict[str, str] = {}
        for result in results:
            parts = result.parts or {}
            if "gpus" in parts:
                gpus = [*(gpus or []), *parts["gpus"]]
            if "nics" in parts:
                nics = [*(nics or []), *parts["nics"]]
            notes += [n for n in (*result.notes, *parts.get("notes", ())) if n not in notes]
            unseen.update(parts.get("unseen") or {})
        return NodeSample(
            node=node,
            source=self.kind,
            taken_at=taken_at,
            engine=engine,
            gpus=gpus,
            nics=nics,
            notes=notes[:MAX_NOTES],
            pages=pages,
            unseen=unseen,
        )

    def _outcome(self, endpoint: Endpoint, result: _Result) -> PageOutcome:
        kind: PageKind
        parts: tuple[str, ...]
        if endpoint.profile is not None:
            kind, parts = "engine", ("engine",)
        elif result.error is None and result.parts is not None:
            kind = exporter_kind(result.parts)
            parts = tuple(p for p in ("gpus", "nics") if p in result.parts)
            self._page_kinds[endpoint.url] = (kind, parts)
        else:
            kind, parts = self._page_kinds.get(endpoint.url) or usual_kind(endpoint.url)
        return PageOutcome(
            kind=kind, url=redact_url(endpoint.url), ok=result.error is None, error=result.error, parts=parts
        )

    # ------------------------------------------------------------------ poll

    async def poll(self) -> Sequence[NodeSample]:
        self._polls += 1
        deadline = self.deadline_s
        tasks = {
            node: asyncio.create_task(self.read_node(node, deadline), name=f"scrape:{node}")
            for node in self.nodes
        }
        emitted: set[str] = set()
        emit = self.emit_early
        if emit is not None:
            # each node's reading goes out as it is in: when a round runs past the monitor's
            # tick, the nodes read by then are fresh in that frame, not all a round behind
            def hand_over(node: str, task: asyncio.Task[NodeSample]) -> None:
                # (a reading that came in just as the wait below ended is returned instead)
                if node not in emitted and not task.cancelled() and task.exception() is None:
                    emitted.add(node)
                    emit(task.result())

            for node, task in tasks.items():
                task.add_done_callback(functools.partial(hand_over, node))
        # the poll's deadline on the wire too (see fetch): a late loop is not a late node
        try:
            with contextlib.suppress(TimeoutError):
                async with wire_timeout(deadline):
                    await asyncio.wait(tasks.values())
        except asyncio.CancelledError:
            # the poll cancelled (the monitor stopping): its reads end with it, or one still
            # queued for a connection would open a new session after `close`
            for task in tasks.values():
                task.cancel()
            raise
        samples: list[NodeSample] = []
        for node, task in tasks.items():
            if node in emitted:
                continue
            if task.done() and not task.cancelled() and task.exception() is None:
                emitted.add(node)
                samples.append(task.result())
                continue
            if not task.done():
                task.cancel()
                message = f"scrape: no answer within {deadline:.2g} s"
            elif task.cancelled():
                message = "scrape: cancelled"
            else:
                exc = task.exception()
                log.debug("scrape of %s failed", node, exc_info=exc)
                message = f"scrape: {type(exc).__name__}"
            samples.append(self.error_sample(node, message))
        # reap the cancelled ones so no task outlives its poll
        leftovers = [t for t in tasks.values() if not t.done()]
        if leftovers:
            with contextlib.suppress(Exception):
                await asyncio.gather(*leftovers, return_exceptions=True)
        return samples

    async def close(self) -> None:
        self._pages.close()
        if self._session is not None and not self._session.closed:
            await self._session.close()
        self._session = None


def scrape_targets(layout: Layout) -> dict[str, list[Endpoint]]:
    """Node → endpoints, for every node whose engine page or exporter pages the scrape
    source reads (collectors/sources/routing.py decides which those are).

    An unknown engine profile, or a custom profile the layout got wrong, is a
    `LayoutError` naming the field (exit 2), not a node error at run time.
    """
    path = layout.source_path or "<layout>"
    for name, mapping in layout.profiles.items():
        try:
            custom_profile(name, mapping)
        except ProfileError as exc:
            raise LayoutError(path, f"profiles.{exc.field}", exc.problem) from None
    targets: dict[str, list[Endpoint]] = {}
    for route in route_layout(layout).read_by("scrape"):
        node = route.node
        endpoints: list[Endpoint] = []
        if route.reads("engine_page", "scrape"):
            assert node.engine is not None and node.engine.url is not None
            try:
                profile = resolve_profile(node.engine.profile, layout.profiles)
            except ProfileError as exc:
                raise LayoutError(path, f"nodes[{route.index}].engine.profile", exc.problem) from None
            endpoints.append(Endpoint(node.engine.url, profile))
        if route.reads("exporter_pages", "scrape"):
            keep = frozenset(n.name for n in node.nics)
            endpoints += [Endpoint(url, keep_nics=keep) for url in node.metrics]
        targets[route.name] = endpoints
    return targets
