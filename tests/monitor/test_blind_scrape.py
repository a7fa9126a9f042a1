"""A node's node_exporter page dies while its engine and dcgm-exporter pages answer: real
HTTP servers on loopback, the real scrape source and monitor. The node stays `ok` (it is
answering) but turns `blind`, with the failed page as the reason, within the hold time;
the page comes back and the verdict clears. Everything that reads a snapshot sees it:
the JSON, the text snapshot, the exporter and the record."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from aiohttp import web
from prometheus_client import CollectorRegistry, generate_latest

from infertop.collectors.sources.scrape import Endpoint, ScrapeSource, usual_kind
from infertop.layouts import parse_layout
from infertop.monitor.exporter import SnapshotCollector
from infertop.monitor.monitor import Monitor
from infertop.monitor.record.codec import decode_snapshot, encode_snapshot
from infertop.monitor.snapshot import NodeView, Snapshot
from infertop.monitor.text_report import snapshot_table
from tests.support.waiting import until_async

FIXTURES = Path(__file__).parent.parent / "fixtures" / "exposition"
INTERVAL_S = 0.25
HOLD_S = 1.0
CLEAR_S = 1.0


class Page:
    """One page on its own loopback port, which can be stopped (connection refused) and
    started again on the same port."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.port = 0
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        async def metrics(_: web.Request) -> web.Response:
            return web.Response(text=self.text, content_type="text/plain")

        app = web.Application()
        app.router.add_get("/metrics", metrics)
        self._runner = web.AppRunner(app, shutdown_timeout=0.1)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self.port, reuse_address=True)
        await site.start()
        self.port = self._runner.addresses[0][1]

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/metrics"


# what a deployment with the recommended counters serves beyond the fixtures: nothing the
# node is expected to have is unseen until a page dies
COMPLETE = {
    "dcgm": "# TYPE DCGM_FI_DEV_ECC_DBE_VOL_TOTAL counter\n" + "".join(
        f'DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{{gpu="{i}",UUID="GPU-{uuid}-0000-1111-2222-333344445555",'
        f'modelName="NVIDIA H200",Hostname="decode-01"}} 0\n'
        for i, uuid in enumerate(("1a2b3c4d", "5e6f7a8b"))
    ),
    "node_exporter": "# TYPE node_infiniband_port_errors_received_total counter\n" + "".join(
        f'node_infiniband_port_errors_received_total{{device="mlx5_{i}",port="1"}} 0\n' for i in range(2)
    ) + "# TYPE node_network_receive_errs_total counter\n" + "".join(
        f'node_network_receive_errs_total{{device="{dev}"}} 0\n'
        for dev in ("bond0", "bond0.100", "bond1", "eth0", "eth1", "eth2", "ib0", "lo")
    ),
}


@pytest.fixture
async def pages() -> AsyncIterator[dict[str, Page]]:
    served = {
        name: Page((FIXTURES / f"{name}.txt").read_text() + COMPLETE.get(name, ""))
        for name in ("vllm_v1", "dcgm", "node_exporter")
    }
    for page in served.values():
        await page.start()
    try:
        yield served
    finally:
        for page in served.values():
            await page.stop()


def layout_text(pages: dict[str, Page]) -> str:
    return f"""
[cluster]
name = "blind-loopback"
interval_s = {INTERVAL_S}
window_s = 1

[thresholds]
hold_s = {HOLD_S}
clear_s = {CLEAR_S}

[[nodes]]
name = "decode-01"
role = "decode"
gpus = 2
metrics = ["{pages['dcgm'].url}", "{pages['node_exporter'].url}"]
engine = {{ url = "{pages['vllm_v1'].url}", profile = "vllm" }}
nics = [{{ name = "mlx5_0" }}]
"""


def node(frame: Snapshot) -> NodeView:
    return frame.nodes[0]


async def watch(monitor: Monitor, until: Callable[[Snapshot], bool], timeout_s: float) -> tuple[Snapshot, float]:
    frames: list[Snapshot] = []

    def reached() -> bool:
        frames.append(monitor.tick())
        return until(frames[-1])

    await until_async(reached, timeout_s, "the frame", every_s=INTERVAL_S / 2,
                      detail=lambda: f"{node(frames[-1]).verdicts} {node(frames[-1]).coverage}")
    return frames[-1], time.time()


def blind(frame: Snapshot) -> list[tuple[str, str, str]]:
    return [(v.kind, v.detail, v.severity) for v in node(frame).verdicts if v.kind == "blind"]


