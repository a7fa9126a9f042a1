"""A Prometheus HTTP API (`/api/v1/query`, `/api/v1/label/__name__/values`) answering from
recorded answers (`record.py`), for a fleet of any size made by relabelling the recorded
nodes: node i is recorded node `i % R` (R recorded), named `<recorded name>-r<i // R>`.

Scrape k (every `interval_s` of wall time, all nodes at once) answers the recorded round
`k % rounds`; a series that only grew over the recorded rounds (a counter) is carried on
by its recorded growth each cycle, so rates stay as recorded and no counter resets; a
`timestamp` series says k × interval. Queries never recorded answer an empty vector and
are counted (`/replay/misses`). Answers are built from pre-split JSON text, each scrape's
once, so the server's own cost stays small beside the client's.

    python -m benchmarks.prom_replay.server NODES PORT [ANSWERS]
"""

from __future__ import annotations

import gzip
import itertools
import json
import math
import re
import sys
import threading
import urllib.parse
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from benchmarks.prom_replay.record import DEFAULT_OUT

NODE = "infertop_node"
# a recorded series narrowed to some nodes (the prom source's detail plan,
# collectors/sources/promql.py `recorded_for_nodes`): answered from the whole series' recording
_NARROWED = re.compile(r'^(?P<base>[a-zA-Z_:][a-zA-Z0-9_:]*)\{infertop_node=~"\(\?:(?P<alts>.*)\)"\}$')
# … a raw query's answer narrowed by a recorded series (`answer_for_nodes`)
_ANSWER_NARROWED = re.compile(
    r'^\((?P<base>.*)\) and on \(infertop_node\) [a-zA-Z_:]+\{infertop_node=~"\(\?:(?P<alts>.*)\)"\}$')
# … and a raw query narrowed on the node label itself (`raw_for_nodes`), the matcher in
# every selector of it
_RAW_NARROWED = re.compile(r'[a-zA-Z_]+=~"\(\?:(?P<alts>[^"]*)\)(?:\(\?::\[0-9\]\+\)\?)?"')
SENTINEL = "\x00node\x00"
SENTINEL_JSON = json.dumps(SENTINEL)[1:-1]  # as it reads inside JSON text


def synthetic_names(templates: Sequence[str], nodes: int) -> list[tuple[str, str]]:
    """(template, name) of each synthetic node, in order."""
    return [(templates[i % len(templates)], f"{templates[i % len(templates)]}-r{i // len(templates):04d}")
            for i in range(nodes)]


def _relabel(metric: dict[str, str], template: str) -> str:
    """The series' labels as JSON with every mention of the template node as SENTINEL."""
    out = {}
    for k, v in metric.items():
        if v == template:
            v = SENTINEL
        elif v.startswith(template + ":"):
            v = SENTINEL + v[len(template):]
        out[k] = v
    return json.dumps(out, separators=(",", ":"))


class Query:
    """One recorded query: its series per template node, with their values per round."""

    def __init__(self, rounds: list[Any], templates: Sequence[str], is_stamp: bool):
        self.is_stamp = is_stamp
        self.result_type = "vector"
        self.rounds = len(rounds)
        # template → [(label JSON split at the node's name, values per round)]
        by_series: dict[tuple[str, str], list[float | None]] = {}
        for r, answer in enumerate(rounds):
            data = answer["data"]
            self.result_type = data.get("resultType", "vector")
            for series in data.get("result", []):
                metric = series.get("metric", {})
                template = metric.get(NODE)
                if template is None:
                    template = next((t for t in templates if t in metric.values()), "")
                key = (template, _relabel(metric, template) if template else json.dumps(metric))
                values = by_series.setdefault(key, [None] * len(rounds))
                values[r] = float(series["value"][1])
        self.series: dict[str, list[tuple[list[str], list[float | None], float]]] = {}
        for (template, labels), values in by_series.items():
            known = [v for v in values if v is not None]
            grows = (len(known) == len(values) and len(values) > 1 and known[-1] > known[0]
                     and all(b >= a for a, b in itertools.pairwise(known)))
            # carried on each cycle by the recorded growth plus one round's worth
            carry = (known[-1] - known[0]) * len(values) / (len(values) - 1) if grows else 0.0
            self.series.setdefault(template, []).append((labels.split(SENTINEL_JSON), values, carry))

    def body(self, names: Sequence[tuple[str, str]], k: int, at: float, interval_s: float) -> bytes:
        r, cycle = k % self.rounds, k // self.rounds
        at_text = f"{at:.3f}"
        parts: list[str] = []
        for template, name in names:
            for pieces, values, carry in self.series.get(template, ()):
                value = values[r]
                if value is None:
                    continue
                if self.is_stamp:
                    value = k * interval_s
                elif carry:
                    value += cycle * carry
                parts.append(f'{{"metric":{name.join(pieces)},"value":[{at_text},"{value!r}"]}}')
        for pieces, values, _ in self.series.get("", ()):  # series of no node: once
            if values[r] is not None:
                parts.append(f'{{"metric":{"".join(pieces)},"value":[{at_text},"{values[r]!r}"]}}')
        head = f'{{"status":"success","data":{{"resultType":"{self.result_type}","result":['
        return (head + ",".join(parts) + "]}}").encode()


