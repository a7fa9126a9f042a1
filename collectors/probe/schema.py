"""Probe readings (JSON objects) → `NodeSample`. Shared by the local and SSH sources.

The text comes from another machine: anything malformed becomes an error sample with a
short reason (`sample_from_reading`) or a `BadReading` (`parse_reading_line`,
`reading_sample`), never any other exception: not a RecursionError from a line nested
100,000 deep, not an OverflowError from a 400-digit integer.
"""

from __future__ import annotations

import json
import math
from typing import Any

from pydantic import ValidationError

from infertop.collectors.sample import EngineSample, GpuSample, HostSample, NicSample, NodeSample

_NIC_FIELDS = set(NicSample.model_fields)
_GPU_FIELDS = set(GpuSample.model_fields)
_HOST_FIELDS = set(HostSample.model_fields)
_ENGINE_FIELDS = set(EngineSample.model_fields)
# what hostile JSON can raise on the way in: a decode error or an integer past Python's
# digit limit (ValueError), nesting past the recursion limit, an integer past any float
_HOSTILE_ERRORS = (ValidationError, TypeError, ValueError, OverflowError, RecursionError)


class BadReading(ValueError):
    """A probe line or reading that is not one: the message says why, in one short line."""


def _pick(obj: Any, allowed: set[str]) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise TypeError(f"expected an object, got {type(obj).__name__}")
    return {k: v for k, v in obj.items() if k in allowed}


def _reason(exc: BaseException) -> str:
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    if isinstance(exc, OverflowError):
        return "a number too large"
    lines = str(exc).splitlines()
    return (lines[0] if lines else type(exc).__name__)[:200]


def parse_reading_line(line: bytes) -> dict[str, Any]:
    """One line of the probe's stream → its JSON object; `BadReading` for anything else."""
    try:
        reading = json.loads(line)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise BadReading(f"not JSON: {_reason(exc)}") from None
    if not isinstance(reading, dict):
        raise BadReading(f"a JSON {type(reading).__name__}, not an object")
    return reading


def _sent_at(reading: dict[str, Any]) -> float | None:
    """The node's clock when it sent the reading (`t`), a finite float, or None."""
    sent = reading.get("t")
    if sent is None:
        return None
    if not isinstance(sent, int | float) or isinstance(sent, bool) or not math.isfinite(float(sent)):
        raise TypeError("t is not a time")
    return float(sent)


def reading_sample(node: str, source: str, reading: Any, taken_at: float) -> NodeSample:
    """Convert one probe reading, or raise `BadReading`. `taken_at` is the receiver's clock
    (node clocks drift)."""
    try:
        if not isinstance(reading, dict):
            raise TypeError("reading is not a JSON object")
        gpus = reading.get("gpus")
        nics = reading.get("nics")
        host = reading.get("host")
        engine = reading.get("engine")
        notes = reading.get("notes") or []
        sent_at = _sent_at(reading)
        if isinstance(engine, dict) and isinstance(engine.get("log_last_line_at"), int | float):
            # the node's clock stamped the log line: move it onto the receiver's clock
            if sent_at is not None:
                line_at = float(engine["log_last_line_at"])  # OverflowError past any float
                engine = {**engine, "log_last_line_at": line_at + taken_at - sent_at}
        return NodeSample(
            node=node,
            source=source,
            taken_at=taken_at,
            gpus=None if gpus is None else [GpuSample(**_pick(g, _GPU_FIELDS)) for g in gpus],
            nics=None if nics is None else [NicSample(**_pick(n, _NIC_FIELDS)) for n in nics],
            host=None if host is None else HostSample(**_pick(host, _HOST_FIELDS)),
            engine=None if engine is None else EngineSample(**_pick(engine, _ENGINE_FIELDS)),
            notes=[str(n)[:200] for n in notes if isinstance(n, str)][:10],
            error=str(reading["error"])[:300] if reading.get("error") else None,
        )
    except _HOSTILE_ERRORS as exc:
        raise BadReading(f"bad probe reading: {_reason(exc)}") from None


def sample_from_reading(node: str, source: str, reading: Any, taken_at: float) -> NodeSample:
    """Convert one probe reading; a malformed one becomes an error sample saying why."""
    try:
        return reading_sample(node, source, reading, taken_at)
    except BadReading as exc:
        return NodeSample(node=node, source=source, taken_at=taken_at, error=str(exc))
