"""The prom source never sends its credentials where a redirect points (issue 19, security 3).

Two real HTTP servers on loopback (a different port is a different origin): the first,
playing Prometheus, redirects every query to the second, which answers like Prometheus
and records every header it receives. requests strips only `Authorization` on a
cross-host redirect; a custom header such as `X-Api-Key` would follow. The source
refuses redirects instead, and says so.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from infertop.collectors.sample import NodeSample
from infertop.collectors.sources.prom import PromSource
from infertop.layouts.model import PrometheusConfig
from tests.support.hostile_http import HttpServer, Reply

SECRET = "s3cret-api-key-0123456789"
EMPTY_VECTOR = json.dumps({"status": "success", "data": {"resultType": "vector", "result": []}})
EMPTY_MATRIX = json.dumps({"status": "success", "data": {"resultType": "matrix", "result": []}})


@pytest.fixture
def servers() -> Iterator[tuple[HttpServer, HttpServer]]:
    """(redirector, collector): the collector answers like an empty Prometheus."""
    json_reply = "application/json"
    collector = HttpServer({
        "/api/v1/query": Reply(body=EMPTY_VECTOR, content_type=json_reply),
        "/api/v1/query_range": Reply(body=EMPTY_MATRIX, content_type=json_reply),
    })
    redirector = HttpServer({})
    with collector, redirector:
        yield redirector, collector


def redirect_all(redirector: HttpServer, collector: HttpServer, status: int) -> None:
    for path in ("/api/v1/query", "/api/v1/query_range"):
        redirector.routes[path] = Reply(status=status, headers={"Location": collector.url(path)})


def secret_config(redirector: HttpServer, header: str, monkeypatch: pytest.MonkeyPatch) -> PrometheusConfig:
    monkeypatch.setenv("PROM_SECRET", SECRET)
    url = redirector.url("")
    if header == "Authorization":
        return PrometheusConfig(url=url, token_env="PROM_SECRET", backfill_s=60)
    return PrometheusConfig(url=url, header_env="PROM_SECRET", header_name=header, backfill_s=60)


@pytest.mark.hostile
@pytest.mark.parametrize(
    ("header", "status"),
    [("X-Api-Key", 302), ("X-Api-Key", 301), ("X-Api-Key", 307), ("X-Api-Key", 308),
     ("Authorization", 302)],
)
async def test_a_redirect_to_another_origin_never_receives_the_secret_header(
    servers: tuple[HttpServer, HttpServer], monkeypatch: pytest.MonkeyPatch, header: str, status: int
) -> None:
    redirector, collector = servers
    redirect_all(redirector, collector, status)
    source = PromSource(secret_config(redirector, header, monkeypatch), ["decode-01"], 1.0)
    emitted: list[NodeSample] = []
    try:
        await source.backfill(emitted.append)  # range queries
        samples = await source.poll()  # instant queries
    finally:
        await source.close()
    assert redirector.heard, "the source never asked"
    assert all(h.headers.get(header, "").endswith(SECRET) for h in redirector.heard)
    leaked = [h for h in collector.heard if any(SECRET in v for v in h.headers.values())]
    assert leaked == []
    assert collector.heard == []  # redirects are refused outright
    # said once, on the backend (its node is unknown while it is down), never a node's error
    assert samples == []
    [backend] = source.backend_states()
    assert backend.error is not None and backend.nodes == {"decode-01"}
    assert f"redirect (HTTP {status})" in backend.error and "refused" in backend.error
    assert SECRET not in backend.error
