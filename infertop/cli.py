"""The one entry point, `infertop`. Exit codes: 0 ok, 2 bad input, 1 anything else.

Every line printed for a human — an error, a progress line, a log record, a traceback —
goes through `say` or the formatters here, and so through the one sanitiser
(`collectors.safe_text.inert_text`): the text may quote a layout, a node or a record.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import traceback
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any, NoReturn, TextIO

from collectors.safe_text import inert_text
from infertop import __version__
from infertop.argtypes import positive_float
from layouts import Layout, LayoutError, load_layout, local_layout

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


def _inert_excepthook(
    kind: type[BaseException], exc: BaseException, tb: TracebackType | None
) -> None:
    # an unexpected crash still exits 1 with its traceback, but its message is inert
    sys.stderr.write(inert_lines("".join(traceback.format_exception(kind, exc, tb))) + "\n")


class UsageError(Exception):
    """Bad flags or input: one line to stderr, exit 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message}")



def _layout_or_local(path: str | None) -> Layout:
    return load_layout(path) if path else local_layout()


# ---------------------------------------------------------------------------- commands


def cmd_tui(args: argparse.Namespace) -> int:
    from tui.app import run_tui  # Textual loads only for the TUI

    layout = _layout_or_local(args.layout)
    if not args.no_record:  # the session record is on by default (infertop.session_cli)
        from infertop.session_cli import run_recorded_tui

        return run_recorded_tui(layout, args.record)
    return run_tui(layout)


def cmd_snapshot(args: argparse.Namespace) -> int:
    from infertop.snapshot_cmd import take_snapshot
    from infertop.stopping import Stop, run_stoppable
    from infertop.textreport import snapshot_table

    layout = _layout_or_local(args.layout)
    stop = Stop()
    snapshot = run_stoppable(take_snapshot(layout, args.window, stop=stop), stop)
    if snapshot is None:  # interrupted before the window ended: nothing to show
        return stop.exit_code or EXIT_FAIL
    if args.json:
        # strict JSON: NaN / Infinity are not JSON (to_json_dict has made them null)
        json.dump(snapshot.to_json_dict(), sys.stdout, indent=2, allow_nan=False)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(snapshot_table(snapshot))
    return EXIT_OK


# Later issues register their subcommands here: name → (help, add_arguments, run).
SUBCOMMANDS: dict[
    str,
    tuple[str, Callable[[argparse.ArgumentParser], None], Callable[[argparse.Namespace], int]],
] = {}


def add_layout_arg(p: argparse.ArgumentParser) -> None:
    # SUPPRESS keeps `infertop --layout F snapshot` working: a subparser default would
    # otherwise overwrite the top-level value with None
    p.add_argument(
        "--layout", metavar="FILE", default=argparse.SUPPRESS,
        help="layout file (default: this machine)",
    )


def _add_snapshot(p: argparse.ArgumentParser) -> None:
    add_layout_arg(p)
    p.add_argument(
        "--window", type=positive_float, default=None, metavar="S",
        help="seconds to collect before the snapshot (default: the layout's window_s)",
    )
    p.add_argument("--json", action="store_true", help="print infertop.snapshot/1 JSON")


SUBCOMMANDS["snapshot"] = ("one collection over a window, then exit", _add_snapshot, cmd_snapshot)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="infertop",
        description="Live terminal monitor for DeepSeek/DeepInfer-style inference clusters.",
    )
    parser.add_argument("--version", action="version", version=f"infertop {__version__}")
    parser.add_argument("--layout", metavar="FILE", help="layout file (default: this machine)")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging to stderr")
    parser.add_argument("--record", metavar="FILE", default=None,
                        help="session record (default: one per layout in $INFERTOP_STATE_DIR or "
                             "$XDG_STATE_HOME/infertop)")
    parser.add_argument("--no-record", action="store_true", help="do not record the session")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, (help_text, add_args, _run) in SUBCOMMANDS.items():
        add_args(sub.add_parser(name, help=help_text, description=help_text))
    return parser


def _register_optional_commands() -> None:
    """Import modules that add subcommands (kept apart so each stays small)."""
    import importlib

    for module in ("infertop.demo.cli", "infertop.session_cli", "infertop.exporter_cli"):
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name is None or not module.startswith(exc.name):
                raise


def main(argv: Sequence[str] | None = None) -> int:
    _register_optional_commands()
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        handler = logging.StreamHandler()
        handler.setFormatter(InertFormatter(LOG_FORMAT))
        logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING, handlers=[handler])
        if args.command is None:
            return cmd_tui(args)
        return SUBCOMMANDS[args.command][2](args)
    except (UsageError, LayoutError) as exc:
        say(f"infertop: {exc}" if isinstance(exc, LayoutError) else exc)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return EXIT_OK


def entry() -> NoReturn:
    from infertop.gctune import tune_gc
    from infertop.stopping import leave

    tune_gc()  # a process of its own: long-running commands collect garbage less often
    sys.excepthook = _inert_excepthook
    # not sys.exit alone: a worker thread stuck in a read would hold the exit forever
    leave(main())


if __name__ == "__main__":
    # Run through the canonical module object: plug-in subcommands register into
    # `infertop.cli.SUBCOMMANDS`, which under `python -m` is not this `__main__` module.
    from infertop import cli as _canonical

    _canonical.entry()
