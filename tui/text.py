"""Text from the outside world (node, NIC and GPU names, errors, notes), made inert.

Such text may carry Rich markup (``[red]x[/]``, ``[link=…]``) or terminal escapes
(``\\x1b[31m``, OSC 8 hyperlinks, bidi overrides). It is never parsed as markup: it
goes into a `rich.text.Text` as plain characters, after the one sanitiser
(`collectors.safe_text.inert_text`) has written every control character out visibly
(``\\x1b``), so that it cannot move the cursor or restyle the terminal.
"""

from __future__ import annotations

from rich.style import Style
from rich.text import Text

from infertop.monitor.format import inert_text


def inert(value: object, style: str | Style = "", max_len: int = 200) -> Text:
    """A `Text` showing `value` literally (markup characters included)."""
    return Text(inert_text(value, max_len), style=style, no_wrap=True, overflow="ellipsis")
