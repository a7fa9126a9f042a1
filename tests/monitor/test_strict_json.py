"""The JSON writer and the sparklines, last lines of defence against non-finite figures
(issue 19, items 5 and 6): `snapshot --json` is strict JSON whatever a node serves (the
README promises null, never `NaN` / `Infinity`), and a sparkline draws anything without
raising (the TUI died in `tui/sparkline.py` on a NaN: "cannot convert float NaN to
integer", exit 1)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from infertop.monitor.snapshot import ClusterView, RollupView, SessionView, Snapshot
from infertop.tui.sparkline import sparkline
from tests.support.hostile_server import (
    NORMAL,
    Page,
    dcgm_page,
    growing,
    layout_text,
    serving,
    strict_json,
    vllm_page,
)


@pytest.mark.hostile
@pytest.mark.parametrize(
    "pages",
    [
        pytest.param({"engine": lambda n, t: vllm_page(1.7e308, engines=2)}, id="two-engines-1.7e308"),
        pytest.param({"engine": lambda n, t: vllm_page(growing(100.0, 1e308, after_s=0.5)(n, t),
                                                       running="NaN", waiting="+Inf", kv="-Inf")},
                     id="jump-1e308-and-nan-gauges"),
        pytest.param({"dcgm": lambda n, t: dcgm_page(power=1e308, temp="NaN", util="+Inf")},
                     id="gpu-1e308-nan-inf"),
    ],
)
def test_snapshot_json_is_strict_json(tmp_path: Path, pages: dict[str, Page]) -> None:
    """The real `python -m infertop snapshot --json` against a real hostile server."""
    with serving({**NORMAL, **pages}) as server:
        layout = tmp_path / "hostile.toml"
        layout.write_text(layout_text(server))
        proc = subprocess.run(
            [sys.executable, "-m", "infertop", "snapshot", "--layout", str(layout), "--json",
             "--window", "1"],
            capture_output=True, text=True, timeout=60,
        )
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    data = strict_json(proc.stdout)
    assert data["schema"] == "infertop.snapshot/1"
    assert data["nodes"][0]["status"] == "ok"


@pytest.mark.hostile
@pytest.mark.parametrize(
    "value", [float("nan"), float("inf"), float("-inf")], ids=["nan", "inf", "minus-inf"]
)
def test_snapshot_json_maps_non_finite_to_null(value: float) -> None:
    """Whatever slipped past the bounds, the JSON writer writes null, never NaN/Infinity."""
    snapshot = Snapshot(
        taken_at="2026-01-01T00:00:00+00:00", window_s=value,
        cluster=ClusterView(name="c", interval_s=1.0, total=RollupView(nodes=0, gpus=0, util_pct=value)),
        session=SessionView(started_at="2026-01-01T00:00:00+00:00", elapsed_s=0.0, cost_per_hour_usd=value,
                            spend_usd=None, idle_spend_usd=None, budget_usd=None,
                            usd_per_million_output_tokens=None, api_equivalent_usd=value),
        nodes=[],
    )
    data = strict_json(json.dumps(snapshot.to_json_dict(), allow_nan=False))
    assert data["window_s"] is None and data["cluster"]["total"]["util_pct"] is None
    assert data["session"]["api_equivalent_usd"] is None


@pytest.mark.hostile
@pytest.mark.parametrize(
    "values",
    [
        pytest.param([1.0, float("nan"), 2.0], id="nan"),
        pytest.param([float("inf"), 1.0], id="inf"),
        pytest.param([float("-inf"), 1.0, None], id="minus-inf"),
        pytest.param([1e308, -1e308, 0.0], id="span-overflows"),
        pytest.param([10**400, 1.0], id="int-beyond-float"),
        pytest.param([float("nan")] * 3, id="all-nan"),
        pytest.param([-5.0, -7.0], id="all-below-lo"),
    ],
)
def test_sparkline_draws_anything_without_raising(values: list[Any]) -> None:
    for hi in (None, 100.0, float("nan"), float("inf")):
        line = sparkline(values, 8, 0.0, hi)
        assert len(line) == 8
        assert set(line) <= set(" ▁▂▃▄▅▆▇█")


def test_sparkline_still_scales_ordinary_values() -> None:
    assert sparkline([0.0, 50.0, 100.0], 3, 0.0, 100.0) == "▁▅█"
    assert sparkline([None, 2.0, 4.0], 4) == "  ▅█"  # as before the guards
