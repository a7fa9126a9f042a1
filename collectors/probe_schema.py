"""Probe readings (JSON objects) → `NodeSample`. Shared by the local and SSH sources.

The text comes from another machine: anything malformed becomes an error sample with a
short reason, never an exception.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from collectors.sample import EngineSample, GpuSample, HostSample, NicSample, NodeSample

_NIC_FIELDS = set(NicSample.model_fields)
_GPU_FIELDS = set(GpuSample.model_fields)
_HOST_FIELDS = set(HostSample.model_fields)
_ENGINE_FIELDS = set(EngineSample.model_fields)


def _pick(obj: Any, allowed: set[str]) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise TypeError(f"expected an object, got {type(obj).__name__}")
    return {k: v for k, v in obj.items() if k in allowed}


def sample_from_reading(node: str, source: str, reading: Any, taken_at: float) -> NodeSample:
    """Convert one probe reading. `taken_at` is the receiver's clock (node clocks drift)."""
    try:
        if not isinstance(reading, dict):
            raise TypeError("reading is not a JSON object")
        gpus = reading.get("gpus")
        nics = reading.get("nics")
        host = reading.get("host")
        engine = reading.get("engine")
        notes = reading.get("notes") or []
        if isinstance(engine, dict) and isinstance(engine.get("log_last_line_at"), int | float):
            # the node's clock stamped the log line: move it onto the receiver's clock
            sent_at = reading.get("t")
            if isinstance(sent_at, int | float):
                engine = {**engine, "log_last_line_at": engine["log_last_line_at"] + taken_at - sent_at}
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
    except (ValidationError, TypeError, ValueError) as exc:
        first = str(exc).splitlines()[0][:200]
        return NodeSample(
            node=node, source=source, taken_at=taken_at, error=f"bad probe reading: {first}"
        )
