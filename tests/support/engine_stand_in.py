"""A stand-in for the real vLLM in `make demo-real` (`scripts/demo_real.py --stand-in`):
one process of its own (its own session, as vLLM's server is) that serves a vLLM page
whose counters grow at a steady rate, answers /health, and writes vLLM's stats line to its
log every second. For what the script starts and stops — not for vLLM's figures (the real
engine's tests read those): it lets the demo's clean-up be tested where vLLM cannot run.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

from tests.support.paths import REPO
from tests.support.waiting import until

TOKENS_PER_S = 360.0  # the tiny model's rate on a CPU, near enough

STAND_IN = r"""
import http.server, sys, threading, time
log_path, port_file, rate = sys.argv[1], sys.argv[2], float(sys.argv[3])
born = time.time()

def page():
    tokens = rate * (time.time() - born)
    return (
        "# TYPE vllm:generation_tokens counter\n"
        f'vllm:generation_tokens_total{{model_name="tiny",engine="0"}} {tokens}\n'
        f'vllm:generation_tokens_created{{model_name="tiny",engine="0"}} {born}\n'
        "# TYPE vllm:prompt_tokens counter\n"
        f'vllm:prompt_tokens_total{{model_name="tiny",engine="0"}} {tokens / 2}\n'
        "# TYPE vllm:num_requests_running gauge\n"
        'vllm:num_requests_running{model_name="tiny",engine="0"} 4\n'
    ).encode()

class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = page() if self.path.startswith("/metrics") else b"ok"
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass

server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
with open(port_file + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
import os
os.replace(port_file + ".tmp", port_file)
threading.Thread(target=server.serve_forever, daemon=True).start()
while True:
    stamp = time.strftime("%m-%d %H:%M:%S")
    with open(log_path, "a") as f:
        f.write(f"INFO {stamp} [loggers.py:123] Engine 000: Avg prompt throughput: {rate / 2:.1f} tokens/s, "
                f"Avg generation throughput: {rate:.1f} tokens/s, Running: 4 reqs, Waiting: 0 reqs, "
                "GPU KV cache usage: 1.0%, Prefix cache hit rate: 0.0%\n")
    time.sleep(1.0)  # the engine's stats cadence being imitated, in its own process
"""


class StandInEngine:
    """What `scripts/demo_real.py` asks of its engine (`RealVllmServer`'s: start, wait_ready,
    base_url, log_path, name, stop), with none of vLLM."""

    def __init__(self, work: Path, name: str = "tiny") -> None:
        self.name = name
        self.log_path = work / "vllm.log"
        self.port_file = work / "stand-in.port"
        self.base_url = ""
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> StandInEngine:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", STAND_IN, str(self.log_path), str(self.port_file), str(TOKENS_PER_S)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True, cwd=REPO,
        )
        return self

    def wait_ready(self, timeout_s: float = 60.0) -> None:
        proc = self.proc
        assert proc is not None
        until(self.port_file.exists, timeout_s, "the stand-in engine's port", every_s=0.1,
              gave_up=lambda: proc.poll() is not None)
        self.base_url = f"http://127.0.0.1:{int(self.port_file.read_text())}"

        def healthy() -> bool:
            with urllib.request.urlopen(self.base_url + "/health", timeout=5) as response:
                return bool(response.status == 200)

        until(healthy, timeout_s, "the stand-in engine's /health", every_s=0.1, ignore=(OSError,))

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
