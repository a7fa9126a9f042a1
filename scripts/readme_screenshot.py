"""Draw the README's picture: the overview of the 16-node demo at 160x45, as an SVG.

    python scripts/readme_screenshot.py [docs/overview.svg]

The demo's cluster is served by `infertop demo --serve-only` in a child process; the TUI
runs headless (Textual's `run_test`) on a live monitor of it, with hold times shortened so
that the scripted trouble (ports down, an idle prefill node, a straggler) is in the hunt
list when the picture is taken, and saves it with Textual's `save_screenshot`.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from infertop.layouts import load_layout  # noqa: E402
from infertop.monitor.feeds import MonitorFeed  # noqa: E402
from infertop.tui.app import InfertopApp  # noqa: E402

SHORT_HOLDS = "\n[thresholds]\nhold_s = 3\nclear_s = 3\nidle_hold_s = 3\n"


async def shoot(layout: Path, out: Path) -> None:
    app = InfertopApp(MonitorFeed(load_layout(layout)))
    async with app.run_test(size=(160, 45)) as pilot:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            await pilot.pause(1.0)
            latest = app.latest_snapshot
            if latest is not None and sum(len(n.verdicts) for n in latest.nodes) >= 4:
                break
        await pilot.pause(2.0)
        app.save_screenshot(out.name, str(out.parent))


def main() -> None:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / "docs" / "overview.svg").resolve()
    with tempfile.TemporaryDirectory() as tmp:
        layout = Path(tmp) / "demo.toml"
        env = {**os.environ, "PYTHONPATH": str(ROOT), "INFERTOP_STATE_DIR": tmp}
        server = subprocess.Popen([sys.executable, "-m", "infertop", "demo", "--serve-only", "--nodes", "16",
                                   "--layout-out", str(layout)], env=env, stdout=subprocess.DEVNULL)
        try:
            while not layout.exists():
                time.sleep(0.2)
            time.sleep(0.5)
            short = Path(tmp) / "short.toml"
            short.write_text(layout.read_text() + SHORT_HOLDS)
            asyncio.run(shoot(short, out))
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(15)
    print(out)


if __name__ == "__main__":
    main()
