"""Library warnings go to the debug log, never to the operator's terminal.

A library's warning is addressed to that library's users, the developers: cryptography 51
warns five times about DSA when asyncssh merely imports it, and those ten lines used to stand
above every command's output (and turn a bad layout's one-line error into eleven). Installed
first thing by each process infertop starts (the front door, the scrape worker), this gate
sends every warning that infertop's own code did not raise to the logger
`infertop.library_warnings` at debug level (`infertop -v` shows them); infertop's own
warnings still reach stderr.

It replaces `warnings.showwarning` only, so the filters (`-W`, PYTHONWARNINGS) still decide
what is raised at all: under `-W error` a library's warning is still an error.
"""

from __future__ import annotations

import logging
import os
import warnings
from pathlib import Path
from typing import TextIO

LOGGER_NAME = "infertop.library_warnings"
# the packages whose warnings are infertop's own words (the rooms of docs/architecture.md)
OWN_PACKAGES = ("collectors", "layouts", "monitor", "tui")  # and infertop itself
# held until logging is set up, so `-v` shows what came before; bounded (a loop that warns
# on every call must not grow memory)
HELD_MAX = 200

# infertop's folder as imported (in a source tree its rooms are links to the top-level
# folders), and each room's real folder: warnings name files by their resolved paths
_PACKAGE_DIR = Path(os.path.abspath(__file__)).parent.parent.parent
_OWN_DIRS = tuple(str((_PACKAGE_DIR / name).resolve()) + "/" for name in (".", *OWN_PACKAGES))
# a deprecation is for whoever maintains the caller, even when the caller is infertop
_DEVELOPER_CATEGORIES: tuple[type[Warning], ...] = (DeprecationWarning, PendingDeprecationWarning)

_held: list[logging.LogRecord] = []
_shown_before = warnings.showwarning  # what showed warnings before install(): infertop's go there


def is_own_warning(category: type[Warning], filename: str) -> bool:
    """A warning infertop's own code raised for the operator (not a deprecation)."""
    if issubclass(category, _DEVELOPER_CATEGORIES):
        return False
    try:
        path = str(Path(filename).resolve())
    except (OSError, ValueError):
        return False
    return path.startswith(_OWN_DIRS)


def _show(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    if is_own_warning(category, filename):
        _shown_before(message, category, filename, lineno, file, line)
        return
    logger = logging.getLogger(LOGGER_NAME)
    text = "%s:%s: %s: %s"
    args = (filename, lineno, category.__name__, message)
    if logging.getLogger().handlers or logger.handlers:
        logger.debug(text, *args)
    elif len(_held) < HELD_MAX:
        _held.append(logger.makeRecord(LOGGER_NAME, logging.DEBUG, filename, lineno, text, args, None))


def install() -> None:
    """Route library warnings to the debug log; call before importing any library."""
    global _shown_before
    if warnings.showwarning is not _show:
        _shown_before = warnings.showwarning
    warnings.showwarning = _show


def release_held() -> None:
    """Log what was held before logging was configured (call right after configuring it)."""
    logger = logging.getLogger(LOGGER_NAME)
    held = list(_held)
    _held.clear()
    for record in held:
        if logger.isEnabledFor(record.levelno):
            logger.handle(record)


def installed() -> bool:
    return warnings.showwarning is _show
