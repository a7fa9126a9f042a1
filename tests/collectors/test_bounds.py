"""Physically impossible values from real pages and probe lines (issue 19, items 5 and 6).

NaN, infinities, 1e308, a GPU drawing 6 kW or a megawatt, −300 °C, 250 % util, negative
queues and KV use: each becomes unknown (null) where samples enter the monitor
(`collectors/bounds.py`), with a note naming the field and the value, and never reaches
the money ledger, a sum, a sparkline or the JSON. Every page is served by a real aiohttp
server (`tests/support/hostile_server.py`) and read by the real scrape source and monitor; probe
lines come from the real bundled probe.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from infertop.collectors.fleet import Fleet, FleetState
from infertop.collectors.sources.ssh import ProbeLines, SshNode, SshSource
from infertop.layouts import parse_layout
from infertop.monitor.feeds import MonitorFeed
from infertop.tui.app import InfertopApp
from tests.support.hostile_server import (
    FINITE,
    NORMAL,
    Page,
    check_figure,
    dcgm_page,
    finite_or_null,
    growing,
    ib_page,
    layout_text,
    serving,
    snapshot_of,
    vllm_page,
)
from tests.support.probe_run import no_more, probe_reading
from tests.support.tui_helpers import screen_text, wait_for

pytestmark = pytest.mark.hostile

# (pages that differ from an honest node's, (part, field), what the field must be, the note)
CASES = [
    # item 5: the sum of two engines' counters overflows to inf (was: NaN rates, TUI crash)
    pytest.param({"engine": lambda n, t: vllm_page(1.7e308, engines=2)},
                 ("engine", "accepted_tokens_per_s"), None, "generation_tokens_total = inf",
                 id="two-engines-counter-1.7e308"),
    # from the jump on the counter is unknown; the rate is over the known part of the window
    pytest.param({"engine": lambda n, t: vllm_page(growing(100.0, 1e308, after_s=1.0)(n, t))},
                 ("engine", "accepted_tokens_per_s"), FINITE, "generation_tokens_total = 1e+308",
                 id="counter-jumps-to-1e308"),
    pytest.param({"engine": lambda n, t: vllm_page(waiting=-5)},
                 ("engine", "requests_waiting"), None, "requests_waiting = -5", id="waiting-negative"),
    pytest.param({"engine": lambda n, t: vllm_page(kv=-7)},
                 ("engine", "kv_cache_usage"), None, "kv_cache_usage = -7", id="kv-negative-700pct"),
    pytest.param({"engine": lambda n, t: vllm_page(kv=3.5)},
                 ("engine", "kv_cache_usage"), None, "kv_cache_usage = 3.5", id="kv-350pct"),
    pytest.param({"engine": lambda n, t: vllm_page(running=1e308)},
                 ("engine", "requests_running"), None, "requests_running = 1e+308", id="running-1e308"),
    # non-finite samples are dropped by the exposition parser already: unknown, no note
    pytest.param({"engine": lambda n, t: vllm_page(running="NaN")},
                 ("engine", "requests_running"), None, None, id="running-NaN"),
    pytest.param({"engine": lambda n, t: vllm_page(waiting="+Inf", kv="-Inf")},
                 ("engine", "requests_waiting"), None, None, id="waiting-inf"),
    pytest.param({"dcgm": lambda n, t: dcgm_page(power=1e308)},
                 ("gpu", "power_w"), None, "power_w = 1e+308", id="gpu-power-1e308"),
    pytest.param({"dcgm": lambda n, t: dcgm_page(power=6000)},
                 ("gpu", "power_w"), None, "power_w = 6e+03", id="gpu-power-6kW"),
    pytest.param({"dcgm": lambda n, t: dcgm_page(power=-500)},
                 ("gpu", "power_w"), None, "power_w = -500", id="gpu-power-negative"),
    pytest.param({"dcgm": lambda n, t: dcgm_page(temp=1e6)},
                 ("gpu", "temp_c"), None, "temp_c = 1e+06", id="gpu-temp-1e6"),
    pytest.param({"dcgm": lambda n, t: dcgm_page(temp=-300)},
                 ("gpu", "temp_c"), None, "temp_c = -300", id="gpu-temp-below-absolute-zero"),
    pytest.param({"dcgm": lambda n, t: dcgm_page(util=250)},
                 ("gpu", "util_pct"), None, "util_pct = 250", id="gpu-util-250pct"),
    pytest.param({"dcgm": lambda n, t: dcgm_page(fb_used=1e12)},
                 ("gpu", "mem_used_bytes"), None, "mem_used_bytes = 1.05e+18", id="gpu-mem-1-EiB"),
    pytest.param({"dcgm": lambda n, t: dcgm_page(fb_used=1e308)},  # × MiB overflows to inf
                 ("gpu", "mem_used_bytes"), None, None, id="gpu-mem-overflows"),
    pytest.param({"dcgm": lambda n, t: dcgm_page(sm_clock=1e9)},
                 ("gpu", "sm_clock_mhz"), None, "sm_clock_mhz = 1e+09", id="gpu-clock-1PHz"),
    pytest.param({"ib": lambda n, t: ib_page(rate=1e308)},  # × 8 bits overflows to inf
                 ("nic", "speed_gbps"), None, "speed_gbps = inf", id="nic-speed-1e308"),
    pytest.param({"ib": lambda n, t: ib_page(rate=5e12)},
                 ("nic", "speed_gbps"), None, "speed_gbps = 4e+04", id="nic-speed-40Tbps"),
]


@pytest.mark.parametrize(("pages", "where", "expect", "note"), CASES)
async def test_impossible_value_is_unknown_with_a_note(
    pages: dict[str, Page], where: tuple[str, str], expect: object, note: str | None
) -> None:
    await check_figure(pages, where, expect, note)


async def test_tui_fed_two_engines_at_1_7e308_does_not_crash() -> None:
    """Item 5: the page that crashed the TUI in `tui/sparkline.py` ("cannot convert float
    NaN to integer", exit 1), with a GPU at 1e308 W every other scrape. The app runs on,
    the node screen draws its sparklines and says why figures are blank."""
    pages = {**NORMAL,
             "engine": lambda n, t: vllm_page(growing(100.0, 1.7e308, after_s=1.0)(n, t), engines=2),
             "dcgm": lambda n, t: dcgm_page(power=1e308 if n % 2 else 500.0)}
    with serving(pages) as server:
        feed = MonitorFeed(parse_layout(layout_text(server), "hostile.toml"))
        app = InfertopApp(feed)
        async with app.run_test(size=(200, 50)) as pilot:
            await wait_for(pilot, lambda: server.hits.get("engine", 0) >= 5 and app.frames_rendered >= 4)
            await pilot.press("enter")  # the node screen: util, power and steps sparklines
            await wait_for(pilot, lambda: "decode steps/s" in screen_text(app))
            frames = app.frames_rendered
            await wait_for(pilot, lambda: app.frames_rendered >= frames + 3)
            text = screen_text(app)
            assert "nan" not in text.lower()  # no figure drawn from NaN
            assert "shown as unknown" in text
            await pilot.press("escape")
            await pilot.press("q")
            await wait_for(pilot, lambda: not app.is_running, timeout_s=10)
    assert app.return_code in (0, None)
    latest = feed.monitor.latest
    assert latest is not None
    engine = latest.nodes[0].engine
    assert engine is not None and finite_or_null(engine.accepted_tokens_per_s)
    assert finite_or_null(latest.session.accepted_tokens_per_s)


OWNED = """
[pricing]
mode = "owned"
host_base_power_w = 500
pue = 1.2
kwh_usd = 0.10
"""


@pytest.mark.parametrize(
    "bad_power",
    [pytest.param(1e308, id="1e308"), pytest.param(1.7e308, id="1.7e308"), pytest.param(5e6, id="5MW"),
     pytest.param(-1e308, id="minus-1e308"), pytest.param("+Inf", id="inf"), pytest.param("NaN", id="nan")],
)
async def test_owned_spend_stays_sane_after_one_absurd_power_reading(bad_power: float | str) -> None:
    """One scrape of an absurd GPU power in owned mode (energy is billed from it) must not
    leave the spend at ~1e307 for the rest of the session."""
    pages = {"dcgm": lambda n, t: dcgm_page(power=bad_power if n == 2 else 500.0)}
    snapshot = await snapshot_of(pages, OWNED)
    session = snapshot.session
    assert session.spend_usd is not None and math.isfinite(session.spend_usd)
    # nothing can cost more than the GPU's limit (5 kW) and the host, for the whole session
    ceiling = (5000 + 500) / 1000 * 1.2 * 0.10 * session.elapsed_s / 3600
    assert 0 <= session.spend_usd <= ceiling
    assert session.cost_per_hour_usd is not None and 0 < session.cost_per_hour_usd < 1.0
    assert all(p.spend_usd >= 0 and math.isfinite(p.spend_usd) for p in session.spend_by_phase)


# ---------------------------------------------------------------------------- the SSH probe


# what a hostile node's probe line may carry: (part, field, the value's JSON text)
PROBE_VALUES = [
    pytest.param("gpus", "power_w", "NaN", id="gpu-power-NaN"),
    pytest.param("gpus", "power_w", "1e308", id="gpu-power-1e308"),
    pytest.param("gpus", "util_pct", "1e400", id="gpu-util-1e400-is-inf"),
    pytest.param("gpus", "temp_c", "-Infinity", id="gpu-temp-minus-inf"),
    pytest.param("gpus", "mem_used_bytes", "1" + "0" * 40, id="gpu-mem-40-digits"),
    pytest.param("nics", "speed_gbps", "1e9", id="nic-speed-1e9"),
    pytest.param("host", "cpu_pct", "-1", id="host-cpu-negative"),
    pytest.param("host", "mem_total_bytes", "1" + "0" * 20, id="host-mem-1e20"),
]


@pytest.mark.parametrize(("part", "field", "raw"), PROBE_VALUES)
def test_probe_line_values_are_bounded_where_samples_enter(
    tmp_path: Path, part: str, field: str, raw: str
) -> None:
    """The SSH path: the real probe fetched a hostile engine page (two engines at 1.7e308);
    the node adds absurd device values to its line. Whatever it sends, the monitor's fleet
    state holds unknowns with notes."""
    with serving({"engine": lambda n, t: vllm_page(1.7e308, engines=2)}) as server:
        reading = probe_reading(tmp_path, server.url("engine"))
    reading.update({"gpus": [{"index": 0, "name": "H200"}], "nics": [{"name": "ib0"}], "host": {}})
    line = json.dumps(reading)
    value = f'"{field}": {raw}'
    if part == "host":
        line = line.replace('"host": {}', "\"host\": {" + value + "}")
    elif part == "gpus":
        line = line.replace('"index": 0', '"index": 0, ' + value)
    else:
        line = line.replace('"name": "ib0"', '"name": "ib0", ' + value)
    source = SshSource([SshNode("n1", "n1", engine_url=server.url("engine"))], interval_s=1.0)
    state = FleetState(["n1"])
    Fleet(state, []).ingest(source._sample(source.ssh_nodes[0], line.encode(), ProbeLines(no_more)))
    assert state.nodes["n1"].last_error is None, state.nodes["n1"].last_error
    [sample] = state.nodes["n1"].latest()
    got = getattr(sample.host, field) if part == "host" else getattr(getattr(sample, part)[0], field)
    assert got is None
    assert any(f"{field} = " in n and "shown as unknown" in n for n in sample.notes), sample.notes
    assert sample.engine is not None
    assert sample.engine.generation_tokens_total is None  # 1.7e308 + 1.7e308 = inf
