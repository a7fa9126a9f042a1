"""A bounded load for a real vLLM's OpenAI server, counting what it got back, and a relay
that records every /metrics page the monitor reads (the truth its figures are checked
against is computed from these very pages)."""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

REQUEST_TIMEOUT_S = 300.0

# prompts that repeat phrases, so n-gram (prompt lookup) drafting finds matches
PROMPTS = [
    "the engine decodes tokens the engine decodes tokens while the cluster waits",
    "every node reports its queue its cache and its power every node reports its queue",
    "a draft of the next step a draft of the next step and the monitor reads them",
    "the monitor that reads them the monitor that reads them reports its power",
]


@dataclass
class LoadCounts:
    requests: int = 0
    completion_tokens: int = 0
    prompt_tokens: int = 0
    errors: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


class Load:
    """`workers` closed-loop clients, each sending completions until `stop` is set or
    `max_requests` went out in all (None: until `stop`); `first_done` is set when the
    first one came back."""

    def __init__(self, base_url: str, model: str, workers: int = 8, max_tokens: int = 48,
                 max_requests: int | None = None) -> None:
        self.url = base_url + "/v1/completions"
        self.model = model
        self.max_tokens = max_tokens
        self.max_requests = max_requests
        self.workers = workers
        self.counts = LoadCounts()
        self.stop = threading.Event()
        self.first_done = threading.Event()
        self._sent = 0
        self._threads = [threading.Thread(target=self._worker, args=(i,), daemon=True) for i in range(workers)]

    def start(self) -> Load:
        for t in self._threads:
            t.start()
        return self

    def running(self) -> bool:
        """Every client still sending: the load has not ended (nor lost a client)."""
        return not self.stop.is_set() and all(t.is_alive() for t in self._threads)

    def finish(self) -> LoadCounts:
        self.stop.set()
        for t in self._threads:
            t.join(REQUEST_TIMEOUT_S)
        return self.counts

    def _take(self) -> bool:
        with self.counts.lock:
            if self.stop.is_set() or (self.max_requests is not None and self._sent >= self.max_requests):
                return False
            self._sent += 1
            return True

    def _worker(self, index: int) -> None:
        n = 0
        while self._take():
            body = {
                "model": self.model, "prompt": PROMPTS[(index + n) % len(PROMPTS)],
                "max_tokens": self.max_tokens, "temperature": 0.0, "ignore_eos": True,
            }
            n += 1
            request = urllib.request.Request(
                self.url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
            )
            try:
                with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT_S) as response:
                    usage = json.load(response)["usage"]
            except (OSError, ValueError, KeyError) as exc:
                with self.counts.lock:
                    self.counts.errors.append(repr(exc)[:200])
                continue
            with self.counts.lock:
                self.counts.requests += 1
                self.counts.completion_tokens += int(usage["completion_tokens"])
                self.counts.prompt_tokens += int(usage["prompt_tokens"])
            self.first_done.set()


@dataclass
class Page:
    read_at: float  # unix s, when the relay had the answer
    text: str
    asked_at: float | None = None  # unix s, when the relay was asked for it

    @property
    def served_at(self) -> float:
        """When the engine drew the page, as near as the relay knows: the midpoint of its
        fetch (the monitor stamps its readings the same way, collectors.sources.scrape.fetch)."""
        return self.read_at if self.asked_at is None else (self.asked_at + self.read_at) / 2

    def distance(self, at: float) -> float:
        """How far `at` lies from the time the relay spent on this page (0: within)."""
        asked = self.read_at if self.asked_at is None else self.asked_at
        return max(asked - at, at - self.read_at, 0.0)


class MetricsRelay:
    """Forwards GET /metrics to the engine and keeps each page it passed on."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.pages: list[Page] = []
        self.lock = threading.Lock()
        relay = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                asked_at = time.time()
                with urllib.request.urlopen(relay.upstream + "/metrics", timeout=30) as response:
                    body = response.read()
                with relay.lock:
                    relay.pages.append(Page(time.time(), body.decode("utf-8", "replace"), asked_at))
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/metrics"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> MetricsRelay:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
