"""Layout → the sources that read it. collectors/sources/routing.py decides which source reads
which part of which node; each builder here takes its share of that one answer."""

from __future__ import annotations

from infertop.collectors.sources.local import LocalSource
from infertop.collectors.sources.log_source import local_log_sources
from infertop.collectors.sources.prom import prom_source_for
from infertop.collectors.sources.routing import route_layout
from infertop.collectors.sources.scrape_shards import scrape_source_for
from infertop.collectors.sources.source import Source
from infertop.collectors.sources.ssh import ssh_source_for
from infertop.layouts.model import Layout


def build_sources(layout: Layout) -> list[Source]:
    interval = layout.cluster.interval_s
    sources: list[Source] = [
        LocalSource(route.name, interval, keep_nics=[n.name for n in route.node.nics])
        for route in route_layout(layout).read_by("local")
    ]
    sources.extend(local_log_sources(layout))  # local engine logs
    ssh = ssh_source_for(layout)  # the probe's nodes, one shared source
    if ssh is not None:
        sources.append(ssh)
    scrape = scrape_source_for(layout)  # engine and exporter pages read over HTTP (maybe in workers)
    if scrape is not None:
        sources.append(scrape)
    prom = prom_source_for(layout)  # PromQL's nodes, and discovered ones
    if prom is not None:
        sources.append(prom)
    return sources
