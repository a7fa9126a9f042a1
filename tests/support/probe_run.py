"""The bundled probe as a node runs it (a bare interpreter, an empty directory), for tests
that need a real probe reading; and a stream with nothing left, for `SshSource._sample`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from infertop.collectors.probe.bundle import probe_script

PYTHON = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable


def probe_reading(tmp_path: Path, engine_url: str) -> dict[str, Any]:
    """One reading of the real bundled probe, which fetched `engine_url` on its side."""
    (tmp_path / "empty").mkdir()
    script = tmp_path / "probe.py"
    script.write_text(probe_script())
    config = {"interval_s": 0.05, "count": 1, "engine": {"url": engine_url, "timeout_s": 2}}
    result = subprocess.run([PYTHON, "-I", str(script), json.dumps(config)],
                            cwd=tmp_path / "empty", capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    reading: dict[str, Any] = json.loads(result.stdout.splitlines()[0])
    return reading


async def no_more(size: int) -> bytes:
    """A probe stream with nothing left: `_sample` is handed its one line directly."""
    return b""
