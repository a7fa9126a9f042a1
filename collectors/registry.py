"""Layout → the sources that read it. One place decides which source reads which node."""

from __future__ import annotations

from infertop.collectors.local import LocalSource
from infertop.collectors.log_source import local_log_sources
from infertop.collectors.prom import prom_source_for
from infertop.collectors.scrape_shards import scrape_source_for
from infertop.collectors.source import Source
from infertop.collectors.ssh import ssh_source_for
from infertop.layouts.model import Layout


def build_sources(layout: Layout) -> list[Source]:
    interval = layout.cluster.interval_s
    sources: list[Source] = []
    for node in layout.nodes:
        assert node.name is not None
        if node.local:
            sources.append(LocalSource(node.name, interval, keep_nics=[n.name for n in node.nics]))
    sources.extend(local_log_sources(layout))  # local nodes whose engine.log names a file
    ssh = ssh_source_for(layout)  # every node with an `ssh` target, one shared source
    if ssh is not None:
        sources.append(ssh)
    scrape = scrape_source_for(layout)  # nodes with `metrics` / an engine URL and no ssh (maybe in workers)
    if scrape is not None:
        sources.append(scrape)
    prom = prom_source_for(layout)  # nodes no other source reads, and discovered ones
    if prom is not None:
        sources.append(prom)
    return sources
