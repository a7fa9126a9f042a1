"""The TUI in a browser: textual-serve's page and websocket, guarded.

Each browser that opens the page gets its own viewer process (`infertop attach --layout
F`), which attaches to the one monitor of that layout (started by `infertop serve` when
none ran): one record, one ledger, one phase state whoever watches. textual-serve runs
that command for every websocket; the command is built here with `shlex.join` from our
own interpreter and the layout's absolute path — nothing a browser sends reaches a shell.

What a browser may do is what a person at the terminal may do (mark phases, stop the
monitor), so the server is guarded:
- bound to loopback by default; elsewhere a token is required (`?token=` once, then an
  HttpOnly, SameSite=Strict cookie), compared in constant time;
- the websocket must come from the page's own origin (a web page elsewhere cannot drive
  a viewer through the user's browser), and the Host header must name this server (DNS
  rebinding);
- at most `max_viewers` browsers at once (each is a process).
Only textual-serve's public handlers and attributes are used; the routes are ours.
"""

from __future__ import annotations

import hmac
import ipaddress
import re
import shlex
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiohttp_jinja2
import jinja2
from aiohttp import web
from textual_serve.server import Server

COOKIE = "infertop_token"
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

# textual-serve's page loads its font from a public font CDN, which an offline cluster
# cannot reach (and which would tell a third party who watches what): the same font is in
# textual-serve's own static folder, so the page asks this server for it instead
FONT_CDN_LINK = re.compile(r"<link[^>]*fonts\.googleapis\.com[^>]*/?>", re.DOTALL)
LOCAL_FONT = """<style>
      @font-face {
        font-family: "Roboto Mono";
        src: url("{{ config.static.url }}fonts/RobotoMono-VariableFont_wght.ttf") format("truetype");
        font-weight: 100 700;
        font-style: normal;
      }
      @font-face {
        font-family: "Roboto Mono";
        src: url("{{ config.static.url }}fonts/RobotoMono-Italic-VariableFont_wght.ttf") format("truetype");
        font-weight: 100 700;
        font-style: italic;
      }
    </style>"""


class OfflinePageLoader(jinja2.FileSystemLoader):
    """textual-serve's templates, with the font CDN's stylesheet link replaced by the font
    served from here: no request leaves the host (tests/integration/test_browser.py)."""

    def get_source(
        self, environment: jinja2.Environment, template: str
    ) -> tuple[str, str, Callable[[], bool]]:
        source, filename, uptodate = super().get_source(environment, template)
        return FONT_CDN_LINK.sub(lambda _: LOCAL_FONT, source), filename, uptodate


def viewer_command(layout_path: Path) -> str:
    """The command each browser's viewer runs: quoted, never interpolated raw."""
    return shlex.join([sys.executable, "-m", "infertop", "attach", "--layout", str(layout_path.resolve())])


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _host_names(host: str, port: int) -> set[str]:
    names = {f"{host}:{port}"}
    if is_loopback(host):
        names |= {f"localhost:{port}", f"127.0.0.1:{port}", f"[::1]:{port}"}
    return names


class Guard:
    """The middleware: token, origin, Host and the viewer limit."""

    def __init__(self, host: str, port: int, token: str | None, max_viewers: int, public_origin: str | None):
        self.token = token
        self.max_viewers = max_viewers
        self.viewers = 0
        # behind a public URL (a proxy) the Host header is the proxy's business
        self.check_host = public_origin is None
        self.hosts = _host_names(host, port)
        self.public_origin = public_origin

    def _token_ok(self, given: str | None) -> bool:
        return self.token is None or (given is not None and hmac.compare_digest(given, self.token))

    def _origin_ok(self, request: web.Request) -> bool:
        """Same origin only: the page this server served, not a web page elsewhere."""
        origin = request.headers.get("Origin")
        if origin is None:
            return True  # not a browser (browsers always send Origin on a websocket)
        if self.public_origin is not None:
            return origin == self.public_origin
        return origin.split("://", 1)[-1] == request.host

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if self.check_host and request.host not in self.hosts:
            raise web.HTTPMisdirectedRequest(text="this server does not answer to that host name\n")
        if request.path.startswith("/static/"):
            return await handler(request)  # the page's scripts and styles: nothing secret
        if request.path == "/":
            if not self._token_ok(request.query.get("token") or request.cookies.get(COOKIE)):
                raise web.HTTPForbidden(text="infertop: open the URL with its token (see `infertop serve`)\n")
            response = await handler(request)
            if self.token is not None:
                response.set_cookie(COOKIE, self.token, httponly=True, samesite="Strict")
            return response
        if request.path == "/ws":
            if not self._token_ok(request.cookies.get(COOKIE)):
                raise web.HTTPForbidden(text="no token\n")
            if not self._origin_ok(request):
                raise web.HTTPForbidden(text="cross-origin websocket refused\n")
            if self.viewers >= self.max_viewers:
                raise web.HTTPServiceUnavailable(text=f"already {self.max_viewers} viewers\n")
            self.viewers += 1
            try:
                return await handler(request)
            finally:
                self.viewers -= 1
        raise web.HTTPNotFound()


def build_web_app(
    layout_path: Path, host: str, port: int, token: str | None = None, max_viewers: int = 8,
    public_url: str | None = None,
) -> web.Application:
    """The aiohttp application serving the TUI for `layout_path`."""
    server = Server(
        viewer_command(layout_path), host=host, port=port, title="infertop", public_url=public_url,
    )
    public_origin = public_url.rstrip("/") if public_url else None
    guard = Guard(host, port, token, max_viewers, public_origin)
    app = web.Application(middlewares=[guard.middleware])
    aiohttp_jinja2.setup(app, loader=OfflinePageLoader(server.templates_path))
    app.add_routes([
        # the names are the ones textual-serve's page template asks the router for
        web.get("/", server.handle_index, name="index"),
        web.get("/ws", server.handle_websocket, name="websocket"),
        web.static("/static", server.statics_path, name="static"),
    ])
    app["guard"] = guard
    return app
