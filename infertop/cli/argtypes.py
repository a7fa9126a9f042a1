"""argparse `type=` converters shared by every subcommand: one wording for one mistake."""

from __future__ import annotations

import argparse

from infertop.layouts.model import MAX_INTERVAL_S, MAX_WINDOW_S


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0:  # also refuses nan
        raise argparse.ArgumentTypeError(f"{text!r} must be greater than 0")
    if value == float("inf"):  # no count of seconds or speed-up means anything there
        raise argparse.ArgumentTypeError(f"{text!r} must be a finite number")
    return value


def interval_s(text: str) -> float:
    """A poll interval: as `positive_float`, at most the layout's own bound."""
    value = positive_float(text)
    if value > MAX_INTERVAL_S:
        raise argparse.ArgumentTypeError(f"{text!r} is longer than {MAX_INTERVAL_S:.0f} s")
    return value


def window_s(text: str) -> float:
    """A window to collect over: as `positive_float`, at most the layout's `window_s` bound."""
    value = positive_float(text)
    if value > MAX_WINDOW_S:
        raise argparse.ArgumentTypeError(f"{text!r} is longer than {MAX_WINDOW_S:.0f} s")
    return value


def whole_number(text: str, low: int | None = None, high: int | None = None, unit: str = "") -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if (low is not None and value < low) or (high is not None and value > high):
        if high is None:
            raise argparse.ArgumentTypeError(f"{text!r} must be at least {low}")
        raise argparse.ArgumentTypeError(f"{value} is out of range: {low} to {high}{unit}")
    return value


def non_negative_int(text: str) -> int:
    return whole_number(text, low=0)


_AGE_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 7 * 86400.0}


def age_s(text: str) -> float:
    """An age such as `7d`, `12h`, `30m`, `90s` or plain seconds, in seconds (> 0)."""
    number, unit = (text[:-1], text[-1]) if text[-1:].lower() in _AGE_UNITS else (text, "s")
    try:
        value = float(number) * _AGE_UNITS[unit.lower()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an age (e.g. 7d, 12h, 30m, 90s)") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} must be a positive age")
    return value
