"""The channel's wire: one JSON object per line, each with a `type`.

Monitor → viewer:
  info      {"type":"info","pid":…,"layout":…,"cluster":…,"record":…,"started_at":…,"viewers":…}
            first line on every connection, and the answer to an `info` command
  snapshot  {"type":"snapshot","snapshot":{infertop.snapshot/1}} to subscribed viewers
  reply     {"type":"reply","id":…,"ok":…,"detail":…} the answer to `mark_phase` / `stop`
  refused   {"type":"refused","detail":…} the last line before the monitor hangs up

Viewer → monitor: `subscribe` (snapshots from now on, starting with the newest),
`info`, `mark_phase` (`phase`), `stop`; each may carry an `id` that its reply repeats.
`interest` (`nodes`: the nodes the viewer shows now) is a hint with no reply: their
per-GPU detail is read every tick (collectors/sources/prom_detail.py).

A snapshot crosses the wire as pydantic's own JSON, fields at their default left out, and
is read back with pydantic, so the viewer's Snapshot equals the monitor's (non-finite
floats are null, as in the record).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from infertop.monitor.record.checks import MAX_SNAPSHOT_BYTES
from infertop.monitor.snapshot import Snapshot, snapshot_json

PROTOCOL_VERSION = 1
# what a viewer may send: a command is a few dozen bytes; a longer line is refused
MAX_COMMAND_BYTES = 64 * 1024
# what the monitor may send: one snapshot (the record's own bound) and its envelope
MAX_FRAME_BYTES = MAX_SNAPSHOT_BYTES + 1024


class _Message(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


class Info(_Message):
    type: Literal["info"] = "info"
    id: int | None = None
    version: int = PROTOCOL_VERSION
    pid: int
    layout: str | None  # the layout file, absolute; None for this machine's built-in layout
    cluster: str
    record: str | None  # the session record being written; None when not recording
    started_at: float  # when this monitor process started (Unix seconds)
    viewers: int  # subscribed viewers right now


class SnapshotFrame(_Message):
    type: Literal["snapshot"] = "snapshot"
    snapshot: Snapshot


class Reply(_Message):
    type: Literal["reply"] = "reply"
    id: int | None = None
    ok: bool
    detail: str = ""


class Refused(_Message):
    type: Literal["refused"] = "refused"
    detail: str


ServerMessage = Annotated[Info | SnapshotFrame | Reply | Refused, Field(discriminator="type")]
SERVER_MESSAGE: TypeAdapter[Info | SnapshotFrame | Reply | Refused] = TypeAdapter(ServerMessage)


class Subscribe(_Message):
    type: Literal["subscribe"] = "subscribe"
    id: int | None = None


class AskInfo(_Message):
    type: Literal["info"] = "info"
    id: int | None = None


class MarkPhase(_Message):
    type: Literal["mark_phase"] = "mark_phase"
    id: int | None = None
    phase: str = Field(max_length=64)


class StopMonitor(_Message):
    type: Literal["stop"] = "stop"
    id: int | None = None


# the rows a screen shows: a few dozen; a line is at most MAX_COMMAND_BYTES anyway
MAX_INTEREST_NODES = 512


class ShowInterest(_Message):
    type: Literal["interest"] = "interest"
    id: int | None = None
    nodes: list[Annotated[str, Field(max_length=256)]] = Field(
        default_factory=list, max_length=MAX_INTEREST_NODES)


AnyCommand = Subscribe | AskInfo | MarkPhase | StopMonitor | ShowInterest
Command = Annotated[AnyCommand, Field(discriminator="type")]
COMMAND: TypeAdapter[AnyCommand] = TypeAdapter(Command)


def line(message: BaseModel) -> bytes:
    """A message as one wire line."""
    return message.model_dump_json(by_alias=True).encode() + b"\n"


def snapshot_line(snapshot_json: bytes) -> bytes:
    """A snapshot frame around a snapshot already written as JSON (written once, sent to
    every viewer)."""
    return b'{"type":"snapshot","snapshot":' + snapshot_json + b"}\n"


def encode_snapshot(snapshot: Snapshot) -> bytes:
    # fields at their default are left out (pydantic fills them back on reading: the same
    # Snapshot): at 128 nodes a frame is 1.7 MB instead of 3.0, read in 26 ms instead of 64;
    # the same text the session record compresses, written once (`snapshot_json`)
    return snapshot_json(snapshot)


def decode_server_line(raw: bytes) -> Info | SnapshotFrame | Reply | Refused:
    """One line from the monitor; pydantic.ValidationError (a ValueError) when malformed."""
    return SERVER_MESSAGE.validate_json(raw)


def decode_command(raw: bytes) -> AnyCommand:
    """One line from a viewer; pydantic.ValidationError (a ValueError) when malformed."""
    return COMMAND.validate_json(raw)
