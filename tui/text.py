"""Text from the outside world (node, NIC and GPU names, errors, notes), made inert.

Such text may carry Rich markup (``[red]x[/]``, ``[link=…]``) or terminal escapes
(``\\x1b[31m``, OSC 8 hyperlinks, bidi overrides). It is never parsed as markup: it
goes into a `rich.text.Text` as plain characters, after control characters and escape
sequences are removed so that it cannot move the cursor or restyle the terminal.
"""

from __future__ import annotations

import re

from rich.style import Style
from rich.text import Text

# CSI … final byte, OSC … BEL/ST, other two-byte ESC sequences, then lone C0/C1 controls
# and the bidi overrides that can reorder what the operator reads.
_ESCAPES = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"
    r"|\x1b[@-Z\\-_]"
    r"|[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]"
)
_WHITESPACE = re.compile(r"[\t\n\r]+")


def clean(value: object, max_len: int = 200) -> str:
    """Printable, single-line text of `value`, at most `max_len` characters."""
    text = _WHITESPACE.sub(" ", str(value))
    text = _ESCAPES.sub("", text)
    return text if len(text) <= max_len else text[: max_len - 1] + "…"


def inert(value: object, style: str | Style = "", max_len: int = 200) -> Text:
    """A `Text` showing `value` literally (markup characters included)."""
    return Text(clean(value, max_len), style=style, no_wrap=True, overflow="ellipsis")
