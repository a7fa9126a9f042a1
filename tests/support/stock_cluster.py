"""A cluster of healthy nodes read through stock exporters: every node's dcgm-exporter
page is what dcgm-exporter 4.5.3-4.8.2 serves with its default counters (re-created from
upstream by tests/support/upstream_pages.py, its `Hostname` the node's), next to node_exporter
1.12.1's page; real HTTP on loopback (one server, a path per page), and the layout that
reads them. A node may be given a counters CSV with fewer lines than its peers'."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from prometheus_client import CONTENT_TYPE_LATEST

from tests.support.upstream_pages import UPSTREAM, dcgm_page, load_truth, page_files

DCGM_STOCK = "dcgm-default-4.5.3-4.8.2"
NODE_EXPORTER = "node-exporter-1.12.1"
# what the stock counters leave out, and the fix the cluster's note must name
STOCK_MISSING = (
    "DCGM_FI_DEV_CLOCKS_EVENT_REASONS",
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
    "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
)
TRIMMED_FIELD = "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL"  # the line the odd node's CSV lacks


def node_names(count: int) -> list[str]:
    return [f"decode-{i:02d}" for i in range(1, count + 1)]


def stock_dcgm_page(hostname: str, csv_path: Path | None = None) -> str:
    """The fixture's GPUs, healthy: the fixture's GPU 1 last saw XID 79 (fallen off the bus)."""
    truth = load_truth(DCGM_STOCK)
    gpus = [{**gpu, "xid_last": 0} for gpu in truth["gpus"]]
    return dcgm_page({**truth, "hostname": hostname, "gpus": gpus}, csv_path or UPSTREAM / truth["counters_csv"])


def trimmed_csv(tmp: Path) -> Path:
    """The stock counters CSV without `TRIMMED_FIELD`: a node that sees less than its peers."""
    stock = UPSTREAM / load_truth(DCGM_STOCK)["counters_csv"]
    lines = [ln for ln in stock.read_text(encoding="utf-8").splitlines() if not ln.startswith(TRIMMED_FIELD)]
    path = tmp / "trimmed-counters.csv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def cluster_pages(names: list[str], fewer: Mapping[str, Path] | None = None) -> dict[str, str]:
    """Path → page text: `/<node>/dcgm` and `/<node>/node` for each node; `fewer` gives
    some nodes a counters CSV of their own."""
    node_page = page_files(NODE_EXPORTER)[0].read_text(encoding="utf-8")
    pages = {}
    for name in names:
        pages[f"/{name}/dcgm"] = stock_dcgm_page(name, (fewer or {}).get(name))
        pages[f"/{name}/node"] = node_page
    return pages


@contextmanager
def serve_pages(pages: Mapping[str, str]) -> Iterator[str]:
    """Serve `pages` over HTTP on a loopback port from the kernel; yields the base URL."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as exporters serve

        def do_GET(self) -> None:
            text = pages.get(self.path)
            if text is None:
                self.send_error(404)
                return
            body = text.encode()
            self.send_response(200)
            self.send_header("Content-Type", CONTENT_TYPE_LATEST)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass  # quiet: the tests read the monitor, not the access log

    class Server(ThreadingHTTPServer):
        request_queue_size = 256  # every node's pages at once: the default 5 drops connections

    server = Server(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def layout_toml(base_url: str, names: list[str], *, interval_s: float = 1.0, hold_s: float = 1.0) -> str:
    """Every node: 2 GPUs, its two active InfiniBand ports, read from its two pages."""
    nodes = "".join(f"""
[[nodes]]
name = "{name}"
role = "decode"
gpus = 2
metrics = ["{base_url}/{name}/dcgm", "{base_url}/{name}/node"]
nics = [{{ name = "mlx5_0" }}, {{ name = "mlx5_1" }}]
""" for name in names)
    return f"""
[cluster]
name = "stock-counters"
interval_s = {interval_s}

[thresholds]
hold_s = {hold_s}
clear_s = {hold_s}
{nodes}"""
