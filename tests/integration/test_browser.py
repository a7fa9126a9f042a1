"""`infertop serve`: the TUI in a real browser (issue 18, "A browser view").

The demo's cluster is served over real HTTP in a subprocess; `infertop serve` runs as the
user would start it; Playwright drives Debian's chromium (no browser download) to load
the page. What the browser receives over the websocket is the viewer's screen; the test
reads it there (the terminal itself is drawn on a canvas) and saves a screenshot.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import socket
import subprocess
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from infertop.monitor.channel.client import list_monitors
from infertop.monitor.channel.protocol import Info
from tests.support.demo_server import serving_demo
from tests.support.infertop_cmd import finish, start_infertop
from tests.support.waiting import until, until_async

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
playwright = pytest.importorskip("playwright.async_api")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (make system-deps)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_http(url: str, proc: subprocess.Popen[str], timeout_s: float = 30.0) -> None:
    def answering() -> bool:
        try:
            urllib.request.urlopen(url, timeout=2)
        except urllib.error.HTTPError:
            pass  # answering (403 without a token)
        return True

    until(answering, timeout_s, "serve to answer", every_s=0.2, ignore=(OSError,),
          gave_up=lambda: proc.poll() is not None,
          detail=lambda: proc.communicate() if proc.poll() is not None else "")


@contextlib.contextmanager
def serving(layout: Path, state: Path, *flags: str, listen: str = "127.0.0.1") -> Iterator[tuple[str, list[str]]]:
    """`infertop serve` running; yields its URL and, once stopped, its stderr (in the list)."""
    port = _free_port()
    public = ("--public-url", f"http://127.0.0.1:{port}") if listen == "0.0.0.0" else ()
    proc = start_infertop("serve", "--layout", str(layout), "--listen", f"{listen}:{port}", *public, *flags,
                          env={"INFERTOP_STATE_DIR": str(state)})
    url = f"http://127.0.0.1:{port}/"
    said: list[str] = []
    try:
        _wait_http(url, proc)
        yield url, said
    finally:
        proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            said.append(proc.communicate(timeout=15)[1])
        if proc.poll() is None:
            proc.kill()
        # the monitor serve started outlives it (like one a TUI starts): stop it
        finish(start_infertop("stop", "--layout", str(layout), env={"INFERTOP_STATE_DIR": str(state)}))


async def _screen_text(url: str, shot: Path, keys: str = "", wait_for: tuple[bytes, ...] = ()) -> bytes:
    """Load `url` in chromium; return what its websocket received once every `wait_for`
    has arrived (after pressing `keys`)."""
    async with playwright.async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page = await browser.new_page(viewport={"width": 1600, "height": 900})
            frames: list[bytes] = []
            page.on("websocket", lambda ws: ws.on(
                "framereceived", lambda data: frames.append(data if isinstance(data, bytes) else data.encode())))
            await page.goto(url)

            def shown(needles: tuple[bytes, ...]) -> Callable[[], bool]:
                return lambda: all(n in b"".join(frames) for n in needles)

            await until_async(shown((b"NODE", b"hunt list")), 60, "the node table and hunt list",
                              every_s=0.25, detail=lambda: f"{len(frames)} frames")
            if keys:
                await page.locator("body").click()
                await page.keyboard.type(keys)
                await until_async(shown(wait_for), 60, f"{wait_for!r}", every_s=0.25,
                                  detail=lambda: f"{len(frames)} frames")
            await page.screenshot(path=str(shot))
            return b"".join(frames)
        finally:
            await browser.close()


def test_the_browser_shows_the_node_table_and_hunt_list_and_takes_keys(tmp_path: Path) -> None:
    layout = tmp_path / "demo.toml"
    with serving_demo(layout, "--nodes", "8"), serving(layout, tmp_path / "state") as (url, _):
        seen = asyncio.run(_screen_text(url, tmp_path / "browser.png", keys="?", wait_for=(b"keys",)))
    assert b"decode-03" in seen and b"prefill-02" in seen  # the node table's rows
    assert b"hunt list" in seen
    assert b"infertop \xe2\x80\x94 keys" in seen  # "?" pressed in the browser opened the help
    assert (tmp_path / "browser.png").stat().st_size > 10_000


def test_no_request_leaves_the_host(tmp_path: Path) -> None:
    """An offline cluster's browser view: every request the page makes (its styles, scripts,
    font, websocket) goes to the serving host; the font textual-serve's page would fetch
    from a public font CDN comes from textual-serve's own static folder, served here."""
    layout = tmp_path / "demo.toml"

    async def requests_of(url: str) -> tuple[list[str], str]:
        async with playwright.async_playwright() as p:
            browser = await p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            try:
                page = await browser.new_page()
                asked: list[str] = []
                page.on("request", lambda request: asked.append(request.url))
                frames: list[bytes] = []
                page.on("websocket", lambda ws: (asked.append(ws.url), ws.on(
                    "framereceived", lambda d: frames.append(d if isinstance(d, bytes) else d.encode()))))
                await page.goto(url)
                await until_async(lambda: b"NODE" in b"".join(frames), 60, "the node table", every_s=0.25)
                await page.wait_for_load_state("networkidle")
                return asked, await page.content()
            finally:
                await browser.close()

    with serving_demo(layout, "--nodes", "2"), serving(layout, tmp_path / "state") as (url, _):
        asked, html = asyncio.run(requests_of(url))
    origin = url.split("://", 1)[1].rstrip("/")
    assert asked, "the page made no request at all"
    elsewhere = [u for u in asked if u.split("://", 1)[1].split("/", 1)[0] != origin]
    assert not elsewhere, elsewhere
    assert any(u.startswith(("ws://", "http://")) and "/ws" in u for u in asked), asked  # the viewer's socket
    # the font textual-serve ships, asked of this server (the page names no other host)
    assert "googleapis" not in html and "RobotoMono-VariableFont_wght.ttf" in html


