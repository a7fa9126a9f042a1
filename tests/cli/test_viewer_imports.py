"""A viewer attached to a monitor in another process (`infertop --layout F`) loads no collector.

Its first frame waits on its imports, and on a host whose cores an engine saturates each
import costs several times its idle time: the SSH, HTTP and Prometheus clients belong to the
monitor process (and to the commands that collect), not to the CLI or the viewer. Checked in a
fresh interpreter, where `sys.modules` says what an import really pulled in.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
COLLECTOR_LIBRARIES = ("asyncssh", "aiohttp", "prometheus_api_client")
# what `infertop --layout F` imports to find the layout's monitor and draw its frames
VIEWER_MODULES = ("infertop.cli.main", "infertop.cli.tui", "infertop.cli.monitors", "infertop.tui.app",
                  "infertop.monitor.channel.client", "infertop.monitor.feeds")


def loaded_after(modules: tuple[str, ...]) -> list[str]:
    code = (
        "import importlib, json, sys\n"
        f"for name in {list(modules)!r}:\n"
        "    importlib.import_module(name)\n"
        f"print(json.dumps(sorted(m for m in {list(COLLECTOR_LIBRARIES)!r} if m in sys.modules)))\n"
    )
    done = subprocess.run([sys.executable, "-W", "ignore", "-c", code], capture_output=True, text=True,
                          cwd=REPO, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return list(json.loads(done.stdout.splitlines()[-1]))


def test_the_viewer_imports_no_collector_library() -> None:
    assert loaded_after(VIEWER_MODULES) == []


def test_the_monitor_does_import_them() -> None:
    # the control: the names are the ones the collectors really import (else the check above proves nothing)
    assert loaded_after(("infertop.monitor.monitor",)) == sorted(COLLECTOR_LIBRARIES)
