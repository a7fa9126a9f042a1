"""A real HTTP server of hostile metrics pages (engine, dcgm-exporter, node_exporter).

It runs its own event loop in a thread, so the same server serves an in-process monitor
(whose loop is the test's) and a `python -m infertop snapshot` subprocess alike. Each page
is a function of how many times it was asked for and of the time since it was first asked
for: the n-th scrape of `/engine/metrics`, t seconds after the first, gets
`pages["engine"](n, t)`, so a counter can be made to jump, reset or overflow on cue.
"""

from __future__ import annotations

import asyncio
import json
import math
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from aiohttp import web

from infertop.layouts import parse_layout
from infertop.monitor.snapshot import Snapshot
from infertop.monitor.take_snapshot import take_snapshot

Page = Callable[[int, float], str]  # (scrape number 0, 1, …; seconds since the first) → text


class HostileServer:
    def __init__(self, pages: Mapping[str, Page]) -> None:
        self.pages = dict(pages)
        self.hits: dict[str, int] = {}
        self.first_at: dict[str, float] = {}
        self.base = ""
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._runner: web.AppRunner | None = None

    def url(self, name: str) -> str:
        return f"{self.base}/{name}/metrics"

    async def _page(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name not in self.pages:
            return web.Response(status=404)
        n = self.hits.get(name, 0)
        self.hits[name] = n + 1
        t = time.monotonic() - self.first_at.setdefault(name, time.monotonic())
        return web.Response(text=self.pages[name](n, t), content_type="text/plain")

    async def _start(self) -> str:
        app = web.Application()
        app.router.add_get("/{name}/metrics", self._page)
        self._runner = web.AppRunner(app, shutdown_timeout=0.1)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        return f"http://127.0.0.1:{self._runner.addresses[0][1]}"

    def start(self) -> None:
        self._thread.start()
        self.base = asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(10)

    def stop(self) -> None:
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()


@contextmanager
def serving(pages: Mapping[str, Page]) -> Iterator[HostileServer]:
    server = HostileServer(pages)
    server.start()
    try:
        yield server
    finally:
        server.stop()


# ---------------------------------------------------------------------------- pages


def vllm_page(
    generation: float | str = 1000.0, *, running: float | str = 3, waiting: float | str = 1,
    kv: float | str = 0.5, steps: float | str = 100.0, engines: int = 1, extra: str = "",
) -> str:
    """A vLLM V1 engine page; with `engines` > 1 every DP engine reports the same values
    (an `engine` label apart), as vLLM does for each data-parallel rank."""
    lines = [
        "# TYPE vllm:generation_tokens_total counter",
        "# TYPE vllm:iteration_tokens_total histogram",
        "# TYPE vllm:num_requests_running gauge",
        "# TYPE vllm:num_requests_waiting gauge",
        "# TYPE vllm:kv_cache_usage_perc gauge",
    ]
    for e in range(engines):
        label = f'{{engine="{e}"}}'
        lines += [
            f"vllm:generation_tokens_total{label} {generation}",
            f"vllm:iteration_tokens_total_count{label} {steps}",
            f"vllm:num_requests_running{label} {running}",
            f"vllm:num_requests_waiting{label} {waiting}",
            f"vllm:kv_cache_usage_perc{label} {kv}",
        ]
    return "\n".join(lines) + "\n" + extra


def dcgm_page(
    *, power: float | str = 500.0, temp: float | str = 60, util: float | str = 90,
    fb_used: float | str = 70_000, fb_free: float | str = 70_000, sm_clock: float | str = 1980,
) -> str:
    """A dcgm-exporter page with one GPU."""
    labels = '{gpu="0",UUID="GPU-0",modelName="NVIDIA H200",Hostname="n1"}'
    return "\n".join([
        f"DCGM_FI_DEV_POWER_USAGE{labels} {power}",
        f"DCGM_FI_DEV_GPU_TEMP{labels} {temp}",
        f"DCGM_FI_DEV_GPU_UTIL{labels} {util}",
        f"DCGM_FI_DEV_FB_USED{labels} {fb_used}",
        f"DCGM_FI_DEV_FB_FREE{labels} {fb_free}",
        f"DCGM_FI_DEV_SM_CLOCK{labels} {sm_clock}",
    ]) + "\n"


def ib_page(*, rx: float | str = 1e12, tx: float | str = 1e12, rate: float | str = 5e10) -> str:
    """A node_exporter page with one InfiniBand port, mlx5_0 (rate in bytes/s)."""
    port = '{device="mlx5_0",port="1"}'
    return "\n".join([
        "# TYPE node_infiniband_port_data_received_bytes_total counter",
        "# TYPE node_infiniband_port_data_transmitted_bytes_total counter",
        f"node_infiniband_state_id{port} 4",
        f"node_infiniband_rate_bytes_per_second{port} {rate}",
        f"node_infiniband_port_data_received_bytes_total{port} {rx}",
        f"node_infiniband_port_data_transmitted_bytes_total{port} {tx}",
    ]) + "\n"


def growing(
    per_scrape: float, then: float | None = None, after_s: float = 1.0
) -> Callable[[int, float], float]:
    """A counter rising by `per_scrape` each scrape; from `after_s` seconds after the first
    scrape on, `then` instead (a jump that stays) when given. By time, not by count: the
    jump must land inside the window a snapshot looks at however slow the machine is."""
    def value(n: int, t: float) -> float:
        return then if then is not None and t >= after_s else 1000.0 + per_scrape * n
    return value


# ---------------------------------------------------------------------------- one node, read for real

INTERVAL_S = 0.25
WINDOW_S = 2.0
# what each page of the node serves unless a test says otherwise: an honest node
NORMAL: dict[str, Page] = {
    "engine": lambda n, t: vllm_page(growing(100.0)(n, t), steps=100.0 + 10 * n),
    "dcgm": lambda n, t: dcgm_page(),
    "ib": lambda n, t: ib_page(rx=1e12 + 1e9 * n, tx=1e12 + 1e9 * n),
}


def layout_text(server: HostileServer, pricing: str = "") -> str:
    """One node, n1, whose engine, dcgm-exporter and node_exporter pages `server` serves."""
    return f"""
[cluster]
name = "hostile"
interval_s = {INTERVAL_S}
window_s = {WINDOW_S}
{pricing}
[[nodes]]
name = "n1"
gpus = 1
engine = {{ url = "{server.url('engine')}", profile = "vllm" }}
metrics = ["{server.url('dcgm')}", "{server.url('ib')}"]
"""


def strict_json(text: str) -> Any:
    """json.loads that refuses NaN / Infinity / -Infinity (not JSON, whatever Python says)."""
    def refuse(constant: str) -> None:
        raise ValueError(f"not JSON: {constant}")
    return json.loads(text, parse_constant=refuse)


def finite_or_null(value: object) -> bool:
    return value is None or (isinstance(value, int | float) and math.isfinite(value))


async def snapshot_of(pages: Mapping[str, Page], pricing: str = "") -> Snapshot:
    """`infertop snapshot` in process (the real scrape source and monitor) of node n1
    serving `pages` (the others honest)."""
    with serving({**NORMAL, **pages}) as server:
        return await take_snapshot(parse_layout(layout_text(server, pricing), "hostile.toml"))


def figure(node: Mapping[str, Any], where: str, field: str) -> Any:
    """A figure of the node in snapshot JSON: of its engine, its GPU 0 or its port mlx5_0."""
    if where == "engine":
        return node["engine"][field]
    if where == "gpu":
        return node["gpus"][0][field]
    return next(n for n in node["nics"] if n["name"] == "mlx5_0")[field]


FINITE = "finite"  # expected: known or not, but never NaN / infinite


async def check_figure(
    pages: Mapping[str, Page], where: tuple[str, str], expect: object, note: str | None
) -> None:
    """Snapshot node n1 serving `pages`: the figure is `expect` (None: unknown), a node note
    holds `note`, the JSON is strict and the session's money and tokens stay sane."""
    snapshot = await snapshot_of(pages)
    data = strict_json(json.dumps(snapshot.to_json_dict(), allow_nan=False))
    [node] = data["nodes"]
    assert node["status"] == "ok", node["error"]
    got = figure(node, *where)
    if expect == FINITE:
        assert finite_or_null(got), got
    else:
        assert got == expect
    if note is not None:
        assert any(note in n for n in node["notes"]), node["notes"]
    session = data["session"]
    for key in ("accepted_tokens", "api_equivalent_usd", "accepted_tokens_per_s", "spend_usd"):
        assert finite_or_null(session[key]), (key, session[key])
    # the ledger counts no step an engine could not make: ~100 tokens a scrape here
    assert (session["accepted_tokens"] or 0) < 1e5
