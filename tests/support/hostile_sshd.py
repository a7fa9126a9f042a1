"""A real SSH server (asyncssh, on loopback) whose "probe" streams hostile output.

Run as a process: ``python -m tests.support.hostile_sshd MODE DIR``. It accepts any user without
authentication, ignores the command and the bootstrap sent on stdin, and answers every
session with the behaviour MODE names (see `BEHAVIOURS`). Once it accepts connections it
writes DIR/known_hosts (its host key) and DIR/port. Stop it with SIGTERM. Tests use
`serving(mode, dir)`, which also writes an empty DIR/ssh_config and a layout.

A node speaks the SSH protocol to infertop exactly as a real sshd does, so this tests the
SSH source end to end (handshake, channel, flow control) without root or namespaces.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import asyncssh

from tests.support.paths import REPO
from tests.support.port_file_process import stop, wait_for_port

GOOD = {"gpus": [{"index": i, "util_pct": 50.0, "power_w": 300.0} for i in range(8)], "notes": []}
# a real engine's exposition rides along, as the probe ships it: each line costs a parse
ENGINE_TEXT = (Path(__file__).parent.parent / "fixtures" / "exposition" / "vllm_v1.txt").read_text()


def reading_line(engine: bool = False) -> bytes:
    extra = {"engine_text": ENGINE_TEXT} if engine else {}
    return (json.dumps({**GOOD, **extra, "t": time.time()}) + "\n").encode()


async def no_newline(out: asyncssh.SSHWriter[bytes]) -> None:
    """One line that never ends: 64 KiB of 'x' after 64 KiB, as fast as the channel takes."""
    chunk = b"x" * 65536
    while True:
        out.write(chunk)
        await out.drain()


async def flood(out: asyncssh.SSHWriter[bytes]) -> None:
    """Valid readings, each with engine metrics, at ~10,000 lines per second."""
    while True:
        out.write(reading_line(engine=True) * 100)
        await out.drain()
        await asyncio.sleep(0.01)


async def bad_lines(out: asyncssh.SSHWriter[bytes]) -> None:
    """A parser bomb, then a good reading, each on its own (0.35 s apart: more than the
    half interval the reader waits between lines, so neither is coalesced away)."""
    bombs = [
        b'{"t": 1' + b"0" * 400 + b', "engine": {"log_last_line_at": 5}}',
        b"[" * 100000,
        b'{"t": 1' + b"0" * 5000 + b"}",
    ]
    while True:
        for bomb in bombs:
            for line in (bomb + b"\n", reading_line()):
                out.write(line)
                await out.drain()
                await asyncio.sleep(0.35)


BEHAVIOURS: dict[str, Callable[[asyncssh.SSHWriter[bytes]], Awaitable[None]]] = {
    "no-newline": no_newline,
    "flood": flood,
    "bad-lines": bad_lines,
}


class _NoAuth(asyncssh.SSHServer):
    def begin_auth(self, username: str) -> bool:
        return False  # anyone may log in: this server only ever sends test output


async def main(mode: str, where: Path) -> None:
    behaviour = BEHAVIOURS[mode]

    async def session(process: asyncssh.SSHServerProcess[bytes]) -> None:
        try:
            await behaviour(process.stdout)
        except (asyncssh.Error, OSError, BrokenPipeError):
            pass
        finally:
            process.exit(0)

    key = asyncssh.generate_private_key("ssh-ed25519")
    server = await asyncssh.create_server(
        _NoAuth, "127.0.0.1", 0, server_host_keys=[key], process_factory=session, encoding=None
    )
    port = server.sockets[0].getsockname()[1]
    public = key.export_public_key("openssh").decode().strip()
    (where / "known_hosts").write_text(f"[127.0.0.1]:{port} {public}\n")
    (where / "port.tmp").write_text(str(port))
    (where / "port.tmp").rename(where / "port")
    await asyncio.Event().wait()


def layout_text(where: Path, port: int, interval_s: float = 0.5) -> str:
    """A layout with one node read over SSH from this server (host key checked)."""
    return (
        f'[cluster]\nname = "hostile"\ninterval_s = {interval_s}\nwindow_s = 2.0\n\n'
        f'[ssh]\nknown_hosts = "{where / "known_hosts"}"\nconfig = "{where / "ssh_config"}"\n'
        'connect_timeout_s = 5.0\nbackoff_cap_s = 1.0\n\n'
        f'[[nodes]]\nname = "n1"\nssh = "127.0.0.1:{port}"\n'
    )


@contextlib.contextmanager
def serving(mode: str, where: Path) -> Iterator[int]:
    """The server in its own process, until the block ends; yields its port. Also writes
    where/ssh_config (empty: the developer's own is never read) and where/layout.toml."""
    where.mkdir(parents=True, exist_ok=True)
    (where / "ssh_config").write_text("")
    (where / "port").unlink(missing_ok=True)
    proc = subprocess.Popen([sys.executable, "-m", "tests.support.hostile_sshd", mode, str(where)], cwd=REPO, stderr=subprocess.DEVNULL)
    try:
        port = wait_for_port(proc, where / "port", f"hostile sshd ({mode})")
        (where / "layout.toml").write_text(layout_text(where, port))
        yield port
    finally:
        stop(proc)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], Path(sys.argv[2])))
