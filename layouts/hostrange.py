"""Expansion of host ranges such as ``decode-[01-16]`` or ``gpu-[1-3,7]-ib``.

A pattern is parsed and its size counted before a single name is built: a range
``n[1-100000000]`` or a product of ranges is refused from its width alone.
"""

from __future__ import annotations

import itertools
import re

_BRACKET = re.compile(r"\[([^\[\]]*)\]")
MAX_HOSTS = 100_000
MAX_PATTERN_CHARS = 512  # an expanded name is at most 128 characters anyway
_MAX_DIGITS = 18  # a host number, zero-padded; beyond this it is not a host number


class HostRangeError(ValueError):
    pass


# one `[...]` group: (first, last, zero-pad width) per item
_Group = list[tuple[int, int, int]]


def _parse_item(item: str, spec: str) -> tuple[int, int, int]:
    if not item:
        raise HostRangeError(f"empty item in range [{spec[:40]}]")
    lo_s, dash, hi_s = item.partition("-")
    if not dash:
        hi_s = lo_s
    # ASCII digits only, as collectors.safe_text.whole_number (a room below it: not imported)
    if not (lo_s.isdigit() and hi_s.isdigit() and lo_s.isascii() and hi_s.isascii()):
        what = "N-M with digits" if dash else "a number"
        raise HostRangeError(f"range item {item[:40]!r} is not {what}")
    if len(lo_s) > _MAX_DIGITS or len(hi_s) > _MAX_DIGITS:
        raise HostRangeError(f"range item {item[:40]!r} has more than {_MAX_DIGITS} digits")
    lo, hi = int(lo_s), int(hi_s)
    if hi < lo:
        raise HostRangeError(f"range {item!r} runs backwards")
    width = len(lo_s) if lo_s.startswith("0") and len(lo_s) > 1 else 0
    return lo, hi, width


def _parse(pattern: str) -> tuple[list[str], list[_Group]]:
    """(the literal pieces around the groups, the groups): pieces = groups + 1."""
    if len(pattern) > MAX_PATTERN_CHARS:
        raise HostRangeError(f"pattern longer than {MAX_PATTERN_CHARS} characters")
    pieces: list[str] = []
    groups: list[_Group] = []
    at = 0
    for match in _BRACKET.finditer(pattern):
        pieces.append(pattern[at : match.start()])
        spec = match.group(1)
        groups.append([_parse_item(item.strip(), spec) for item in spec.split(",")])
        at = match.end()
    pieces.append(pattern[at:])
    if any(c in piece for piece in pieces for c in "[]"):
        raise HostRangeError(f"unbalanced brackets in {pattern[:80]!r}")
    return pieces, groups


def _group_size(group: _Group) -> int:
    return sum(hi - lo + 1 for lo, hi, _ in group)


def count_hosts(pattern: str) -> int:
    """How many names `pattern` expands to, without building them (HostRangeError if bad)."""
    total = 1
    for group in _parse(pattern)[1]:
        total *= _group_size(group)
        if total > MAX_HOSTS:  # stop multiplying: the product of 100 groups is huge
            break
    return total


def _numbers(group: _Group) -> list[str]:
    return [str(i).zfill(width) for lo, hi, width in group for i in range(lo, hi + 1)]


def expand_hosts(pattern: str) -> list[str]:
    """Expand every ``[...]`` group; several groups multiply (``r[1-2]g[1-2]`` → 4 names)."""
    pieces, groups = _parse(pattern)
    if count_hosts(pattern) > MAX_HOSTS:
        raise HostRangeError(f"range expands to more than {MAX_HOSTS} hosts")
    names = []
    for combo in itertools.product(*(_numbers(g) for g in groups)):
        parts = [pieces[0]]
        for number, piece in zip(combo, pieces[1:], strict=True):
            parts += [number, piece]
        names.append("".join(parts))
    return names
