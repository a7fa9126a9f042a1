"""A real SSH server on 127.0.0.1 (asyncssh's server, in a process of its own).

Lighter than the network-namespace cluster (tests/support/netns.py): no root, no sshd. It runs
every command it is sent with /bin/sh, as the user running the tests, so the SSH source
sends its real bootstrap and probe over a real SSH connection. A test plays a hostile
node by pointing the layout's `[ssh] python` at a script that lies.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from pathlib import Path

import asyncssh

from tests.support.waiting import until

_SERVER = r"""
import asyncio, sys
import asyncssh

workdir = sys.argv[1]

async def run(process):
    local = await asyncio.create_subprocess_shell(
        process.command or "true",
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    await process.redirect(stdin=local.stdin, stdout=local.stdout, stderr=local.stderr)
    process.exit(await local.wait())

async def main():
    server = await asyncssh.listen(
        "127.0.0.1", 0,
        server_host_keys=[workdir + "/host_key"],
        authorized_client_keys=workdir + "/authorized_keys",
        process_factory=run, encoding=None,
    )
    port = server.sockets[0].getsockname()[1]
    with open(workdir + "/port.tmp", "w") as f:
        f.write(str(port))
    import os
    os.replace(workdir + "/port.tmp", workdir + "/port")
    await asyncio.Event().wait()

asyncio.run(main())
"""


class LoopbackSsh:
    """Start with `start()`, stop with `stop()`; `ssh_table(python)` is the layout's [ssh]."""

    def __init__(self, workdir: Path):
        self.workdir = workdir
        self.port: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout_s: float = 10.0) -> LoopbackSsh:
        d = self.workdir
        d.mkdir(parents=True, exist_ok=True)
        host_key = asyncssh.generate_private_key("ssh-ed25519")
        client_key = asyncssh.generate_private_key("ssh-ed25519")
        host_key.write_private_key(d / "host_key")
        client_key.write_private_key(d / "client_key")
        client_key.write_public_key(d / "authorized_keys")
        (d / "ssh_config").write_text("")  # never the developer's ~/.ssh/config
        self._proc = subprocess.Popen([sys.executable, "-c", _SERVER, str(d)], stderr=subprocess.PIPE)
        proc = self._proc
        try:
            until((d / "port").exists, timeout_s, "the loopback SSH server to start",
                  gave_up=lambda: proc.poll() is not None)
        except AssertionError:
            self.stop()
            raise
        self.port = int((d / "port").read_text())
        public = host_key.export_public_key().decode().strip()
        (d / "known_hosts").write_text(f"[127.0.0.1]:{self.port} {public}\n")
        return self

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def ssh_table(self, python: str) -> str:
        """The layout's `[ssh]` table: this server's keys, and the node's interpreter."""
        d = self.workdir
        return (
            "[ssh]\n"
            f'known_hosts = "{d / "known_hosts"}"\n'
            f'config = "{d / "ssh_config"}"\n'
            f'identity_files = ["{d / "client_key"}"]\n'
            f'python = "{python}"\n'
            "connect_timeout_s = 5\n"
        )

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(5)
            if self._proc.poll() is None:
                self._proc.kill()
                self._proc.wait(5)
        self._proc = None
