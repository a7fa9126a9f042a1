"""Expansion of host ranges such as ``decode-[01-16]`` or ``gpu-[1-3,7]-ib``."""

from __future__ import annotations

import re

_BRACKET = re.compile(r"\[([^\[\]]*)\]")
_MAX_HOSTS = 100_000


class HostRangeError(ValueError):
    pass


def _expand_part(spec: str) -> list[str]:
    out: list[str] = []
    for item in spec.split(","):
        item = item.strip()
        if not item:
            raise HostRangeError(f"empty item in range [{spec}]")
        if "-" in item:
            lo_s, _, hi_s = item.partition("-")
            if not (lo_s.isdigit() and hi_s.isdigit()):
                raise HostRangeError(f"range item {item!r} is not N-M with digits")
            lo, hi = int(lo_s), int(hi_s)
            if hi < lo:
                raise HostRangeError(f"range {item!r} runs backwards")
            width = len(lo_s) if lo_s.startswith("0") and len(lo_s) > 1 else 0
            out.extend(str(i).zfill(width) for i in range(lo, hi + 1))
        elif item.isdigit():
            out.append(item)
        else:
            raise HostRangeError(f"range item {item!r} is not a number")
        if len(out) > _MAX_HOSTS:
            raise HostRangeError(f"range expands to more than {_MAX_HOSTS} hosts")
    return out


def expand_hosts(pattern: str) -> list[str]:
    """Expand every ``[...]`` group; several groups multiply (``r[1-2]g[1-2]`` → 4 names)."""
    if "[" not in pattern and "]" not in pattern:
        return [pattern]
    match = _BRACKET.search(pattern)
    if match is None:
        raise HostRangeError(f"unbalanced brackets in {pattern!r}")
    head, tail = pattern[: match.start()], pattern[match.end() :]
    names: list[str] = []
    for piece in _expand_part(match.group(1)):
        for rest in expand_hosts(tail):
            names.append(head + piece + rest)
            if len(names) > _MAX_HOSTS:
                raise HostRangeError(f"range expands to more than {_MAX_HOSTS} hosts")
    if any(c in head for c in "[]"):
        raise HostRangeError(f"unbalanced brackets in {pattern!r}")
    return names
