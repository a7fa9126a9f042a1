"""`infertop serve --layout F [--listen 127.0.0.1:8080]`: the TUI in a browser.

Every browser that opens the page is a viewer of the one monitor of the layout (started
here, recording, if none runs; it outlives `serve` like one a TUI starts). Bound to
loopback by default; bound elsewhere, a token is required, written with the URL to a
private file (0600) in the state directory — never printed.
"""

from __future__ import annotations

import argparse
import os
import secrets
from pathlib import Path

from infertop.cli.argtypes import whole_number
from infertop.cli.common import (
    EXIT_BAD_INPUT,
    EXIT_FAIL,
    EXIT_OK,
    UsageError,
    add_layout_arg,
    fail,
    layout_of,
    say,
)
from infertop.cli.monitors import layout_flag, running_monitor, start_monitor, wait_for_monitor
from infertop.monitor.channel.client import MonitorUnavailable
from infertop.monitor.record.store import PRIVATE_FILE_MODE, state_dir

NAME = "serve"
HELP = "serve the TUI to browsers (each browser a viewer of the same monitor)"
DEFAULT_LISTEN = "127.0.0.1:8080"


def _listen(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host:
        raise argparse.ArgumentTypeError(f"{text!r}: expected HOST:PORT, e.g. {DEFAULT_LISTEN}")
    return host.strip("[]"), whole_number(port, 1, 65535)


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_layout_arg(p, interval=False)
    p.add_argument("--listen", type=_listen, default=_listen(DEFAULT_LISTEN), metavar="HOST:PORT",
                   help=f"where to listen (default {DEFAULT_LISTEN}: this machine only)")
    p.add_argument("--token-file", metavar="FILE", default=None,
                   help="read the access token from FILE (default: a new one when not on loopback)")
    p.add_argument("--public-url", metavar="URL", default=None,
                   help="the URL browsers use (behind a proxy, or when listening on 0.0.0.0)")
    p.add_argument("--max-viewers", type=lambda t: whole_number(t, 1, 64), default=8, metavar="N",
                   help="browsers at once (each is a viewer process; default 8)")


def _token(args: argparse.Namespace, loopback: bool) -> str | None:
    if args.token_file:
        try:
            token = Path(args.token_file).read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"infertop serve: --token-file {args.token_file}: cannot read ({exc})") from None
        if len(token) < 16:
            raise UsageError("infertop serve: --token-file: the token must be at least 16 characters")
        return token
    return None if loopback else secrets.token_urlsafe(24)


def _write_private(path: Path, text: str) -> None:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, PRIVATE_FILE_MODE)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)


def run(args: argparse.Namespace) -> int:
    from aiohttp import web  # the web stack loads only for this command

    from infertop.web import build_web_app, is_loopback

    layout = layout_of(args)
    if layout.source_path is None:
        raise UsageError("infertop serve: name the layout to serve (--layout FILE)")
    host, port = args.listen
    loopback = is_loopback(host)
    if host in ("0.0.0.0", "::") and not args.public_url:
        raise UsageError(
            "infertop serve: listening on every address: say the URL browsers use (--public-url)"
        )
    token = _token(args, loopback)
    public_url = args.public_url or f"http://{'[' + host + ']' if ':' in host else host}:{port}"
    url = public_url.rstrip("/") + "/" + (f"?token={token}" if token else "")
    info = running_monitor(layout)
    if info is None:
        try:
            child = start_monitor(layout, None)
        except OSError as exc:
            return fail(f"cannot start the monitor: {exc.strerror or exc}")
        try:
            info = wait_for_monitor(layout, child)
        except MonitorUnavailable as exc:
            say(f"infertop: {exc}")
            return EXIT_BAD_INPUT if exc.exit_code == EXIT_BAD_INPUT else EXIT_FAIL
        say(f"infertop: started the monitor for this layout (pid {info.pid}); "
            f"it goes on after serve: infertop stop{layout_flag(layout)}")
    app = build_web_app(Path(layout.source_path), host, port, token, args.max_viewers, args.public_url)
    if token is not None:
        where = state_dir() / f"serve-{port}.url"
        _write_private(where, url + "\n")
        say(f"infertop: serving {layout.source_path} to the network on {host}:{port}: anyone with the "
            f"token can watch and press keys (mark phases, stop the monitor); the URL with its token "
            f"is in {where} (0600)")
    else:
        say(f"infertop: serving {layout.source_path} at {url} (this machine only; Ctrl+C stops)")
    web.run_app(app, host=host, port=port, print=None, access_log=None)
    return EXIT_OK
