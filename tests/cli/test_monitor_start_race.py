"""Two viewers started at the same moment on one layout each start a monitor; one monitor
takes the layout's lock, the other exits at once. The viewer whose monitor lost waits for
the winner to serve — seconds at 128 nodes — rather than failing (infertop/cli/monitors.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from infertop.cli import monitors
from infertop.layouts import load_layout
from infertop.monitor.channel.client import MonitorUnavailable
from infertop.monitor.channel.paths import MonitorLock, socket_path
from infertop.monitor.channel.protocol import Info

LAYOUT = '[cluster]\nname = "race"\n\n[[nodes]]\nname = "n1"\nrole = "decode"\nengine = { url = "http://127.0.0.1:9/metrics" }\n'


@pytest.fixture
def layout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("INFERTOP_STATE_DIR", str(tmp_path / "state"))
    path = tmp_path / "race.toml"
    path.write_text(LAYOUT)
    return load_layout(path)


def _exited_child() -> subprocess.Popen[bytes]:
    child = subprocess.Popen([sys.executable, "-c", "pass"])  # our monitor: lost the race, gone
    child.wait()
    return child


def test_a_viewer_whose_monitor_lost_the_race_waits_for_the_winner(layout, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    winner = MonitorLock.take(socket_path(layout), "the other viewer's monitor")  # holds the lock, not yet serving
    served = Info.model_construct()
    asked = []

    def running_monitor(_layout):  # type: ignore[no-untyped-def]
        # the winner answers on its socket from the fourth look on (its first connections made)
        asked.append(1)
        return served if len(asked) >= 4 else None

    monkeypatch.setattr(monitors, "running_monitor", running_monitor)
    try:
        assert monitors.wait_for_monitor(layout, _exited_child(), timeout_s=60) is served
    finally:
        winner.release()


def test_a_monitor_that_exited_with_no_other_holding_the_lock_fails_at_once(layout) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(MonitorUnavailable, match="the monitor did not start"):
        monitors.wait_for_monitor(layout, _exited_child(), timeout_s=60)