def others(frame: Snapshot) -> list[str]:
    return [v.kind for v in node(frame).verdicts if v.kind != "blind"]


async def test_dead_node_exporter_page_is_blind_with_its_reason_then_clears(pages: dict[str, Page]) -> None:
    monitor = Monitor(parse_layout(layout_text(pages)))
    await monitor.start(tick=False)
    try:
        # the fixture pages hold trouble of their own (an XID, a thermal slowdown): let
        # those verdicts settle first, they stay what they are throughout
        frame, _ = await watch(monitor, lambda f: node(f).status == "ok" and node(f).engine is not None
                               and any(n.name == "mlx5_0" and n.state for n in node(f).nics)
                               and "gpu-error" in others(f), 10.0)
        settled = others(frame)
        assert node(frame).coverage == [] and blind(frame) == []
        assert frame.cluster.blind_nodes == 0

        node_url = pages["node_exporter"].url
        await pages["node_exporter"].stop()
        dead_at = time.time()
        frame, seen_at = await watch(monitor, lambda f: bool(blind(f)), 10.0)
        n = node(frame)
        reason = f"links unknown: node_exporter page failed (cannot connect to {node_url})"
        assert n.status == "ok"  # its other pages answer: not an error, a blind spot
        assert blind(frame) == [("blind", reason, "warning")]
        assert seen_at - dead_at >= HOLD_S
        assert [g.detail for g in n.coverage] == [reason]
        assert frame.cluster.blind_nodes == 1
        assert all(kind in others(frame) for kind in settled if kind != "link-starved")

        # every reader of the snapshot: JSON, text, exporter, record
        data = frame.to_json_dict()
        [json_node] = data["nodes"]  # type: ignore[index]
        assert {"kind": "blind", "detail": reason} in [
            {"kind": v["kind"], "detail": v["detail"]} for v in json_node["verdicts"]
        ]
        assert json_node["coverage"] == [{"kind": "ports", "detail": reason, "shared": False}]
        assert data["cluster"]["blind_nodes"] == 1  # type: ignore[index]
        text = snapshot_table(frame)
        assert "blind" in text.splitlines()[1] and f"unseen decode-01: {reason}" in text
        registry = CollectorRegistry()
        registry.register(SnapshotCollector(lambda: frame))
        exported = generate_latest(registry).decode()
        assert 'infertop_node_verdict{kind="blind",node="decode-01",severity="warning"} 1.0' in exported
        stored = decode_snapshot(encode_snapshot(frame)).nodes[0]
        assert [v.detail for v in stored.verdicts if v.kind == "blind"] == [reason]

        await pages["node_exporter"].start()  # the same port again
        assert pages["node_exporter"].url == node_url
        back_at = time.time()
        frame, cleared_at = await watch(monitor, lambda f: blind(f) == [], 10.0)
        assert cleared_at - back_at >= CLEAR_S
        assert node(frame).coverage == [] and frame.cluster.blind_nodes == 0
    finally:
        await monitor.stop()


async def test_page_outcomes_name_the_exporter_by_what_it_gave(pages: dict[str, Page]) -> None:
    node_page = pages["node_exporter"]
    secret_url = node_page.url.replace("http://", "http://admin:hunter22@") + "?token=s3cr3tvalue"
    source = ScrapeSource(
        {"n": [Endpoint(pages["dcgm"].url), Endpoint(secret_url)]}, interval_s=1.0
    )
    try:
        [first] = await source.poll()
        assert [(p.kind, p.ok, p.parts) for p in first.pages] == [
            ("dcgm-exporter", True, ("gpus",)), ("node_exporter", True, ("nics",))
        ]
        await node_page.stop()
        [second] = await source.poll()
    finally:
        await source.close()
    assert second.ok and second.nics is None
    failed = second.pages[1]
    # remembered from when it read right, not guessed
    assert (failed.kind, failed.ok, failed.parts) == ("node_exporter", False, ("nics",))
    assert failed.error is not None and failed.error.startswith("cannot connect to")
    for text in (failed.url, failed.error):
        assert "hunter22" not in text and "s3cr3tvalue" not in text


def test_a_page_never_read_is_named_by_its_usual_port() -> None:
    assert usual_kind("http://h:9100/metrics") == ("node_exporter", ("nics",))
    assert usual_kind("http://h:9400/metrics") == ("dcgm-exporter", ("gpus",))
    assert usual_kind("http://h:8082/metrics") == ("npu-exporter", ("gpus", "nics"))
    assert usual_kind("http://h:7777/metrics") == ("exporter", ())
    assert usual_kind("http://h/metrics") == ("exporter", ())
