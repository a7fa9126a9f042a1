"""Take the README's and docs/tui.md's screen captures: `infertop demo` (the real binary,
the 16-node demo) in a detached tmux window of the size asked, captured with
`tmux capture-pane -p` once the scripted trouble is in the hunt list.

    python scripts/tmux_capture.py 120x36 [--verdicts 6] [--write README.md]

Prints the capture; with --write, puts it in place of the page's capture of that size
(the "```text" block after "`make demo` at 120x36").

tests/docs/test_readme_capture.py compares the captures' structure
with the screen drawn now; when it fails, take them again with this.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from infertop.tui.header import HEIGHT_HOLD_S  # noqa: E402

_VERDICTS = re.compile(r"hunt list · (\d+) verdicts")


def tmux(*args: str) -> str:
    return subprocess.run(["tmux", *args], check=True, capture_output=True, text=True, timeout=10).stdout


def capture(width: int, height: int, verdicts: int, timeout_s: float) -> str:
    binary = shutil.which("infertop", path=str(Path(sys.executable).parent)) or "infertop"
    session = f"capture-{os.getpid()}"
    with tempfile.TemporaryDirectory() as state:
        command = f"env INFERTOP_STATE_DIR={state} TERM=xterm-256color {binary} demo"
        tmux("new-session", "-d", "-s", session, "-x", str(width), "-y", str(height), command)
        try:
            deadline = time.monotonic() + timeout_s
            seen, steady_since, shot = -1, time.monotonic(), ""
            quiet_since = time.monotonic()
            while time.monotonic() < deadline:
                time.sleep(1.0)
                shot = tmux("capture-pane", "-p", "-t", session)
                found = _VERDICTS.search(shot)
                count = int(found[1]) if found else 0
                if count != seen:
                    seen, steady_since = count, time.monotonic()
                if " new: " in shot:
                    quiet_since = time.monotonic()
                # the trouble in and settled: the same count for 10 s, its announcement
                # ("7 new: …") gone from the header and the height the header held for
                # it given back (HEIGHT_HOLD_S: blank lines under the header until then)
                settled = time.monotonic() - quiet_since >= HEIGHT_HOLD_S + 2
                if count >= verdicts and time.monotonic() - steady_since >= 10 and settled:
                    break
            time.sleep(1.0)
            return tmux("capture-pane", "-p", "-t", session)
        finally:
            tmux("send-keys", "-t", session, "q")
            time.sleep(2.0)
            subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True, timeout=10)


def write_capture(page: Path, width: int, height: int, shot: str) -> None:
    text = page.read_text()
    block = re.compile(rf"(`make demo` at {width}x{height}[^\n]*\n+```text\n)(.*?)(\n```)", re.S)
    if not block.search(text):
        raise SystemExit(f"{page}: no capture at {width}x{height} to replace")
    page.write_text(block.sub(lambda m: m[1] + shot + m[3], text, count=1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("size", help="WIDTHxHEIGHT, e.g. 120x36")
    parser.add_argument("--verdicts", type=int, default=6, help="verdicts to wait for")
    parser.add_argument("--timeout", type=float, default=150.0)
    parser.add_argument("--write", type=Path, action="append", default=[],
                        help="a Markdown page whose capture to replace (repeatable)")
    args = parser.parse_args()
    width, height = (int(n) for n in args.size.split("x"))
    shot = capture(width, height, args.verdicts, args.timeout)
    shot = "\n".join(line.rstrip() for line in shot.splitlines())
    for page in args.write:
        write_capture(page, width, height, shot)
    print(shot)


if __name__ == "__main__":
    main()
