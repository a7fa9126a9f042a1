"""Messages the TUI passes around. Feeds talk to the app only through `SnapshotArrived`."""

from __future__ import annotations

from textual.message import Message

from infertop.monitor.snapshot import Snapshot


class SnapshotArrived(Message):
    """A new frame from the feed. Latest wins: a queued burst collapses to the newest."""

    def __init__(self, snapshot: Snapshot) -> None:
        super().__init__()
        self.snapshot = snapshot

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, SnapshotArrived)


class OpenNode(Message):
    """Ask the app to open a node's screen (posted by the table, a hunt list, …)."""

    def __init__(self, node: str) -> None:
        super().__init__()
        self.node = node
