"""The scrape source against real HTTP servers (aiohttp) on loopback."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web

from infertop.collectors.fleet import FleetState
from infertop.collectors.pages.exporters import EXPORTER_WANTED
from infertop.collectors.pages.profiles import BUNDLED_PROFILES
from infertop.collectors.sources.registry import build_sources
from infertop.collectors.sources.scrape import (
    WHOLE_PAGE_EVERY,
    Endpoint,
    ScrapeSource,
    latency_every_rounds,
    scrape_targets,
)
from infertop.layouts import LayoutError, parse_layout
from infertop.monitor.evaluation.figures import engine_view, part_window
from tests.support.waiting import until_async

FIXTURES = Path(__file__).parent.parent / "fixtures" / "exposition"
VLLM = BUNDLED_PROFILES["vllm"]


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


class Pages:
    """What the test server serves; tests change it between polls."""

    def __init__(self) -> None:
        self.text = {
            "engine": fixture("vllm_v1.txt"),
            "dcgm": fixture("dcgm.txt"),
            "node": fixture("node_exporter.txt"),
            "garbage": "<html><body>\x1b[31m502 Bad Gateway</body></html>\n{{{",
            "empty": "",
        }
        self.hits: dict[str, int] = {}


@pytest.fixture
async def server() -> AsyncIterator[tuple[str, Pages]]:
    pages = Pages()

    async def page(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        pages.hits[name] = pages.hits.get(name, 0) + 1
        if name == "slow":
            await asyncio.sleep(30)  # a page that hangs (the client's timeout is what is tested): no wait
        if name == "error":
            return web.Response(status=500, text="boom")
        if name not in pages.text:
            return web.Response(status=404)
        return web.Response(text=pages.text[name], content_type="text/plain")

    app = web.Application()
    app.router.add_get("/{name}/metrics", page)
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}", pages
    finally:
        await runner.cleanup()


def dead_url() -> str:
    """A loopback port nobody listens on (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/metrics"


async def test_one_sample_per_node_merging_engine_and_exporters(server: tuple[str, Pages]) -> None:
    base, _ = server
    source = ScrapeSource(
        {
            "decode-01": [
                Endpoint(f"{base}/engine/metrics", VLLM),
                Endpoint(f"{base}/dcgm/metrics"),
                Endpoint(f"{base}/node/metrics"),
            ]
        },
        interval_s=1.0,
    )
    try:
        [sample] = await source.poll()
    finally:
        await source.close()
    assert sample.node == "decode-01" and sample.source == "scrape" and sample.ok
    assert sample.engine is not None and sample.engine.generation_tokens_total == 540_000
    assert sample.gpus is not None and [g.index for g in sample.gpus] == [0, 1]
    assert sample.nics is not None
    assert {"mlx5_0", "mlx5_1", "bond0", "eth0"} <= {n.name for n in sample.nics}
    # the degraded bond whose members node_exporter could not name becomes a note
    assert "bond1: 1 of 2 bond members active" in sample.notes


async def test_bad_nodes_never_disturb_good_ones(server: tuple[str, Pages]) -> None:
    base, _ = server
    source = ScrapeSource(
        {
            "good": [Endpoint(f"{base}/engine/metrics", VLLM), Endpoint(f"{base}/dcgm/metrics")],
            "garbage": [Endpoint(f"{base}/garbage/metrics", VLLM)],
            "dead": [Endpoint(dead_url(), VLLM)],
            "slow": [Endpoint(f"{base}/slow/metrics", VLLM)],
            "http500": [Endpoint(f"{base}/error/metrics")],
            "wrong-page": [Endpoint(f"{base}/dcgm/metrics", VLLM)],
            "half": [Endpoint(f"{base}/engine/metrics", VLLM), Endpoint(dead_url())],
        },
        interval_s=1.0,
    )
    try:
        samples = {s.node: s for s in await source.poll()}
    finally:
        await source.close()
    assert set(samples) == {"good", "garbage", "dead", "slow", "http500", "wrong-page", "half"}
    good = samples["good"]
    assert good.ok and good.engine is not None and good.gpus is not None and not good.notes
    garbage = samples["garbage"].error or ""
    assert garbage.startswith(f"bad exposition from {base}/garbage/metrics")
    # no raw text echoed (the page's own words hold an escape and "502"; the
    # URL's port may hold "502" too, so only the words after it are looked at)
    said = garbage.removeprefix(f"bad exposition from {base}/garbage/metrics")
    assert "\x1b" not in garbage and "502" not in said
    assert (samples["dead"].error or "").startswith("cannot connect to http://127.0.0.1:")
    assert "no answer" in (samples["slow"].error or "")
    assert samples["http500"].error == f"HTTP 500 from {base}/error/metrics"
    assert samples["wrong-page"].error == f"no vllm engine metrics in {base}/dcgm/metrics"
    # one endpoint of two failed: the node keeps its engine, with a note saying why
    half = samples["half"]
    assert half.ok and half.engine is not None and half.gpus is None
    assert len(half.notes) == 1 and half.notes[0].startswith("cannot connect to")


async def test_connections_are_reused(server: tuple[str, Pages]) -> None:
    base, pages = server
    source = ScrapeSource({"n": [Endpoint(f"{base}/engine/metrics", VLLM)]}, interval_s=1.0)
    try:
        await source.poll()
        session = source._session
        await source.poll()
        assert source._session is session and pages.hits["engine"] == 2
    finally:
        await source.close()


def _vllm_text(steps: float, generated: float, drafts: float, draft_tokens: float, accepted: float) -> str:
    return (
        "# TYPE vllm:iteration_tokens_total histogram\n"
        f'vllm:iteration_tokens_total_bucket{{le="+Inf"}} {steps}\n'
        f"vllm:iteration_tokens_total_count {steps}\n"
        f"vllm:iteration_tokens_total_sum {steps * 64}\n"
        "# TYPE vllm:generation_tokens_total counter\n"
        f"vllm:generation_tokens_total {generated}\n"
        "# TYPE vllm:spec_decode_num_drafts_total counter\n"
        f"vllm:spec_decode_num_drafts_total {drafts}\n"
        "# TYPE vllm:spec_decode_num_draft_tokens_total counter\n"
        f"vllm:spec_decode_num_draft_tokens_total {draft_tokens}\n"
        "# TYPE vllm:spec_decode_num_accepted_tokens_total counter\n"
        f"vllm:spec_decode_num_accepted_tokens_total {accepted}\n"
    )


async def test_rates_across_an_engine_restart(server: tuple[str, Pages]) -> None:
    """Counters that drop to zero mid-window (restart) never give a negative rate."""
    base, pages = server
    source = ScrapeSource({"n": [Endpoint(f"{base}/engine/metrics", VLLM)]}, interval_s=1.0)
    state = FleetState(["n"])
    # (steps, generated, drafts, draft tokens, accepted) at each poll; restart before the 3rd
    readings = [
        (1000, 10_000, 3000, 9000, 6300),
        (1050, 10_500, 3150, 9450, 6615),
        (20, 200, 60, 180, 126),
        (70, 700, 210, 630, 441),
    ]
    try:
        for reading in readings:
            pages.text["engine"] = _vllm_text(*reading)
            for sample in await source.poll():
                state.add(sample)
    finally:
        await source.close()
    node = state.nodes["n"]
    samples = part_window(node, "engine", now=node.last_ok_at or 0.0, window_s=3600)
    assert len(samples) == 4
    dt = samples[-1].taken_at - samples[0].taken_at
    view = engine_view(samples, now=samples[-1].taken_at)
    assert view is not None
    # increase = 50 (before) + 20 (counted up from zero) + 50 (after)
    assert view.decode_steps_per_s == pytest.approx(120 / dt)
    assert view.accepted_tokens_per_s == pytest.approx(1200 / dt)
    assert view.draft_acceptance == pytest.approx(0.7)
    assert view.mean_acceptance_length == pytest.approx(1 + (315 + 126 + 315) / (150 + 60 + 150))
    # full acceptance: tokens produced plus draft tokens rejected, (Δgenerated + Δdraft_tokens
    # − Δaccepted) / Δt, each across the restart
    assert view.full_acceptance_tokens_per_s == pytest.approx((1200 + 1080 - (315 + 126 + 315)) / dt)


LAYOUT = """
[cluster]
interval_s = 1.0
[[nodes]]
name = "a"
metrics = ["http://127.0.0.1:9400/metrics"]
engine = {{ url = "http://127.0.0.1:8000/metrics", profile = "{profile}" }}
[[nodes]]
name = "b"
ssh = "b"
metrics = ["http://b:9400/metrics"]
[[nodes]]
name = "c"
[profiles.mine]
extends = "vllm"
steps = "{steps}"
"""


def test_registry_builds_one_scrape_source_for_http_nodes() -> None:
    layout = parse_layout(LAYOUT.format(profile="mine", steps="my_steps_total"), "x.toml")
    targets = scrape_targets(layout)
    # b's probe reads its host, but its exporter page is a page (collectors/sources/routing.py);
    # c has nothing to scrape
    assert list(targets) == ["a", "b"]
    assert [e.profile is not None for e in targets["a"]] == [True, False]
    assert [(e.url, e.profile) for e in targets["b"]] == [("http://b:9400/metrics", None)]
    assert targets["a"][0].profile is not None and targets["a"][0].profile.name == "mine"
    sources = [s for s in build_sources(layout) if isinstance(s, ScrapeSource)]
    assert len(sources) == 1 and sources[0].nodes == ["a", "b"]


def test_unknown_profile_is_a_layout_error_naming_the_field() -> None:
    layout = parse_layout(LAYOUT.format(profile="tgi", steps="x"), "x.toml")
    with pytest.raises(LayoutError) as err:
        scrape_targets(layout)
    assert "nodes[0].engine.profile" in str(err.value) and "tgi" in str(err.value)


def test_bad_custom_profile_is_a_layout_error_naming_the_key() -> None:
    layout = parse_layout(LAYOUT.format(profile="vllm", steps="two words"), "x.toml")
    with pytest.raises(LayoutError) as err:
        scrape_targets(layout)
    assert str(err.value).startswith("x.toml: profiles.mine.steps:")


async def test_under_run_each_node_is_handed_over_as_soon_as_it_is_read(server: tuple[str, Pages]) -> None:
    """A node that answers late does not hold the others' readings back: when a round
    runs past the monitor's tick, the nodes read by then are fresh in that frame."""
    import time

    base, _ = server
    source = ScrapeSource(
        {"good": [Endpoint(f"{base}/engine/metrics", VLLM)], "slow": [Endpoint(f"{base}/slow/metrics", VLLM)]},
        interval_s=1.0,
    )
    arrived: list[tuple[str, float, bool]] = []
    rounds: list[float] = []
    source.round_listeners.append(lambda s: rounds.append(time.monotonic()))
    running = asyncio.create_task(source.run(lambda s: arrived.append((s.node, time.monotonic(), s.ok))))
    try:
        await until_async(lambda: rounds, 30, "a round", every_s=0.02)
    finally:
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running
        await source.close()
    # the first round's readings (a poll that ends just past the next reading instant
    # reads again at once: the next round may have begun before this test woke)
    first = [(node, at, ok) for node, at, ok in arrived if at <= rounds[0]]
    good = [(at, ok) for node, at, ok in first if node == "good"]
    slow = [(at, ok) for node, at, ok in first if node == "slow"]
    assert len(good) == 1 and good[0][1] and len(slow) == 1 and not slow[0][1]  # once each
    # the good node went out at once, the slow one at the poll's deadline (~0.77 s)
    assert slow[0][0] - good[0][0] > 0.5
    assert rounds[0] >= slow[0][0]


def test_latency_buckets_are_read_a_few_times_a_window() -> None:
    assert latency_every_rounds(1.0, 10.0) == 3  # a 10 s window at 1 s: 3–4 readings in it
    assert latency_every_rounds(0.5, 10.0) == 6
    assert latency_every_rounds(1.0, 2.0) == 1  # a short window: every round
    assert latency_every_rounds(5.0, 10.0) == 1
    assert latency_every_rounds(0.0, 10.0) == 1


async def test_latency_buckets_on_one_round_in_n_each_node_on_its_own_phase(server: tuple[str, Pages]) -> None:
    base, _ = server
    nodes = [f"decode-{i:02d}" for i in range(12)]
    targets = {n: [Endpoint(f"{base}/engine/metrics", VLLM)] for n in nodes}
    every = 3
    # rounds on time: a long interval keeps the late-rounds rule (below) out of this test
    source = ScrapeSource(targets, interval_s=60.0, latency_every=every)
    read_in: dict[str, list[int]] = {n: [] for n in nodes}
    try:
        for poll in range(2 * every):
            for s in await source.poll():
                assert s.ok and s.engine is not None
                # the engine's other figures are read every round
                assert s.engine.generation_tokens_total is not None
                if s.engine.latency_buckets:
                    assert set(s.engine.latency_buckets) >= {"ttft", "itl"}
                    read_in[s.node].append(poll)
    finally:
        await source.close()
    for node, polls in read_in.items():
        assert len(polls) == 2 and polls[1] - polls[0] == every, (node, polls)
    # not every node on the same round: each round reads about a third of them
    per_round = [sum(p in polls for polls in read_in.values()) for p in range(every)]
    assert sum(per_round) == len(nodes) and max(per_round) < len(nodes), per_round
    # without the cadence every reading has them
    every_round = ScrapeSource(targets, interval_s=1.0)
    try:
        assert all(s.engine is not None and s.engine.latency_buckets for s in await every_round.poll())
    finally:
        await every_round.close()


async def test_latency_buckets_are_read_whenever_the_rounds_run_late(server: tuple[str, Pages]) -> None:
    # issue 33: a loaded host ran 10 rounds in a 15 s window at 1 s; reading the buckets one
    # round in five left one reading, and TTFT/ITL vanished. Rounds later than planned
    # (here each round starts after the whole planned gap of `every` × interval has passed)
    # read them every time, whatever the phase.
    base, _ = server
    targets = {"decode-01": [Endpoint(f"{base}/engine/metrics", VLLM)]}
    every, interval_s = 5, 0.02
    source = ScrapeSource(targets, interval_s=interval_s, latency_every=every)
    read: list[bool] = []
    try:
        for _ in range(4):
            (sample,) = await source.poll()
            assert sample.engine is not None
            read.append(bool(sample.engine.latency_buckets))
            await asyncio.sleep(every * interval_s * 1.5)  # a round as late as a whole cadence
    finally:
        await source.close()
    assert read[1:] == [True, True, True], read  # the first round counts from itself


def test_the_registry_reads_latency_buckets_on_the_windows_cadence() -> None:
    text = """
[cluster]
interval_s = 1.0
window_s = 10.0
[[nodes]]
name = "d1"
role = "decode"
engine = { url = "http://127.0.0.1:9/metrics", profile = "vllm" }
"""
    sources = [s for s in build_sources(parse_layout(text)) if isinstance(s, ScrapeSource)]
    assert len(sources) == 1 and sources[0].latency_every == 3


async def test_a_page_bad_in_lines_nobody_reads_is_called_bad_on_its_whole_page_round(
    server: tuple[str, Pages],
) -> None:
    """Pages are skimmed (unwanted lines passed over unchecked) but read whole one round in
    WHOLE_PAGE_EVERY, each node on its own phase: a line gone bad where no figure is read
    is an error within that many rounds, and every round after until the page reads right."""
    base, pages = server
    nodes = [f"decode-{i:02d}" for i in range(12)]
    # one URL each (the query string only tells them apart), as nodes have
    source = ScrapeSource({n: [Endpoint(f"{base}/dcgm/metrics?node={n}")] for n in nodes}, interval_s=1.0)
    good = pages.text["dcgm"]
    assert "DCGM_FI_DEV_MEM_CLOCK" not in EXPORTER_WANTED
    bad_line = 'DCGM_FI_DEV_MEM_CLOCK{gpu="0"} 1593\nDCGM_FI_DEV_MEM_CLOCK{gpu="1"} fast\n'
    at = good.index("# HELP DCGM_FI_DEV_MEMORY_TEMP")
    bad = good[:at] + bad_line + good[at:]
    ok_rounds: dict[str, list[bool]] = {n: [] for n in nodes}
    try:
        assert all(s.ok for s in await source.poll())  # the first reading of a page is whole
        pages.text["dcgm"] = bad
        for _ in range(WHOLE_PAGE_EVERY + 2):
            for s in await source.poll():
                ok_rounds[s.node].append(s.ok)
                if not s.ok:
                    assert (s.error or "").startswith(f"bad exposition from {base}/dcgm/metrics")
        pages.text["dcgm"] = good
        assert all(s.ok for s in await source.poll())  # read whole again, and right
        assert all(s.ok for s in await source.poll())
    finally:
        await source.close()
    first_bad = {n: rounds.index(False) for n, rounds in ok_rounds.items()}
    for node, rounds in ok_rounds.items():
        # called bad within WHOLE_PAGE_EVERY rounds, then on every round
        assert first_bad[node] < WHOLE_PAGE_EVERY and not any(rounds[first_bad[node]:]), (node, rounds)
    # skimmed in between (a page read whole every round would be bad at once), each node
    # on its own phase
    assert max(first_bad.values()) > 0 and len(set(first_bad.values())) > 1, first_bad


async def test_a_cancelled_poll_takes_its_reads_with_it_and_opens_nothing_after_close(
    server: tuple[str, Pages],
) -> None:
    # The monitor stopping cancels a poll in flight, then closes the source. The poll's
    # reads must end with it: one still queued for a connection would otherwise open a
    # new session after the close, left for the interpreter to find ("Unclosed client
    # session" in the monitor's log after `infertop stop`, seen at 128 nodes).
    base, pages = server
    source = ScrapeSource(
        {f"n{i}": [Endpoint(f"{base}/slow/metrics", VLLM)] for i in range(4)},
        interval_s=5.0, max_concurrency=1,
    )
    poll = asyncio.create_task(source.poll())
    await until_async(lambda: pages.hits.get("slow", 0) >= 1, 20, "one read in flight (three queued)")
    poll.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await poll
    await source.close()

    def left() -> list[str]:
        return [t.get_name() for t in asyncio.all_tasks() if t.get_name().startswith("scrape:") and not t.done()]

    await until_async(lambda: left() == [], 20, "every read to end", detail=left)
    assert source._session is None  # nothing opened after the close
