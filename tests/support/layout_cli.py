"""Run the real CLI on a layout file and check the one-line, exit-2 refusal (issue 19)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path


def toml_str(value: str) -> str:
    """`value` as a TOML basic string, every control and non-ASCII character escaped."""
    out = ['"']
    for ch in value:
        if ch in '"\\':
            out.append("\\" + ch)
        elif " " <= ch <= "~":
            out.append(ch)
        else:
            out.append(f"\\u{ord(ch):04x}" if ord(ch) <= 0xFFFF else f"\\U{ord(ch):08x}")
    out.append('"')
    return "".join(out)


@dataclass(frozen=True)
class Run:
    returncode: int
    stdout: str
    stderr: str
    # CPU seconds the command itself used (user + system, from wait4): "refused fast" means
    # it did not work its way through the hostile layout, which wall time on a loaded
    # machine cannot tell from waiting for a core
    cpu_s: float


def run_infertop(
    args: list[str], *, timeout_s: float = 20.0, env: dict[str, str] | None = None
) -> Run:
    """`python -m infertop ARGS` with this checkout first on the path (PYTHONPATH)."""
    repo = str(Path(__file__).resolve().parent.parent.parent)
    full_env = dict(os.environ if env is None else env)
    full_env["PYTHONPATH"] = os.pathsep.join(p for p in (repo, full_env.get("PYTHONPATH")) if p)
    proc = subprocess.Popen(
        [sys.executable, "-m", "infertop", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, env=full_env,
    )
    outputs: dict[str, str] = {}
    readers = [
        threading.Thread(target=lambda name=name, stream=stream: outputs.__setitem__(name, stream.read()))
        for name, stream in (("out", proc.stdout), ("err", proc.stderr))
    ]
    for reader in readers:
        reader.start()
    killer = threading.Timer(timeout_s, proc.kill)  # a command that hangs fails, it does not hang the suite
    killer.start()
    try:
        _, status, usage = os.wait4(proc.pid, 0)  # its own rusage, whatever else the machine runs
    finally:
        killer.cancel()
    proc.returncode = os.waitstatus_to_exitcode(status)
    for reader in readers:
        reader.join()
    return Run(proc.returncode, outputs["out"], outputs["err"], usage.ru_utime + usage.ru_stime)


def assert_refused(run: Run, *needles: str, max_s: float = 5.0, problems: int = 1) -> str:
    """Exit 2, nothing on stdout, `problems` plain lines on stderr (one per problem of the
    layout), the first naming every needle."""
    assert run.returncode == 2, (run.returncode, run.stdout[-500:], run.stderr[-2000:])
    assert run.stdout == ""
    assert "Traceback" not in run.stderr
    lines = run.stderr.splitlines()
    assert len(lines) == problems, run.stderr[-2000:]
    assert all(line.isprintable() for line in lines), lines  # hostile text shown escaped
    line = lines[0]
    for needle in needles:
        assert needle in line, line
    assert run.cpu_s < max_s, f"took {run.cpu_s:.1f} s of CPU"
    return line
