"""What every subcommand shares: exit codes, one-line output for humans, the layout
and record flags.

Every line printed for a human — an error, a progress line, a log record, a traceback —
goes through `say` or the formatters here, and so through the one sanitiser
(`collectors.safe_text.inert_text`): the text may quote a layout, a node or a record.
"""

from __future__ import annotations

import argparse
import logging
import sys
import traceback
from types import TracebackType
from typing import Any, NoReturn, TextIO

from infertop.cli.argtypes import interval_s
from infertop.collectors.safe_text import inert_text
from infertop.layouts import Layout, LayoutError, load_layout, local_layout
from infertop.layouts.user_config import config_path, load_user_config

EXIT_OK, EXIT_FAIL, EXIT_BAD_INPUT = 0, 1, 2
MAX_MESSAGE_CHARS = 1000
LOG_FORMAT = "%(levelname)s %(name)s: %(message)s"


def say(message: object, stream: TextIO | None = None) -> None:
    """Print one line for a human (stderr unless told): inert, one line, bounded."""
    print(inert_text(message, MAX_MESSAGE_CHARS), file=stream or sys.stderr, flush=True)


def inert_lines(text: str) -> str:
    """Several lines (a log record with its traceback), each through `inert_text`."""
    return "\n".join(inert_text(line, MAX_MESSAGE_CHARS) for line in text.splitlines())


class InertFormatter(logging.Formatter):
    """Log records quote what nodes and files said: the message is one inert line (a node
    cannot forge a second record), a traceback keeps its lines, each inert."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        return inert_text(super().formatMessage(record), MAX_MESSAGE_CHARS)

    def formatException(self, ei: Any) -> str:
        return inert_lines(super().formatException(ei))

    def formatStack(self, stack_info: str) -> str:
        return inert_lines(super().formatStack(stack_info))


def inert_excepthook(
    kind: type[BaseException], exc: BaseException, tb: TracebackType | None
) -> None:
    # an unexpected crash still exits 1 with its traceback, but its message is inert
    sys.stderr.write(inert_lines("".join(traceback.format_exception(kind, exc, tb))) + "\n")


class UsageError(Exception):
    """Bad flags or input: one line to stderr, exit 2."""


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message}")


def fail(message: str) -> int:
    """Bad input found while running: one line, exit 2."""
    say(f"infertop: {message}")
    return EXIT_BAD_INPUT


def layout_or_local(path: str | None) -> Layout:
    """The layout at `path`, else the bundled one for this machine."""
    return load_layout(path) if path else local_layout()


def layout_of(args: argparse.Namespace) -> Layout:
    """The layout the command line names (before or after the subcommand), its poll
    interval from, lowest first: the default, the user's config, the layout, `--interval`;
    its `[alerts]` the layout's, else the user's config's."""
    layout = layout_or_local(getattr(args, "layout", None))
    config = load_user_config()
    if "alerts" not in layout.model_fields_set and config.alerts is not None:
        layout = layout.model_copy(update={"alerts": config.alerts})  # the person's bell
    interval = getattr(args, "interval", None)
    if interval is None and "interval_s" not in layout.cluster.model_fields_set:
        interval = config.interval_s
    if interval is None:
        return layout
    return layout.model_copy(update={"cluster": layout.cluster.model_copy(update={"interval_s": interval})})


def user_theme() -> str | None:
    """The TUI theme the user's config names (checked: a wrong name is exit 2, not a crash)."""
    from infertop.tui.app import theme_names  # Textual loads only for the commands that draw

    config = load_user_config()
    if config.theme is not None and config.theme not in theme_names():
        raise LayoutError(str(config_path()), "theme",
                          f"unknown theme {config.theme!r} (known: {', '.join(theme_names())})")
    return config.theme


def add_layout_arg(p: argparse.ArgumentParser, interval: bool = True) -> None:
    # SUPPRESS keeps `infertop --layout F snapshot` working: a subparser default would
    # otherwise overwrite the top-level value with None
    p.add_argument(
        "--layout", metavar="FILE", default=argparse.SUPPRESS,
        help="layout file (default: this machine)",
    )
    if interval:
        add_interval_arg(p, default=argparse.SUPPRESS)


def add_interval_arg(p: argparse.ArgumentParser, default: object = None) -> None:
    p.add_argument(
        "--interval", type=interval_s, metavar="S", default=default,
        help="poll interval in seconds (overrides the layout's interval_s and the user config)",
    )


def add_record_args(p: argparse.ArgumentParser) -> None:
    """`--record FILE` / `--no-record`, shared by the TUI and `record`."""
    p.add_argument(
        "--record", metavar="FILE", default=argparse.SUPPRESS,
        help="session record file (default: one per layout in the state directory)",
    )
