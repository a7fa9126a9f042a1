"""Text fit to be shown or stored: no terminal controls, no secrets.

Three jobs, one module, used by every room (collectors, the CLI, the report, the TUI):

- `inert_text`: the one sanitiser for anything that reaches a terminal. Text from nodes,
  exporters, engines, records and layouts may carry terminal controls (ESC sequences
  that set the window title or clear the screen, C1 controls such as CSI 0x9b that some
  terminals obey, BEL, DEL) or bidi overrides that reorder what the operator reads. Each
  such character is shown *visibly* as a Python-style escape (``\\x1b``, ``\\u202e``) —
  never obeyed, never silently dropped — and the result is one bounded line.
- `redact_url` / `redact_text`: passwords and tokens never leave in a message or a
  record: the userinfo of a URL, secret-looking query parameters (``token``,
  ``access_token``, ``apikey``, ``key``, ``password``, ``secret``, ``auth…``) and,
  where the caller knows them (`url_secrets`), the exact secret strings.
- `whole_number`: digits from a label, a header, a file or a setting read as a number
  only when they are ASCII digits: `str.isdigit()` alone takes '²' (which `int()`
  refuses: a hostile label once crashed a parser) and '٣' (which `int()` reads as 3).

Stdlib only, Python 3.7+: the SSH probe bundles this file (collectors/probe/bundle.py)
so that the node's own error lines are redacted before they travel.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache
from urllib.parse import unquote

SECRET_MARK = "***"  # noqa: S105 - the mark that replaces secrets, not one
# secrets shorter than this are not scrubbed from free text: replacing every "ab" would
# make the message unreadable, and such a secret is no secret
MIN_SCRUB_CHARS = 3

# a query key is secret when it is (or ends in) one of these words, or starts with "auth"
_TEXT_SECRET_KEY = re.compile(
    r"(?:^|[_.-])(?:token|secret|password|passwd|pwd|pass|apikey|api[_-]?key|key|"
    r"credentials?|signature|sig|sessionid|session)$|^auth",
    re.IGNORECASE,
)
# RFC 3986 appendix B: splits any string into scheme, //authority, path, ?query, #fragment
# (never raises, unlike urlsplit on a stray bracket; the text is kept as it was written)
_TEXT_URL_PARTS = re.compile(r"^([^:/?#]+:)?(//[^/?#]*)?([^?#]*)(\?[^#]*)?(#.*)?$", re.DOTALL)
_TEXT_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>`\\]+")
# `key=value` anywhere in free text (a query string quoted without its URL, a log line)
_TEXT_PARAM = re.compile(r"(?<![A-Za-z0-9_.%-])([A-Za-z0-9_.%-]+)=([^\s&;#'\"<>`]*)")
_TEXT_QUERY_PARAM = re.compile(r"(^|[?#&;])([^=&;?#]*)=([^&;#]*)")
_TEXT_AUTH_HEADER = re.compile(
    r"(?i)\b(authorization|x-api-key|api-key)(\s*[:=]\s*)((?:bearer|basic|digest|token)\s+)?\S+"
)
_TEXT_BEARER = re.compile(r"(?i)\b(bearer)(\s+)[A-Za-z0-9._~+/=-]+")
# what makes redaction worth running at all (the common case: a plain line, skipped fast)
_TEXT_SECRET_HINT = re.compile(r"=|://|(?i:bearer|authorization|api-key)")
_TEXT_LINE_BREAKS = re.compile(r"[\t\n\r\x0b\x0c]+")


def _is_secret_key(key: str) -> bool:
    return _TEXT_SECRET_KEY.search(unquote(key)) is not None


def _redact_query(query: str) -> str:
    def one(m: re.Match[str]) -> str:
        if not _is_secret_key(m.group(2)):
            return m.group(0)
        return f"{m.group(1)}{m.group(2)}={SECRET_MARK}"

    return _TEXT_QUERY_PARAM.sub(one, query)


def _url_parts(url: str) -> tuple[str, str, str, str, str]:
    """(scheme:, //authority, path, ?query, #fragment), each with its delimiter or ""."""
    m = _TEXT_URL_PARTS.match(url)
    assert m is not None  # every part is optional: the pattern matches any string
    return (m.group(1) or "", m.group(2) or "", m.group(3), m.group(4) or "", m.group(5) or "")


# a monitor redacts the same few hundred URLs three times a page, 384 pages a second
@lru_cache(maxsize=4096)
def redact_url(url: str) -> str:
    """The URL with its userinfo and its secret-looking query values replaced by ***.

    Everything else is kept as written (a malformed URL stays readable)."""
    scheme, authority, path, query, fragment = _url_parts(url)
    if "@" in authority:
        # the last @ ends the userinfo (as urllib reads it); keep host:port text as given
        authority = "//" + SECRET_MARK + "@" + authority.rpartition("@")[2]
    # OAuth's implicit flow puts tokens in the fragment
    return scheme + authority + path + _redact_query(query) + _redact_query(fragment)


def url_secrets(url: str | None) -> list[str]:
    """The secret parts of a URL (password, secret query values), raw and decoded.

    For `redact_text(text, secrets)`: an exception may quote them without their URL
    (urllib: ``nonnumeric port: 's3cret@host'``).
    """
    if not url:
        return []
    _, authority, _, query, fragment = _url_parts(url)
    found = []
    userinfo = authority[2:].rpartition("@")[0]
    if userinfo:
        found.append(userinfo)
        found.append(userinfo.partition(":")[2])
    for piece in (query[1:], fragment[1:]):
        for m in _TEXT_QUERY_PARAM.finditer(piece):
            if _is_secret_key(m.group(2)):
                found.append(m.group(3))
    out: list[str] = []
    for secret in found:
        for form in (secret, unquote(secret)):
            if len(form) >= MIN_SCRUB_CHARS and form not in out:
                out.append(form)
    # longest first: "user:pw" goes before "pw", so the whole is replaced, not a part
    return sorted(out, key=len, reverse=True)


def redact_text(text: str, secrets: Iterable[str] = ()) -> str:
    """Free text with secrets replaced by ***: every URL in it (see `redact_url`),
    `key=value` pairs whose key looks secret, Authorization / Bearer values, and each of
    `secrets` (exact strings the caller knows, e.g. from `url_secrets`)."""
    for secret in secrets:
        if len(secret) >= MIN_SCRUB_CHARS:
            text = text.replace(secret, SECRET_MARK)
    if _TEXT_SECRET_HINT.search(text) is None:
        return text
    text = _TEXT_URL.sub(lambda m: redact_url(m.group(0)), text)
    text = _TEXT_AUTH_HEADER.sub(lambda m: m.group(1) + m.group(2) + SECRET_MARK, text)
    text = _TEXT_BEARER.sub(lambda m: m.group(1) + m.group(2) + SECRET_MARK, text)

    def param(m: re.Match[str]) -> str:
        if not m.group(2) or m.group(2) == SECRET_MARK or not _is_secret_key(m.group(1)):
            return m.group(0)
        return m.group(1) + "=" + SECRET_MARK

    return _TEXT_PARAM.sub(param, text)


def _visible(char: str) -> str:
    """One non-printable character as a visible escape (or a space for a space)."""
    code = ord(char)
    if code > 0x9F and char.isspace():
        return " "  # NBSP, ideographic space, line separator: spacing, not control
    if code < 0x100:
        return f"\\x{code:02x}"  # C0, DEL, C1 (NEL 0x85 is "space" to Python: a control here)
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def inert_text(value: object, max_len: int = 200) -> str:
    """`value` as one printable, bounded line that is safe on a terminal and in a record.

    Tabs and line breaks become one space (one line cannot be forged into two); every
    other character that `str.isprintable` rejects — C0 and C1 controls (ESC, BEL, CSI
    0x9b, OSC 0x9d), DEL, bidi overrides and isolates (U+202A–U+202E, U+2066–U+2069,
    U+200E/F, U+061C) and other format characters, lone surrogates — is written as a
    visible escape (``\\x1b``, ``\\u202e``). Secrets are redacted (`redact_text`).
    At most `max_len` characters; a cut is marked with "…". Idempotent.
    """
    text = value if isinstance(value, str) else str(value)
    # bound the work before the scan; generous so that a URL cut here is cut far beyond
    # what is shown (a cut userinfo could no longer be recognised as one)
    limit = 4 * max_len + 1024
    if len(text) > limit:
        text = text[:limit]
    text = redact_text(text)
    if not text.isprintable():
        text = _TEXT_LINE_BREAKS.sub(" ", text)
        if not text.isprintable():
            text = "".join(c if c.isprintable() else _visible(c) for c in text)
    if len(text) > max_len:
        text = text[: max(max_len - 1, 0)] + "…"
    return text


def whole_number(text: str, max_digits: int | None = None) -> int | None:
    """`text` as a whole number ≥ 0 when it is ASCII digits only (at most `max_digits` of
    them, where given); None otherwise."""
    if text.isascii() and text.isdigit() and (max_digits is None or len(text) <= max_digits):
        return int(text)
    return None
