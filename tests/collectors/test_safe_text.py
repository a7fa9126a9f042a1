"""The one sanitiser and the redaction helpers (collectors/safe_text.py), as plain functions.

The end-to-end proofs (real nodes, servers and commands) are tests/test_hostile_output.py
and tests/test_secrets.py; these pin the rules and hold them for any input (hypothesis).
"""

from __future__ import annotations

import logging
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infertop.cli.common import InertFormatter
from infertop.collectors.safe_text import inert_text, redact_text, redact_url, url_secrets, whole_number

# every character a terminal obeys or that reorders a line, by class
CONTROLS = {
    "nul": "\x00", "bel": "\x07", "backspace": "\x08", "esc": "\x1b", "unit-separator": "\x1f",
    "del": "\x7f", "c1-nel": "\x85", "c1-csi": "\x9b", "c1-osc": "\x9d", "c1-st": "\x9c",
    "lre": "\u202a", "rle": "\u202b", "pdf": "\u202c", "lro": "\u202d", "rlo": "\u202e",
    "lri": "\u2066", "rli": "\u2067", "fsi": "\u2068", "pdi": "\u2069",
    "lrm": "\u200e", "rlm": "\u200f", "alm": "\u061c", "zwsp": "\u200b", "bom": "\ufeff",
    "line-separator": "\u2028", "lone-surrogate": "\udc9b", "tag-char": "\U000e0041",
}


@pytest.mark.hostile
@pytest.mark.parametrize("name", list(CONTROLS))
def test_each_control_is_shown_visibly_never_raw(name: str) -> None:
    char = CONTROLS[name]
    out = inert_text(f"a{char}b")
    assert out.isprintable() and char not in out
    assert out.startswith("a") and out.endswith("b") and len(out) > 2
    assert out.encode("utf-8")  # a lone surrogate would make print() raise


def test_visible_forms() -> None:
    assert inert_text("\x1b]0;t\x07") == "\\x1b]0;t\\x07"
    assert inert_text("\u202eevil") == "\\u202eevil"
    assert inert_text("x\U000e0041") == "x\\U000e0041"
    assert inert_text("one\r\ntwo\tthree") == "one two three"  # one line, never two
    assert inert_text("nb\xa0sp") == "nb sp"
    assert inert_text("[red]markup[/] stays") == "[red]markup[/] stays"
    assert inert_text(None) == "None" and inert_text(3.5) == "3.5"


@given(st.text(), st.integers(min_value=1, max_value=300))
def test_inert_text_is_printable_bounded_and_idempotent(raw: str, max_len: int) -> None:
    out = inert_text(raw, max_len)
    assert out.isprintable() and len(out) <= max_len
    assert inert_text(out, max_len) == out


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://h:1/m", "http://h:1/m"),
        ("http://user:pw@h:1/m", "http://***@h:1/m"),
        ("http://us@er:p@ss@h/m", "http://***@h/m"),  # the last @ ends the userinfo
        ("http://h/m?token=T&job=x", "http://h/m?token=***&job=x"),
        ("http://h/m?x=1&access_token=T", "http://h/m?x=1&access_token=***"),
        ("http://h/m?APIKEY=T;api_key=U&x-api-key=V", "http://h/m?APIKEY=***;api_key=***&x-api-key=***"),
        ("http://h/m?key=T&monkey=ok", "http://h/m?key=***&monkey=ok"),
        ("http://h/m?Password=T&client_secret=U&authz=V", "http://h/m?Password=***&client_secret=***&authz=***"),
        ("http://h/cb#access_token=T&state=s", "http://h/cb#access_token=***&state=s"),
        ("http://u:p@h:abc/", "http://***@h:abc/"),  # malformed: kept readable, still masked
        ("http://[::1", "http://[::1"),
        ("[link=http://evil]ib0[/link]", "[link=http://evil]ib0[/link]"),
    ],
)
def test_redact_url(url: str, shown: str) -> None:
    assert redact_url(url) == shown


@given(st.text())
def test_redact_url_never_raises(url: str) -> None:
    redact_url(url)
    redact_text(url, url_secrets(url))


def test_redact_text_in_free_text() -> None:
    text = "GET http://a:b@h/m?token=T1 failed; retry ?apikey=T2 with Authorization: Bearer T3xyz"
    out = redact_text(text)
    assert all(t not in out for t in ("a:b", "T1", "T2", "T3xyz"))
    assert "http://***@h/m?token=***" in out and "Authorization: ***" in out
    url = "http://admin:s3cr%40t@h/m?token=longtoken"
    quoted = "nonnumeric port: 's3cr@t@h'; token longtoken"
    assert redact_text(quoted, url_secrets(url)) == "nonnumeric port: '***@h'; token ***"


def test_log_records_are_made_inert() -> None:
    record = logging.LogRecord("x", logging.WARNING, __file__, 1, "node said %s", ("\x1b]0;t\x07\nforged",), None)
    out = InertFormatter("%(message)s").format(record)
    assert out == "node said \\x1b]0;t\\x07 forged"


def test_a_logged_traceback_keeps_its_lines_each_inert() -> None:
    try:
        raise ValueError("bad \x1b[2J value")
    except ValueError:
        record = logging.LogRecord("x", logging.ERROR, __file__, 1, "failed", (), sys.exc_info())
    out = InertFormatter("%(message)s").format(record)
    assert out.startswith("failed\nTraceback") and "ValueError: bad \\x1b[2J value" in out
    assert all(line.isprintable() for line in out.splitlines())


@pytest.mark.parametrize(("text", "max_digits", "want"), [
    ("0", None, 0), ("0042", None, 42), ("123456", 6, 123456), ("1234567", 6, None),
    ("", None, None), ("-1", None, None), ("+1", None, None), (" 1", None, None), ("1.0", None, None),
    ("²", None, None),  # str.isdigit() takes it, int() refuses it
    ("٣", None, None),  # Arabic-Indic three: int() would read it as 3
    ("1\n", None, None),
])
def test_whole_number_takes_ascii_digits_only(text: str, max_digits: int | None, want: int | None) -> None:
    assert whole_number(text, max_digits) == want


@given(st.text(max_size=12))
def test_whole_number_never_raises_and_round_trips(text: str) -> None:
    got = whole_number(text)
    assert got is None or str(got) == text.lstrip("0") or (got == 0 and set(text) == {"0"})
