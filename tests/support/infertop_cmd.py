"""The real `python -m infertop`, importing this checkout (never an installed copy)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent


def start_infertop(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "infertop", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, encoding="utf-8",
        errors="surrogateescape", env={**os.environ, **(env or {}), "PYTHONPATH": str(REPO)},
    )


def finish(proc: subprocess.Popen[str], timeout_s: float = 60.0) -> subprocess.CompletedProcess[str]:
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def run_infertop(
    *commands: Sequence[str], timeout_s: float = 60.0, env: dict[str, str] | None = None
) -> list[subprocess.CompletedProcess[str]]:
    """Run the commands at the same time (most of their time is a collection window)."""
    procs = [start_infertop(*command, env=env) for command in commands]
    return [finish(p, timeout_s) for p in procs]
