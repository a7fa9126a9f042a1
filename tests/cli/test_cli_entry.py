"""The installed `infertop` command is the one that was benchmarked: its console script
tunes the garbage collector (collectors/process/gctune.py) before running the CLI."""

from __future__ import annotations

import subprocess
import sys

from infertop.collectors.process.gctune import GC_GEN0_THRESHOLD
from tests.support.paths import infertop_bin

# runs the installed console script as a script, then reports the GC threshold it left
_PROBE = """
import gc, runpy, sys
sys.argv = [sys.argv[1], "--version"]
try:
    runpy.run_path(sys.argv[0], run_name="__main__")
except SystemExit:
    pass
print(gc.get_threshold()[0])
"""


def test_installed_command_tunes_the_gc() -> None:
    script = infertop_bin()
    result = subprocess.run([sys.executable, "-c", _PROBE, script], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.split()
    assert lines[0] == "infertop" and lines[-1] == str(GC_GEN0_THRESHOLD), result.stdout
