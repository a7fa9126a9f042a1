"""Which source reads which part of a node: every kind of node, every flag, exactly one reader.

The table walks node kinds (local, ssh, ssh with `via_probe = false`, metrics only, no
source but a `[prometheus]` table, a log only, NPU) crossed with what the node names (an
engine URL, an engine log, exporter pages). For each combination the sources are really
built (collectors.sources.registry.build_sources) and asked what they read; every part the node
has must be read by exactly one of them, and nothing it lacks by any. The expected parts
are written here from the layout's meaning (docs/layout.md), not from collectors.sources.routing.
"""

from __future__ import annotations

import itertools
from collections import Counter

import pytest

from infertop.collectors.sources.local import LocalSource
from infertop.collectors.sources.log_source import LogSource
from infertop.collectors.sources.prom import PromSource
from infertop.collectors.sources.registry import build_sources
from infertop.collectors.sources.routing import PARTS, route_layout
from infertop.collectors.sources.scrape import ScrapeSource
from infertop.collectors.sources.source import Source
from infertop.collectors.sources.ssh import SshSource
from infertop.layouts.loader import LayoutError
from infertop.layouts.model import EngineConfig, Layout, NodeConfig, PrometheusConfig

ENGINE_URL = "http://127.0.0.1:8000/metrics"
EXPORTER_URL = "http://n1:9100/metrics"
PROM_URL = "http://prom:9090"

SIDES = ("local", "ssh", "ssh-direct", "none")  # ssh-direct: via_probe = false
ACCELERATORS = ("gpu", "npu")
YES_NO = (False, True)


def _node(side: str, accelerator: str, url: bool, log: bool, metrics: bool) -> NodeConfig:
    engine = None
    if url or log:
        engine = EngineConfig(
            url=ENGINE_URL if url else None,
            log="/var/log/engine.log" if log else None,
            via_probe=False if side == "ssh-direct" else None,
        )
    return NodeConfig(
        name="n1",
        accelerator=accelerator,  # type: ignore[arg-type]
        local=side == "local",
        ssh="n1" if side.startswith("ssh") else None,
        metrics=[EXPORTER_URL] if metrics else [],
        engine=engine,
    )


def _layout(node: NodeConfig, prometheus: bool) -> Layout:
    return Layout(nodes=[node], prometheus=PrometheusConfig(url=PROM_URL) if prometheus else None)


def _expected(side: str, accelerator: str, url: bool, log: bool, metrics: bool, prometheus: bool) -> dict[str, str]:
    """The reader of each part, from the layout's meaning (docs/layout.md)."""
    want: dict[str, str] = {}
    node_side = {"local": "local", "ssh": "ssh", "ssh-direct": "ssh"}.get(side)
    if node_side is not None:
        want["host"] = want["nics"] = node_side
        # an npu-exporter page carries an ssh node's NPUs: no npu-smi on the node
        want["accelerators"] = "scrape" if accelerator == "npu" and metrics and node_side == "ssh" else node_side
    if url:
        want["engine_page"] = "ssh" if side == "ssh" else "scrape"  # local, direct, or pages only
    if log:
        want["engine_log"] = {"local": "log", "ssh": "ssh", "ssh-direct": "ssh"}[side]
    if metrics:
        want["exporter_pages"] = "scrape"
    if not want and prometheus:
        want["promql"] = "prom"
    return want


def _what_sources_read(sources: list[Source], node: NodeConfig) -> Counter[tuple[str, str]]:
    """(part, reader kind) for every part of `node` a built source reads, counted."""
    read: Counter[tuple[str, str]] = Counter()
    for source in sources:
        if isinstance(source, LocalSource) and source.node == node.name:
            read.update((("accelerators", "local"), ("host", "local"), ("nics", "local")))
        elif isinstance(source, LogSource) and source.node == node.name:
            read[("engine_log", "log")] += 1
        elif isinstance(source, SshSource):
            for ssh_node in source.ssh_nodes:
                if ssh_node.name != node.name:
                    continue
                read.update((("host", "ssh"), ("nics", "ssh")))
                if ssh_node.npu_smi:
                    read[("accelerators", "ssh")] += 1
                if ssh_node.engine_url is not None:
                    read[("engine_page", "ssh")] += 1
                if ssh_node.engine_log_json is not None:
                    read[("engine_log", "ssh")] += 1
        elif isinstance(source, ScrapeSource):
            for endpoint in source.targets.get(node.name or "", []):
                if endpoint.profile is not None:
                    read[("engine_page", "scrape")] += 1
                else:
                    read[("exporter_pages", "scrape")] += 1
                    if node.accelerator == "npu" and node.ssh and not node.local:
                        read[("accelerators", "scrape")] += 1  # the npu-exporter page
        elif isinstance(source, PromSource) and node.name in source.nodes:
            read[("promql", "prom")] += 1
    return read


COMBINATIONS = list(itertools.product(SIDES, ACCELERATORS, YES_NO, YES_NO, YES_NO, YES_NO))


@pytest.mark.parametrize(("side", "accelerator", "url", "log", "metrics", "prometheus"), COMBINATIONS)
def test_every_part_has_exactly_one_reader(
    side: str, accelerator: str, url: bool, log: bool, metrics: bool, prometheus: bool
) -> None:
    node = _node(side, accelerator, url, log, metrics)
    layout = _layout(node, prometheus)
    if log and side == "none":
        # a log file on a node no source runs on: said at start, naming the field
        with pytest.raises(LayoutError, match=r"nodes\[0\]\.engine\.log: node 'n1'.*local = true.*ssh"):
            build_sources(layout)
        return
    want = _expected(side, accelerator, url, log, metrics, prometheus)
    read = _what_sources_read(build_sources(layout), node)
    assert {part: count for (part, _), count in read.items() if count != 1} == {}, "a part read twice"
    parts_read = Counter(part for part, _ in read)
    assert all(count == 1 for count in parts_read.values()), f"a part read by two sources: {read}"
    assert dict(read.keys()) == want
    # the routing function says the same as the sources it built
    (route,) = route_layout(layout).routes
    assert dict(route.readers) == want
    assert set(route.readers) <= set(PARTS)


def test_ssh_node_with_a_direct_engine_is_read_by_the_scrape_source() -> None:
    """The defect of issue 44: `via_probe = false` dropped the engine from the probe, and
    the scrape source skipped every ssh node, so no one read it."""
    node = _node("ssh-direct", "gpu", url=True, log=False, metrics=False)
    sources = build_sources(_layout(node, prometheus=False))
    (ssh,) = [s for s in sources if isinstance(s, SshSource)]
    (scrape,) = [s for s in sources if isinstance(s, ScrapeSource)]
    assert ssh.ssh_nodes[0].engine_url is None
    assert [e.url for e in scrape.targets["n1"]] == [ENGINE_URL]


def test_a_node_no_source_reads_without_prometheus_has_no_parts() -> None:
    layout = Layout(nodes=[NodeConfig(name="bare")])
    (route,) = route_layout(layout).routes
    assert dict(route.readers) == {}
    assert build_sources(layout) == []


def test_discovered_nodes_make_a_prom_source_even_with_every_node_read_directly() -> None:
    layout = Layout(
        nodes=[NodeConfig(name="n1", ssh="n1")],
        prometheus=PrometheusConfig(url=PROM_URL, discover=True),
    )
    (prom,) = [s for s in build_sources(layout) if isinstance(s, PromSource)]
    assert prom.nodes == []
    assert route_layout(layout).read_over_network() == 1
