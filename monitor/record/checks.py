"""What a session record may hold: bounds and typed checks for every value read back.

A record is a file: whoever could write it could have crafted it (issue 19). A time of
1e12 made `report` split a session into 280 million hours; an amount of "1e999999999"
overflowed the first sum; "NaN" printed `$nan`. Every value read from a record therefore
goes through one of these checks, which return it typed or raise `BadValue` saying which
field is wrong and how, in words short enough for one line.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection
from decimal import Decimal, InvalidOperation
from typing import Any, TypeVar

from infertop.collectors.safe_text import whole_number

T = TypeVar("T")

MIB = 1 << 20
# the biggest layout infertop builds (100,000 hosts) dumps to about 40 MB of JSON, and its
# ledger (a tally row and a spend per node) to about 30 MB: anything past these is not one
MAX_TEXT_BYTES = 64 * MIB
# a snapshot of 1,024 GPUs is about 300 kB of JSON; a tick cannot write 64 MiB a second
MAX_SNAPSHOT_BYTES = 64 * MIB
# a tick a second for 46 days; the report holds every tick in memory (~600 bytes each)
MAX_TICKS = 4_000_000
MAX_NODES = 100_001  # the layout's host limit, and the "(cluster)" row
MAX_MARKS = 100_000  # phase marks are a person's key presses
MAX_TALLY_ROWS = 1_000_000  # (node, source) pairs
MAX_NAME_CHARS = 256
MAX_PATH_CHARS = 4096
MAX_AMOUNT_CHARS = 64  # "0.04320851755142211693980075134" is 31

MIN_UNIX_S = 0.0
MAX_UNIX_S = 4_102_444_800.0  # 2100-01-01T00:00:00Z
MAX_SESSION_S = 2 * 366 * 86_400.0  # the report's hour table: 17,568 rows at most
MAX_USD = Decimal(10) ** 12  # a trillion dollars: a bigger sum is not a bill
MAX_USD_PER_HOUR = 1e9
MAX_COUNT = 1e18  # tokens or requests: a million a second for thirty thousand years
MAX_RATE_PER_S = 1e12


class BadValue(ValueError):
    """A value a record may not hold. `str()` names the field and what is wrong."""


def shown(value: object, limit: int = 40) -> str:
    """A value as it may be quoted in an error: its repr (escapes visible), cut short."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def printable(text: str, limit: int = 200) -> str:
    """`text` as one inert line: every non-printable character (C0/C1 controls, escapes,
    bidi overrides) shown as '?', cut at `limit` characters."""
    line = "".join(c if c.isprintable() else "?" for c in text[: limit + 1])
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _number(value: object, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise BadValue(f"{field}: {shown(value)} is not a number")
    try:
        number = float(value)
    except OverflowError:  # an integer of hundreds of digits
        raise BadValue(f"{field}: {shown(value)} is out of range") from None
    if not math.isfinite(number):
        raise BadValue(f"{field}: {shown(value)} is not a finite number")
    return number


def bounded(value: object, field: str, low: float, high: float) -> float:
    number = _number(value, field)
    if not low <= number <= high:
        raise BadValue(f"{field}: {shown(value)} is outside {low:g}..{high:g}")
    return number


def time_s(value: object, field: str) -> float:
    """Unix seconds between 1970 and 2100."""
    number = _number(value, field)
    if not MIN_UNIX_S <= number <= MAX_UNIX_S:
        raise BadValue(f"{field}: {shown(value)} is not a time between 1970 and 2100")
    return number


def time_text(value: object, field: str) -> float:
    """A time stored as text (the meta table holds `repr(time.time())`)."""
    if not isinstance(value, str) or len(value) > MAX_AMOUNT_CHARS:
        raise BadValue(f"{field}: {shown(value)} is not a time")
    try:
        number = float(value)
    except ValueError:
        raise BadValue(f"{field}: {shown(value)} is not a time") from None
    return time_s(number, field)


def near(at: float, start: float, field: str) -> float:
    """A time of the session: within MAX_SESSION_S of its reservation start."""
    if abs(at - start) > MAX_SESSION_S:
        raise BadValue(f"{field}: {at:.0f} is more than {MAX_SESSION_S / 86_400:.0f} days"
                       f" from the session's start ({start:.0f})")
    return at


def duration_s(value: object, field: str) -> float:
    return bounded(value, field, 0.0, MAX_SESSION_S)


def count(value: object, field: str) -> float:
    return bounded(value, field, 0.0, MAX_COUNT)


def rate_per_s(value: object, field: str) -> float:
    return bounded(value, field, 0.0, MAX_RATE_PER_S)


def usd_per_hour(value: object, field: str) -> float:
    return bounded(value, field, 0.0, MAX_USD_PER_HOUR)


def usd(value: object, field: str) -> float:
    """A dollar figure kept as a float (a budget)."""
    return bounded(value, field, 0.0, float(MAX_USD))


def fraction(value: object, field: str) -> float:
    return bounded(value, field, 0.0, 1.0)


def integer(value: object, field: str, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= high:
        raise BadValue(f"{field}: {shown(value)} is not a whole number in 0..{high}")
    return value


def integer_text(value: object, field: str, high: int) -> int:
    """A whole number stored as text (the meta table's `resumes`)."""
    number = whole_number(value, max_digits=len(str(high))) if isinstance(value, str) else None
    if number is None:
        raise BadValue(f"{field}: {shown(value)} is not a whole number in 0..{high}")
    return integer(number, field, high)


def flag(value: object, field: str) -> bool:
    if not isinstance(value, bool):
        raise BadValue(f"{field}: {shown(value)} is not true or false")
    return value


def amount(value: object, field: str) -> Decimal:
    """An exact dollar amount, stored as text: finite, and at most a trillion either way."""
    if not isinstance(value, str) or len(value) > MAX_AMOUNT_CHARS:
        raise BadValue(f"{field}: {shown(value)} is not an amount of dollars")
    try:
        number = Decimal(value)
    except InvalidOperation:
        raise BadValue(f"{field}: {shown(value)} is not an amount of dollars") from None
    # compared quietly: abs() of 1e999999999 raises decimal.Overflow in the default context
    if not number.is_finite() or number.copy_abs() > MAX_USD:
        raise BadValue(f"{field}: {shown(value)} is not a finite amount up to ${MAX_USD:,}")
    if number and number.adjusted() < -MAX_AMOUNT_CHARS:  # 1e-999999999: no sum makes it
        raise BadValue(f"{field}: {shown(value)} is not an amount of dollars")
    return number


def text(value: object, field: str, limit: int = MAX_NAME_CHARS) -> str:
    if not isinstance(value, str) or len(value) > limit:
        raise BadValue(f"{field}: {shown(value)} is not a text of at most {limit} characters")
    return value


def choice(value: object, field: str, allowed: Collection[str]) -> str:
    if not isinstance(value, str) or value not in allowed:
        raise BadValue(f"{field}: {shown(value)} is not one of {', '.join(sorted(allowed))}")
    return value


def optional(check: Callable[[object, str], T]) -> Callable[[object, str], T | None]:
    """`check`, letting None (unknown) through."""

    def checked(value: object, field: str) -> T | None:
        return None if value is None else check(value, field)

    return checked


def mapping(value: object, field: str, limit: int) -> dict[Any, Any]:
    if not isinstance(value, dict) or len(value) > limit:
        raise BadValue(f"{field}: not an object of at most {limit:,} entries")
    return value


def sequence(value: object, field: str, limit: int) -> list[Any]:
    if not isinstance(value, list) or len(value) > limit:
        raise BadValue(f"{field}: not a list of at most {limit:,} items")
    return value
