"""The demo's node_exporter honours `collect[]` as node_exporter does, and the layout it
writes asks only for the collectors infertop reads: the same ports, a third of the page."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import cast
from urllib.parse import urlsplit

import aiohttp
import pytest

from infertop.collectors.pages.exporters import EXPORTER_WANTED, parts_from_exporter
from infertop.collectors.pages.exposition import parse_exposition
from infertop.collectors.safe_text import redact_url
from infertop.collectors.sample import NicSample
from infertop.collectors.sources.scrape import Endpoint, ScrapeSource, scrape_targets, usual_kind
from infertop.demo import realistic_hosts, render
from infertop.demo.node_collectors import INFERTOP_COLLECTORS, collector_of, only_collectors
from infertop.demo.scenario import SimCluster
from infertop.demo.server import DemoServer, layout_toml
from infertop.layouts import parse_layout

T0 = 1_000_000.0


def _families(text: str) -> set[str]:
    return set(re.findall(r"^# TYPE (\S+) ", text, re.M))


@pytest.fixture
async def demo() -> AsyncIterator[DemoServer]:
    server = DemoServer(4, seed=3)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


async def _get(url: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as session, session.get(url) as resp:
        return resp.status, await resp.text()


async def test_the_demo_node_exporter_serves_only_the_collectors_asked_for(demo: DemoServer) -> None:
    assert demo.addresses is not None
    url = demo.addresses.url("node", "decode-01")
    status, full = await _get(url)
    assert status == 200
    status, netdev = await _get(url + "?collect[]=netdev")
    assert status == 200
    assert {collector_of(f) for f in _families(netdev)} == {"netdev", None}
    assert {f for f in _families(netdev) if collector_of(f) is None} == {
        "node_scrape_collector_duration_seconds", "node_scrape_collector_success"}
    assert set(re.findall(r'collector="(\w+)"', netdev)) == {"netdev"}
    assert "node_network_transmit_bytes_total{" in netdev and "node_network_info{" not in netdev
    status, four = await _get(demo.addresses.layout_url("node", "decode-01"))
    assert status == 200
    assert {collector_of(f) for f in _families(four)} == {*INFERTOP_COLLECTORS, None}
    assert "node_cpu_seconds_total" not in four and "node_cpu_seconds_total" in full
    assert len(four) < len(full) / 2


async def test_an_unknown_collector_is_refused_with_400(demo: DemoServer) -> None:
    assert demo.addresses is not None
    url = demo.addresses.url("node", "decode-01")
    status, text = await _get(url + "?collect[]=netdev&collect[]=gpu")
    assert status == 400
    assert text.strip() == "Couldn't create filtered metrics handler: missing collector: gpu"


@pytest.mark.parametrize("page", [realistic_hosts.node_exporter_page, render.node_exporter_page])
def test_the_filtered_page_gives_the_same_ports(page) -> None:  # type: ignore[no-untyped-def]
    node = SimCluster(16, started_at=T0).nodes["decode-03"]
    text = page(node, T0 + 50)

    def nics(text: str) -> list[NicSample]:
        return cast(list[NicSample], parts_from_exporter(parse_exposition(text, wanted=EXPORTER_WANTED))["nics"])

    filtered = only_collectors(text, INFERTOP_COLLECTORS)
    assert nics(filtered) == nics(text) and len(nics(text)) >= 9


async def test_a_scrape_through_the_written_layout_reads_the_same_ports(demo: DemoServer) -> None:
    layout = parse_layout(layout_toml(demo), "demo.toml")
    targets = scrape_targets(layout)
    node_url = targets["decode-01"][-1].url
    assert urlsplit(node_url).query == "&".join(f"collect[]={c}" for c in INFERTOP_COLLECTORS)
    assert usual_kind(node_url)[0] == "exporter"  # the demo's ports are not 9100: named by what it gives
    assert usual_kind(node_url.replace(f":{urlsplit(node_url).port}/", ":9100/"))[0] == "node_exporter"
    assert redact_url(node_url) == node_url  # nothing in it looks secret
    plain = node_url.split("?", 1)[0]
    filtered = ScrapeSource({"decode-01": targets["decode-01"]}, interval_s=1.0)
    unfiltered = ScrapeSource({"decode-01": [Endpoint(plain, keep_nics=targets["decode-01"][-1].keep_nics)]},
                              interval_s=1.0)
    try:
        [with_filter] = await filtered.poll()
        [without] = await unfiltered.poll()
    finally:
        await filtered.close()
        await unfiltered.close()
    assert with_filter.ok and without.ok and with_filter.nics is not None and without.nics is not None

    def shape(nics: list[NicSample]) -> list[tuple[object, ...]]:
        # counters move between the two reads; everything else is the same
        return [(n.name, n.kind, n.state, n.speed_gbps, n.members, n.members_up) for n in nics]

    assert shape(with_filter.nics) == shape(without.nics)
    assert {n.name for n in with_filter.nics} >= {"eth0", "bond0", "mlx5_0"}
    [page] = [p for p in with_filter.pages if p.kind == "node_exporter"]
    assert page.ok and page.url == node_url


@pytest.mark.parametrize(
    "collect",
    [INFERTOP_COLLECTORS, ("cpu", "netdev"), ("bonding",), ("meminfo", "infiniband", "time"), ("filesystem",), ("diskstats",)],
)
def test_the_realistic_page_filtered_as_drawn_is_the_page_filtered(collect: tuple[str, ...]) -> None:
    # the server draws a collect[] page part by part (its host block filtered once per
    # redraw): the same text as filtering the whole page, on the same node history
    drawn, whole = SimCluster(16, started_at=T0), SimCluster(16, started_at=T0)
    for name in ("decode-03", "prefill-02"):
        for second in (50, 51, 62.5):
            expected = only_collectors(realistic_hosts.node_exporter_page(whole.nodes[name], T0 + second), collect)
            got = realistic_hosts.collected_node_exporter_page(drawn.nodes[name], T0 + second, collect)
            assert got == expected
