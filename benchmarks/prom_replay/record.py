"""Record a real Prometheus's answers to the prom source's queries, once.

Starts `infertop demo --serve-only --via prometheus` (8 nodes, realistic pages: 8
data-parallel vLLM engines a node, dcgm-exporter's default counters, a host's
interfaces), the Debian Prometheus scraping it every 2 s with infertop's recording rules,
waits until the rules have recorded, then makes the prom source's rounds (its own client,
its own queries) every 2 s, both through the recorded series and raw, and writes every
answer: request path + query text → the JSON `data` of each round.

    python -m benchmarks.prom_replay.record [OUT]     # default: benchmarks/prom_replay/answers-8.json.gz
"""

from __future__ import annotations

import asyncio
import gzip
import json
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path
from typing import Any

from infertop.collectors.sources.prom import prom_source_for
from infertop.demo.backends import free_port, start_backend
from infertop.layouts.loader import load_layout

HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE / "answers-8.json.gz"
NODES = 8
ROUNDS = 6  # recorded rounds per mode: the replay cycles them, counters carried on
INTERVAL_S = 2.0


def _key(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    query = urllib.parse.parse_qs(parts.query).get("query", [""])[0]
    return f"{parts.path}?{query}" if query else parts.path


async def _rounds(layout_path: Path, rules: bool) -> dict[str, list[Any]]:
    layout = load_layout(layout_path)
    source = prom_source_for(layout)
    assert source is not None
    answers: dict[str, list[Any]] = {}
    client = source._connect()

    def hook(response: Any, *args: Any, **kwargs: Any) -> None:
        if response.status_code == 200:
            body = response.json()
            answers.setdefault(_key(response.request.url), []).append(
                {"at": time.time(), "data": body.get("data")})

    client._session.hooks["response"].append(hook)
    if not rules:
        source._recorded_at = time.time()  # never looks for the recorded series: raw
    for _ in range(ROUNDS):
        start = time.time()
        await source.poll()
        await asyncio.sleep(max(0.0, INTERVAL_S - (time.time() - start)))
    await source.close()
    return answers


def main() -> int:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_OUT
    work = Path(tempfile.mkdtemp(prefix="infertop-record-"))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    layout_path = work / "layout.toml"
    served = subprocess.Popen(
        [sys.executable, "-m", "infertop", "demo", "--nodes", str(NODES), "--serve-only", "--via", "prometheus",
         "--via-url", url, "--scrape-config-out", str(work / "scrape.yml"), "--layout-out", str(layout_path)],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, start_new_session=True)
    backend = None
    try:
        while not layout_path.exists():
            time.sleep(0.2)
        time.sleep(0.5)
        backend = start_backend("prometheus", work / "scrape.yml", work, "127.0.0.1", port)
        time.sleep(30)  # a few scrapes and rule evaluations: rates and recorded series exist
        recorded = asyncio.run(_rounds(layout_path, rules=True))
        raw = asyncio.run(_rounds(layout_path, rules=False))
        layout_text = layout_path.read_text()
    finally:
        for proc in (backend, served):
            if proc is not None:
                proc.terminate()
                proc.wait(10)
        shutil.rmtree(work, ignore_errors=True)
    answers = {**raw, **recorded}
    for key in set(raw) & set(recorded):  # asked both ways: every round of both
        answers[key] = sorted(raw[key] + recorded[key], key=lambda a: a["at"])
    doc = {"nodes": NODES, "interval_s": INTERVAL_S, "layout": layout_text, "answers": answers,
           "recorded_with": "prometheus (Debian), infertop demo --via prometheus"}
    with gzip.open(out, "wt", encoding="utf-8") as f:
        json.dump(doc, f, separators=(",", ":"))
    print(f"{out}: {len(answers)} queries, {out.stat().st_size / 1024:.0f} KiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
