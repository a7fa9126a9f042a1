"""CPU a page read costs the monitor: the plain-HTTP page client against aiohttp.

The demo's cluster (128 nodes, realistic pages: a vLLM page with 8 engines ~310 KB,
dcgm-exporter ~46 KB, node_exporter ~75 KB) is served by its own process; this process
reads every page a few rounds over kept-alive connections, first with
`collectors.sources.http_pages.PageClient` (what the scrape source uses for plain http), then
with an aiohttp session set up as the scrape source sets it up for https (what it used
for every page before). Process CPU time per page, the body read whole and decoded.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import aiohttp

from benchmarks.common import Row, demo_serving
from infertop.collectors.sources.http_pages import ACCEPT_ENCODING, PageClient
from infertop.collectors.sources.scrape import ACCEPT, NO_CLIENT_TIMEOUT, scrape_targets
from infertop.layouts import load_layout

NODES = 128
ROUNDS = 5
CONCURRENCY = 64  # the scrape source's default bound on requests in flight
COMMAND = "python -m benchmarks.run_all bench_http_pages"


async def _rounds(read: Callable[[str], Awaitable[bytes]], urls: list[str]) -> float:
    """CPU seconds per page over ROUNDS rounds, after one round to open connections."""
    semaphore = asyncio.Semaphore(CONCURRENCY)

    async def one(url: str) -> None:
        async with semaphore:
            body = await read(url)
            body.decode("utf-8", errors="replace")

    await asyncio.gather(*(one(u) for u in urls))
    start = time.process_time()
    for _ in range(ROUNDS):
        await asyncio.gather(*(one(u) for u in urls))
    return (time.process_time() - start) / (ROUNDS * len(urls))


async def _lean(urls: list[str]) -> float:
    client = PageClient(ACCEPT)

    async def read(url: str) -> bytes:
        status, body = await client.get(url, 32 << 20)
        assert status == 200, status
        return body

    try:
        return await _rounds(read, urls)
    finally:
        client.close()


async def _aiohttp(urls: list[str]) -> float:
    connector = aiohttp.TCPConnector(limit=CONCURRENCY, ttl_dns_cache=300)
    headers = {"Accept": ACCEPT, "Accept-Encoding": ACCEPT_ENCODING, "User-Agent": "infertop"}
    async with aiohttp.ClientSession(connector=connector, headers=headers, trust_env=False) as session:

        async def read(url: str) -> bytes:
            async with session.get(url, timeout=NO_CLIENT_TIMEOUT, allow_redirects=False) as resp:
                assert resp.status == 200, resp.status
                chunks = [chunk async for chunk in resp.content.iter_any()]
                return b"".join(chunks)

        return await _rounds(read, urls)


def run() -> list[Row]:
    with demo_serving(NODES) as layout_path:
        urls = [ep.url for eps in scrape_targets(load_layout(layout_path)).values() for ep in eps]
        lean_s = asyncio.run(_lean(urls))
        aiohttp_s = asyncio.run(_aiohttp(urls))
    lean_us, aiohttp_us = lean_s * 1e6, aiohttp_s * 1e6
    return [
        Row(
            f"CPU a page read, {len(urls)} realistic pages × {ROUNDS} rounds: page client / aiohttp",
            f"{lean_us:.0f} / {aiohttp_us:.0f} µs",
            "page client below aiohttp",
            "met" if lean_us < aiohttp_us else f"missed: {lean_us / aiohttp_us:.2f}× aiohttp's",
            COMMAND,
        )
    ]


if __name__ == "__main__":
    for row in run():
        print(f"{row.figure}: {row.value} ({row.verdict})")
