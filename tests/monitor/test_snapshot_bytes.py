"""The `infertop.snapshot/1` JSON of a whole demo cluster, byte for byte, as recorded.

The demo's realistic pages (8 data-parallel engines a node with latency histograms, dcgm-
exporter, node_exporter) at fixed instants, parsed as the scrape source parses them, fed
through a real `Monitor` on a fixed clock. Both public forms are compared with the ones
recorded in tests/fixtures/snapshot_bytes/: the `infertop snapshot` text (every field) and
the compact text the session record and the viewers' channel carry (defaults left out).

A refactor of the snapshot's models (where a field is declared, how a view is built) must
leave both unchanged, key order included. A deliberate change to the JSON (a field added)
rewrites the files: `INFERTOP_RECORD_SNAPSHOT_BYTES=1 pytest tests/monitor/test_snapshot_bytes.py`,
and the diff shows what changed.
"""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path
from typing import cast
from urllib.parse import parse_qs, urlsplit

from infertop.collectors.pages.exporters import EXPORTER_WANTED, parts_from_exporter
from infertop.collectors.pages.exposition import parse_exposition
from infertop.collectors.pages.profiles import engine_sample_from_exposition
from infertop.collectors.sample import GpuSample, NicSample, NodeSample
from infertop.collectors.sources.scrape import Endpoint, scrape_targets
from infertop.demo.scenario import SimCluster
from infertop.demo.server import DemoAddresses, DemoServer, collected_page, layout_toml
from infertop.layouts import parse_layout
from infertop.monitor.monitor import Monitor
from infertop.monitor.snapshot import Snapshot, snapshot_json

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "snapshot_bytes"
RECORD = os.environ.get("INFERTOP_RECORD_SNAPSHOT_BYTES") == "1"
T0 = 1_800_000_000.0  # the demo started here; readings from T0 + 100 s on
NODES = 8  # 2 prefill (prefill-02 idle), 6 decode (ports down, collapsing acceptance, a straggler …)
READINGS = 4  # within the 10 s window: every rate, percentile and roll-up has two readings or more
# one port per page kind: the URL says which page, the path which node (nothing listens)
PORTS = {"engine": 18000, "dcgm": 19400, "node": 19100}


def _page(server: DemoServer, url: str, now: float) -> str:
    parts = urlsplit(url)
    kind = next(k for k, port in PORTS.items() if port == parts.port)
    node = server.cluster.nodes[parts.path.split("/")[1]]
    collect = parse_qs(parts.query).get("collect[]")
    render = server.endpoints[kind]
    return collected_page(render)(node, now, collect) if collect else render(node, now)


def _sample(server: DemoServer, node: str, endpoints: list[Endpoint], now: float) -> NodeSample:
    """What the scrape source makes of the node's pages read at `now` (ScrapeSource._read
    and read_node, every latency bucket read, every page read whole)."""
    engine = None
    gpus: list[GpuSample] = []
    nics: list[NicSample] = []
    for endpoint in endpoints:
        text = _page(server, endpoint.url, now)
        if endpoint.profile is not None:
            index = parse_exposition(text, endpoint.url, wanted=endpoint.profile.wanted)
            engine = engine_sample_from_exposition(index, endpoint.profile, where=endpoint.url)
            continue
        parts = parts_from_exporter(parse_exposition(text, endpoint.url, wanted=EXPORTER_WANTED),
                                    endpoint.keep_nics)
        gpus += cast(list[GpuSample], parts.get("gpus") or [])
        nics += cast(list[NicSample], parts.get("nics") or [])
    return NodeSample(node=node, source="scrape", taken_at=now, engine=engine, gpus=gpus, nics=nics)


def demo_snapshot() -> Snapshot:
    server = DemoServer(NODES, seed=7)  # not started: its pages are drawn here, in-process
    server.cluster = SimCluster(NODES, started_at=T0, seed=7)
    server.addresses = DemoAddresses("demo.invalid", dict(PORTS))
    start = T0 + 100.0
    # targets, so that the SLO shares and goodput (made of the window's buckets) are in it
    layout = parse_layout(layout_toml(server, now=start) + "\n[slo]\nttft_p99_s = 0.5\nitl_p99_s = 0.0235\n")
    targets = scrape_targets(layout)
    monitor = Monitor(layout, sources=[], clock=lambda: start)
    snapshot = None
    for i in range(READINGS):
        now = start + i
        for node, endpoints in targets.items():
            monitor.fleet.ingest(_sample(server, node, endpoints, now))
        snapshot = monitor.tick(now + 0.5)
    assert snapshot is not None and snapshot.monitor is not None
    # the monitor's own CPU is this test process's, measured: the one figure not recorded
    return snapshot.model_copy(update={"monitor": snapshot.monitor.model_copy(update={"cpu_pct": None})})


def _forms(snapshot: Snapshot) -> dict[str, bytes]:
    # as `infertop snapshot` prints it, and as the record and the channel carry it
    cli = json.dumps(snapshot.to_json_dict(), indent=2, allow_nan=False).encode()
    return {"cli.json.gz": cli, "compact.json.gz": snapshot_json(snapshot)}


def test_the_demo_snapshot_json_is_byte_for_byte_as_recorded() -> None:
    forms = _forms(demo_snapshot())
    if RECORD:
        FIXTURES.mkdir(parents=True, exist_ok=True)
        for name, data in forms.items():
            (FIXTURES / name).write_bytes(gzip.compress(data, mtime=0))
    for name, data in forms.items():
        recorded = gzip.decompress((FIXTURES / name).read_bytes())
        assert data == recorded, f"{name}: the snapshot's JSON changed (see this module's docstring)"


def test_the_recorded_snapshot_carries_every_latency_view() -> None:
    # guards the comparison above: the picture holds the figures a model refactor moves
    # (latency percentiles on nodes, ranks and pools; the P→D path's transfer times)
    data = json.loads(gzip.decompress((FIXTURES / "cli.json.gz").read_bytes()))
    engines = [n["engine"] for n in data["nodes"] if n["role"] == "decode"]
    assert len(engines) == 6 and all(e["itl_p99_s"] is not None and e["e2e_p50_s"] is not None for e in engines)
    assert all(e["slo_itl_attainment"] is not None and e["latency_bounds_s"] for e in engines)
    assert all(r["itl_p99_s"] is not None for e in engines for r in e["ranks"])
    decode = data["cluster"]["roles"]["decode"]
    assert decode["itl_p99_s"] is not None and decode["queue_p99_s"] is not None
    assert decode["slo_itl_attainment"] is not None
    assert data["cluster"]["total"]["latency_requests"]
    assert data["pd_paths"] and data["pd_paths"][0]["kv_transfer_p99_s"] is not None
    # the two forms differ (defaults left out of one): each is checked, not one twice
    assert gzip.decompress((FIXTURES / "compact.json.gz").read_bytes()) != json.dumps(data).encode()
