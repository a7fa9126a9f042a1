"""Engine pages larger than one network read arrive whole (issue 14).

A vLLM node with 8 data-parallel engines serves ~320 KB of exposition (its histograms
times its engines); real networks deliver that in many pieces. Every HTTP read of a page
— the scrape source, the probe's fetch on the node, the `snapshot` command — must read
the whole body, bounded by the size cap, and a page over the cap must say so.
The pages are built from vLLM's own metric definitions (tests/fixtures/vllm_dp_page.py)
and served by a real process that writes 4 KB pieces with a pause between them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from infertop.collectors.pages.profiles import BUNDLED_PROFILES
from infertop.collectors.probe.engine import fetch_engine
from infertop.collectors.sources.scrape import Endpoint, ScrapeSource
from infertop.collectors.sources.ssh import PROBE_MAX_LINE_BYTES, ProbeLines, SshNode, SshSource
from tests.support.paths import infertop_bin
from tests.support.vllm_dp_page import TRICKLE, assert_engine_matches, vllm_dp_page

VLLM = BUNDLED_PROFILES["vllm"]
PYTHON = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable


@pytest.fixture
def trickle(tmp_path: Path) -> Iterator[Callable[..., str]]:
    """Starts trickle servers for a page; returns its URL. All stopped at the end."""
    procs: list[subprocess.Popen[str]] = []

    def serve(text: str, *flags: str) -> str:
        page = tmp_path / f"page{len(procs)}.txt"
        page.write_text(text, encoding="utf-8")
        proc = subprocess.Popen(
            [PYTHON, "-I", str(TRICKLE), str(page), *flags], stdout=subprocess.PIPE, text=True
        )
        procs.append(proc)
        assert proc.stdout is not None
        port = int(proc.stdout.readline())
        return f"http://127.0.0.1:{port}/metrics"

    try:
        yield serve
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


async def _no_more(size: int) -> bytes:
    return b""  # a stream with nothing left to read: _sample gets its one line directly


PAGES = {"8 engines (~320 KB)": 8, "48 engines (~1.9 MB)": 48}


@pytest.mark.parametrize("engines", PAGES.values(), ids=PAGES.keys())
@pytest.mark.parametrize("framing", ["content-length", "chunked"])
async def test_scrape_reads_a_trickled_page_whole(
    trickle: Callable[..., str], engines: int, framing: str
) -> None:
    text, truth = vllm_dp_page(engines)
    url = trickle(text, *(["--chunked"] if framing == "chunked" else []))
    source = ScrapeSource({"decode-01": [Endpoint(url, VLLM)]}, interval_s=1.0, timeout_s=20.0)
    try:
        (sample,) = await source.poll()
    finally:
        await source.close()
    assert sample.error is None, sample.error
    assert not sample.notes, sample.notes
    assert_engine_matches(sample.engine, truth)


@pytest.mark.parametrize("framing", ["content-length", "chunked"])
async def test_scrape_page_one_byte_over_the_cap_fails_naming_the_cap(
    trickle: Callable[..., str], framing: str
) -> None:
    text, truth = vllm_dp_page(8)
    size = len(text.encode())
    url = trickle(text, *(["--chunked"] if framing == "chunked" else []))
    over = ScrapeSource({"n": [Endpoint(url, VLLM)]}, interval_s=1.0, timeout_s=20.0, max_bytes=size - 1)
    at_cap = ScrapeSource({"n": [Endpoint(url, VLLM)]}, interval_s=1.0, timeout_s=20.0, max_bytes=size)
    try:
        (refused,) = await over.poll()
        (read,) = await at_cap.poll()
    finally:
        await over.close()
        await at_cap.close()
    assert refused.error is not None and f"{size - 1}-byte cap" in refused.error
    assert read.error is None, read.error
    assert_engine_matches(read.engine, truth)


@pytest.mark.parametrize("framing", ["content-length", "chunked"])
def test_probe_fetch_reads_a_trickled_page_whole(trickle: Callable[..., str], framing: str) -> None:
    text, truth = vllm_dp_page(8)
    url = trickle(text, *(["--chunked"] if framing == "chunked" else []))
    fetched, error = fetch_engine(url, 20.0)
    assert error is None and fetched is not None
    # the probe ships what the infertop side parses; the SSH side turns it into the figures
    source = SshSource([SshNode("n1", "n1", engine_url=url)], interval_s=1.0)
    line = json.dumps({"t": 1.0, "engine_text": fetched}).encode()
    assert len(line) < PROBE_MAX_LINE_BYTES  # the stream's line bound lets a real page through
    sample = source._sample(source.ssh_nodes[0], line, ProbeLines(_no_more))
    assert sample is not None and sample.error is None, sample
    assert not sample.notes, sample.notes
    assert_engine_matches(sample.engine, truth)
    size = len(text.encode())
    refused, error = fetch_engine(url, 20.0, max_bytes=size - 1)
    assert refused is None and error is not None and f"{size - 1}-byte cap" in error


def test_snapshot_command_reads_an_eight_engine_node(trickle: Callable[..., str], tmp_path: Path) -> None:
    """The issue's own repro: the installed command on a layout naming a big engine page."""
    text, truth = vllm_dp_page(8)
    url = trickle(text)
    layout = tmp_path / "big.toml"
    layout.write_text(
        '[cluster]\nname = "big"\ninterval_s = 1.0\n\n'
        f'[[nodes]]\nname = "decode-01"\nrole = "decode"\ngpus = 8\n'
        f'engine = {{ url = "{url}", profile = "vllm" }}\n'
    )
    result = subprocess.run(
        [infertop_bin(), "snapshot", "--layout", str(layout), "--window", "2", "--json"],
        capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 0, result.stderr
    (node,) = json.loads(result.stdout)["nodes"]
    assert node["status"] == "ok", node["error"]
    assert node["error"] is None
    engine = node["engine"]
    assert engine["requests_running"] == truth.total("running")
    assert engine["kv_cache_usage"] == pytest.approx(truth.total("kv_cache_usage") / 8)



async def test_a_connection_closed_in_the_middle_of_a_page_is_a_read_error(
    trickle: Callable[..., str],
) -> None:
    """aiohttp reports a connection closed under a body being read (the source closing
    as the monitor stops, a connection dropped between two reads) as a bare
    RuntimeError("Connection closed."): that is a page that could not be read, said as
    such, not a crash of the node's read ("scrape: RuntimeError")."""
    import asyncio

    import aiohttp

    from infertop.collectors.sources.scrape import ScrapeError

    url = trickle(vllm_dp_page(8)[0], "--piece", "2048", "--pause", "0.01")  # ~1.6 s a page
    source = ScrapeSource({"n": [Endpoint(url, VLLM)]}, interval_s=5.0)
    session = aiohttp.ClientSession()
    async with session.get(url) as resp:
        assert await resp.content.readany()  # the first piece is in
        await session.close()  # as the source closes when the monitor stops
        await asyncio.sleep(0.1)
        with pytest.raises(ScrapeError, match="connection closed in the middle of the page"):
            await source._read_body(resp, url)
    await source.close()
