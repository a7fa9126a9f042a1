"""How timeline events and engine settings read on screen. Pure (Rich `Text` only); every
piece of outside text (node names, settings, details) goes through `tui.text.inert`."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from rich.text import Text

from infertop.monitor.snapshot import NodeView, TimelineEventView
from infertop.tui.columns import GREY, TROUBLE, WARN
from infertop.tui.text import inert

# how each kind of event is coloured: trouble red, change yellow, the rest plain
KIND_STYLE: dict[str, str] = {
    "restart": TROUBLE,
    "health": TROUBLE,
    "verdict-onset": WARN,
    "config-change": WARN,
    "preemption-burst": WARN,
    "verdict-clear": GREY,
    "phase": "bold",
}


def clock(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%H:%M:%S")


def event_line(event: TimelineEventView, with_node: bool = True) -> Text:
    """"12:03:04  restart   decode-02  engine restarted: …" on one line."""
    line = Text(no_wrap=True, overflow="ellipsis")
    line.append(clock(event.at), GREY)
    line.append("  ")
    line.append(inert(event.kind, max_len=18).plain.ljust(16), KIND_STYLE.get(event.kind, ""))
    if with_node:
        line.append(inert(event.node or "cluster", max_len=24).plain.ljust(14))
    line.append(" ")
    line.append(inert(event.detail, max_len=300).plain)
    return line


def node_events(events: Sequence[TimelineEventView], node: str, limit: int = 12) -> list[TimelineEventView]:
    """The node's own events and the cluster's (phase marks), newest `limit`."""
    return [e for e in events if e.node in (node, None)][-limit:]


def settings_text(node: NodeView) -> Text:
    """The engine's settings, one a line; those that differ from the pool marked with
    "≠" and the pool's value beside them."""
    out = Text()
    settings = node.engine.settings if node.engine is not None else None
    if not settings:
        out.append("no settings served (vLLM's vllm:cache_config_info)", GREY)
        return out
    drift = {d.setting: d for d in node.config_drift}
    for key, value in settings.items():
        d = drift.get(key)
        out.append("≠ " if d else "  ", WARN if d else "")
        out.append(inert(key, max_len=64).plain, WARN if d else GREY)
        out.append(" = ")
        out.append(inert(value, max_len=120).plain, WARN if d else "")
        if d is not None:
            out.append(f"   pool: {inert(d.pool_value, max_len=120).plain} "
                       f"({d.pool_agreeing} of {d.pool_reporting} nodes)", GREY)
        out.append("\n")
    out.rstrip()
    return out