def test_two_browsers_are_two_viewers_of_one_monitor(tmp_path: Path) -> None:
    layout = tmp_path / "demo.toml"
    state = tmp_path / "state"

    async def two_pages(url: str) -> int:
        async with playwright.async_playwright() as p:
            browser = await p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            try:
                pages = [await browser.new_page() for _ in range(2)]
                seen: list[list[bytes]] = [[], []]
                for page, frames in zip(pages, seen, strict=True):
                    page.on("websocket", lambda ws, frames=frames: ws.on(
                        "framereceived", lambda d, frames=frames: frames.append(d if isinstance(d, bytes) else d.encode())))
                    await page.goto(url)
                await until_async(lambda: all(b"NODE" in b"".join(f) for f in seen), 60,
                                  "both pages to draw the node table", every_s=0.25)

                # a page draws its table header before its viewer has subscribed to the
                # monitor (the CI run saw 1 here once): wait for both to be counted
                def the_monitor() -> Info:
                    monitors = [info for _, info in list_monitors(state) if isinstance(info, Info)]
                    assert len(monitors) == 1, monitors
                    return monitors[0]

                with contextlib.suppress(AssertionError):  # the count is asserted below
                    await until_async(lambda: the_monitor().viewers == 2, 60, "two viewers", every_s=0.25)
                return the_monitor().viewers
            finally:
                await browser.close()

    with serving_demo(layout, "--nodes", "4"), serving(layout, state) as (url, said):
        assert asyncio.run(two_pages(url)) == 2
    assert "started the monitor" in said[0]


def test_off_loopback_a_token_guards_the_page_and_a_foreign_origin_is_refused(tmp_path: Path) -> None:
    layout = tmp_path / "demo.toml"
    state = tmp_path / "state"
    # listening on every address (the test only ever connects over loopback): a token is
    # made, written with the URL to a private file, and never printed
    with serving_demo(layout, "--nodes", "2"), serving(layout, state, listen="0.0.0.0") as (url, said):
        (url_file,) = state.glob("serve-*.url")
        assert url_file.stat().st_mode & 0o777 == 0o600
        with_token = url_file.read_text().strip()
        token = with_token.split("token=", 1)[1]
        assert len(token) >= 24 and with_token.startswith(url)
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(url, timeout=5)
        assert refused.value.code == 403
        with pytest.raises(urllib.error.HTTPError) as wrong:
            urllib.request.urlopen(url + "?token=" + "x" * len(token), timeout=5)
        assert wrong.value.code == 403
        with urllib.request.urlopen(with_token, timeout=5) as ok:
            assert ok.status == 200
            cookie = ok.headers["Set-Cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
        ws = url.replace("http://", "") + "ws"
        # a websocket handshake from a page on another origin, even with the cookie: refused
        foreign = _handshake(ws, cookie.split(";")[0], origin="http://evil.example")
        assert foreign.startswith("HTTP/1.1 403"), foreign
        without = _handshake(ws, "", origin=url.rstrip("/"))
        assert without.startswith("HTTP/1.1 403"), without
        same = _handshake(ws, cookie.split(";")[0], origin=url.rstrip("/"))
        assert same.startswith("HTTP/1.1 101"), same
    assert token not in said[0] and "to the network" in said[0] and str(url_file) in said[0]


def test_on_loopback_another_host_name_is_refused(tmp_path: Path) -> None:
    """DNS rebinding: a name that resolves to 127.0.0.1 but is not this server's."""
    layout = tmp_path / "demo.toml"
    with serving_demo(layout, "--nodes", "2"), serving(layout, tmp_path / "state") as (url, _):
        request = urllib.request.Request(url, headers={"Host": "attacker.example:80"})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=5)
        assert refused.value.code == 421


def _handshake(host_path: str, cookie: str, origin: str) -> str:
    host, _, path = host_path.partition("/")
    name, _, port = host.partition(":")
    with socket.create_connection((name, int(port)), timeout=5) as s:
        s.sendall((
            f"GET /{path}?width=80&height=24 HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\n"
            "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
            f"Sec-WebSocket-Version: 13\r\nOrigin: {origin}\r\n"
            + (f"Cookie: {cookie}\r\n" if cookie else "") + "\r\n"
        ).encode())
        return s.recv(4096).decode("latin-1")
