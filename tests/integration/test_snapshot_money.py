"""The session's $/1M in a real `infertop snapshot` (issue 45): tokens and spend over one
stretch. A steady cluster's 10 s snapshot is within 2 % of cost/s ÷ tokens/s every time
(it was anywhere from right to 3× too high: spend from the monitor's start, tokens from
each node's first reading), and `make demo-real`'s own layout — the simulated cluster,
counted whole, beside an engine read from its page and from its log — gives the figure
the cluster's rates give, not $0.02 "cheaper than the API". The real engine is the
stand-in (`tests/support/engine_stand_in.py`): the layout is the one demo_real.py writes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.engine_stand_in import TOKENS_PER_S, StandInEngine
from tests.support.paths import REPO, infertop_bin

sys.path.insert(0, str(REPO / "scripts"))
import demo_real

GPU_HOUR_USD = 10.0


def snapshot(layout: Path, env: dict[str, str]) -> dict:  # type: ignore[type-arg]
    got = subprocess.run([infertop_bin(), "snapshot", "--layout", str(layout), "--window", "10", "--json"],
                         capture_output=True, text=True, timeout=120, env=env)
    assert got.returncode == 0, got.stderr[-2000:]
    return json.loads(got.stdout)  # type: ignore[no-any-return]


@pytest.fixture
def engines(tmp_path: Path) -> Iterator[list[StandInEngine]]:
    started = []
    try:
        for i in range(3):
            (tmp_path / f"e{i}").mkdir()
            started.append(StandInEngine(tmp_path / f"e{i}").start())
        for engine in started:
            engine.wait_ready()
        yield started
    finally:
        for engine in started:
            engine.stop()


def test_a_steady_clusters_ten_second_snapshot_is_right_every_time(
    tmp_path: Path, engines: list[StandInEngine]
) -> None:
    nodes = "".join(
        f'[[nodes]]\nname = "e{i}"\nrole = "decode"\ngpus = 1\n'
        f'engine = {{ url = {json.dumps(e.base_url + "/metrics")} }}\n'
        for i, e in enumerate(engines)
    )
    layout = tmp_path / "steady.toml"
    layout.write_text(f"[pricing]\ngpu_hour_usd = {GPU_HOUR_USD}\n{nodes}")
    env = {**os.environ, "INFERTOP_STATE_DIR": str(tmp_path / "state")}
    truth = len(engines) * GPU_HOUR_USD / 3600.0 / (len(engines) * TOKENS_PER_S) * 1e6  # $/1M
    for _ in range(3):
        s = snapshot(layout, env)["session"]
        assert s["usd_per_million_span"] == "watched"  # the stand-ins ran before infertop
        assert s["span_s"] > 5.0
        # JSON money is to the cent: the figure from the stretch's own counts, and as printed
        per_million = len(engines) * GPU_HOUR_USD * s["span_s"] / 3600.0 / s["accepted_tokens"] * 1e6
        assert per_million == pytest.approx(truth, rel=0.02), s
        assert s["usd_per_million_output_tokens"] == pytest.approx(truth, rel=0.02), s


def test_demo_real_layout_money_is_the_clusters(tmp_path: Path) -> None:
    env = {**os.environ, "INFERTOP_STATE_DIR": str(tmp_path / "state")}
    engine = StandInEngine(tmp_path).start()
    layout = tmp_path / "demo-real.toml"
    served = None
    try:
        engine.wait_ready()
        served = subprocess.Popen([infertop_bin(), "demo", "--serve-only", "--nodes", "4",
                                   "--layout-out", str(layout), "--exit-with", str(os.getpid())],
                                  stdout=subprocess.DEVNULL, env=env)
        demo_real.wait_for_file(layout, served, demo_real.LAYOUT_WAIT_S)
        with layout.open("a") as out:
            out.write(demo_real.real_nodes(engine))  # the two nodes demo_real.py adds
        snap = snapshot(layout, env)
        s = snap["session"]
        names = {n["name"] for n in snap["nodes"]}
        assert set(demo_real.REAL_NODES) <= names
        # the log-read node's counters say no birth: counted from when every engine was read
        assert s["usd_per_million_span"] == "watched" and s["span_s"] > 3.0
        # the cluster's own rates over the stretch: the spend over it ÷ the tokens over it,
        # and the marginal figure of the window (the demo's rate wanders a little)
        per_million = snap["cluster"]["total"]["cost_per_hour_usd"] * s["span_s"] / 3600.0 \
            / s["accepted_tokens"] * 1e6
        assert s["usd_per_million_output_tokens"] == pytest.approx(per_million, rel=0.01)
        assert s["usd_per_million_output_tokens"] == pytest.approx(s["usd_per_million_output_tokens_now"], rel=0.05)
        # spend ÷ API over the same tokens: dearer than the API, as the rates say
        assert s["api_break_even_ratio"] > 1.0
    finally:
        if served is not None:
            served.terminate()
            served.wait(30)
        engine.stop()
