"""A metrics backend far behind (VictoriaMetrics answers ~30 s in the past by default) is
said once in the header, with what it means, and never blamed on the nodes; a backend a
scrape interval behind is normal and says nothing."""

from __future__ import annotations

from infertop.monitor.feeds import MonitorFeed
from infertop.monitor.snapshot import BackendView, Snapshot
from infertop.tui.app import InfertopApp
from infertop.tui.header import header_text
from tests.support.tui_helpers import NodeSpec, SyntheticSource, make_layout

NAME = "victoriametrics http://127.0.0.1:8428"


def frame() -> Snapshot:
    specs = [NodeSpec("decode-01")]
    feed = MonitorFeed(make_layout(specs, interval_s=1.0), sources=[SyntheticSource(specs, 1.0)])
    return InfertopApp(feed).feed.monitor.tick(now=0.0)  # type: ignore[attr-defined]


def with_backend(snapshot: Snapshot, behind_s: float | None) -> Snapshot:
    return snapshot.model_copy(update={"backends": [BackendView(name=NAME, behind_s=behind_s)]})


def test_a_backend_far_behind_is_said_once_in_the_header() -> None:
    base = frame()
    far = header_text(with_backend(base, 31.0)).plain
    assert far.count(NAME) == 1
    assert f"{NAME}: its newest sample is 31 s old (nodes are judged against it)" in far


def test_a_backend_close_behind_or_unknown_says_nothing() -> None:
    base = frame()
    for behind in (None, 0.4, 9.9):
        assert NAME not in header_text(with_backend(base, behind)).plain


def test_the_note_is_in_the_snapshot_json() -> None:
    # judged once, in the view model: every viewer (TUI, text, JSON readers) says the same
    said = with_backend(frame(), 31.0).model_dump(mode="json", by_alias=True)["backends"][0]
    assert said["note"].startswith(NAME) and said["behind_s"] == 31.0
    quiet = with_backend(frame(), 2.0).model_dump(mode="json", by_alias=True)["backends"][0]
    assert quiet["note"] is None