class Replay:
    def __init__(self, nodes: int, path: Path = DEFAULT_OUT):
        with gzip.open(path, "rt", encoding="utf-8") as f:
            doc = json.load(f)
        self.interval_s: float = doc["interval_s"]
        self.layout_text: str = doc["layout"]
        answers: dict[str, list[Any]] = doc["answers"]
        stamps = answers.get("/api/v1/query?infertop_node:engine_timestamp") or next(
            v for k, v in answers.items() if "timestamp(" in k)
        self.templates = sorted({s["metric"][NODE] for s in stamps[0]["data"]["result"]})
        self.names = synthetic_names(self.templates, nodes)
        self.label_values = answers.get("/api/v1/label/__name__/values", [{"data": []}])[0]["data"]
        self.queries: dict[str, Query] = {}
        self._raw = answers
        self._lock = threading.Lock()
        self._cache: dict[tuple[str, int], bytes] = {}
        self.misses: dict[str, int] = {}
        self.served = 0

    def query(self, text: str, at: float) -> bytes:
        k = math.floor(at / self.interval_s)
        names = self.names
        base = text
        narrowed = _NARROWED.match(text) or _ANSWER_NARROWED.match(text) or _RAW_NARROWED.search(text)
        if narrowed is not None:
            if narrowed.re is not _RAW_NARROWED:
                base = narrowed["base"]
            else:
                m = narrowed.group(0)
                base = text.replace(", " + m, "").replace("{" + m + "}", "").replace(m + ", ", "")
            # the PromQL string's escapes, then the regex's (names hold no regex syntax)
            wanted = {re.sub(r"\\(.)", r"\1", alt.replace("\\\\", "\\"))
                      for alt in narrowed["alts"].split("|")}
            names = [(t, n) for t, n in self.names if n in wanted]
        with self._lock:
            cached = self._cache.get((text, k))
            if cached is not None:
                return cached
            q = self.queries.get(base)
            if q is None:
                rounds = self._raw.get(f"/api/v1/query?{base}")
                if rounds is None:
                    self.misses[base] = self.misses.get(base, 0) + 1
                    return b'{"status":"success","data":{"resultType":"vector","result":[]}}'
                q = self.queries[base] = Query(rounds, self.templates, "timestamp" in base)
            body = q.body(names, k, at, self.interval_s)
            if len(self._cache) > 4096:
                self._cache.clear()
            self._cache[(text, k)] = body
            self.served += len(body)
            return body


def serve(replay: Replay, port: int) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _answer(self, params: dict[str, list[str]]) -> None:
            path = urllib.parse.urlsplit(self.path).path
            if path == "/api/v1/query":
                at = float(params.get("time", ["0"])[0] or 0)
                body = replay.query(params.get("query", [""])[0], at)
            elif path == "/api/v1/label/__name__/values":
                body = json.dumps({"status": "success", "data": replay.label_values}).encode()
            elif path == "/replay/misses":
                body = json.dumps({"misses": replay.misses, "served_bytes": replay.served}).encode()
            else:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            self._answer(urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query))

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            form = urllib.parse.parse_qs(self.rfile.read(length).decode())
            form.update(urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query))
            self._answer(form)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    return server


def main() -> int:
    nodes, port = int(sys.argv[1]), int(sys.argv[2])
    replay = Replay(nodes, Path(sys.argv[3]) if len(sys.argv) > 3 else DEFAULT_OUT)
    server = serve(replay, port)
    print("ready", flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
