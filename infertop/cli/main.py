"""The one entry point, `infertop`. Exit codes: 0 ok, 2 bad input, 1 anything else.

The program is assembled here, in one place: the subcommands are the modules listed in
`SUBCOMMANDS`, each with `NAME`, `HELP`, `add_arguments(parser)` and `run(args) -> int`;
no subcommand is the live TUI (`infertop.cli.tui`). Textual loads only for the commands
that draw.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import NoReturn

from infertop import __version__
from infertop.cli import (
    attach,
    completion,
    demo,
    export,
    phase,
    ps,
    record,
    records,
    replay,
    report,
    serve,
    snapshot,
    stop,
    tui,
)
from infertop.cli.common import (
    EXIT_BAD_INPUT,
    EXIT_OK,
    LOG_FORMAT,
    InertFormatter,
    Parser,
    UsageError,
    add_interval_arg,
    inert_excepthook,
    say,
)
from infertop.collectors.process import library_warnings
from infertop.layouts import LayoutError

SUBCOMMANDS: tuple[ModuleType, ...] = (
    snapshot, record, attach, ps, stop, phase, report, replay, export, demo, records, serve, completion,
)


def add_global_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags before any subcommand (the live TUI's)."""
    parser.add_argument("--version", action="version", version=f"infertop {__version__}")
    parser.add_argument("--layout", metavar="FILE", help="layout file (default: this machine)")
    add_interval_arg(parser)
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging to stderr")
    parser.add_argument("--record", metavar="FILE", default=None,
                        help="session record (default: one per layout in $INFERTOP_STATE_DIR or "
                             "$XDG_STATE_HOME/infertop)")
    parser.add_argument("--no-record", action="store_true", help="do not record the session")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="infertop",
        description="Live terminal monitor for DeepSeek/DeepInfer-style inference clusters.",
    )
    add_global_arguments(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    for command in SUBCOMMANDS:
        command.add_arguments(sub.add_parser(command.NAME, help=command.HELP, description=command.HELP))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    by_name = {command.NAME: command for command in SUBCOMMANDS}
    try:
        args = parser.parse_args(argv)
        handler = logging.StreamHandler()
        handler.setFormatter(InertFormatter(LOG_FORMAT))
        logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING, handlers=[handler])
        library_warnings.release_held()  # what libraries said before logging was set up (-v shows it)
        command = tui if args.command is None else by_name[args.command]
        return int(command.run(args))
    except LayoutError as exc:
        for line in exc.lines():  # every problem of the layout, one line each
            say(f"infertop: {line}")
        return EXIT_BAD_INPUT
    except UsageError as exc:
        say(exc)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return EXIT_OK


def entry() -> NoReturn:
    """The program, once infertop.front_door has put the library-warnings gate in place."""
    from infertop.collectors.process.gctune import tune_gc
    from infertop.collectors.process.stopping import leave

    tune_gc()  # a process of its own: long-running commands collect garbage less often
    sys.excepthook = inert_excepthook
    # not sys.exit alone: a worker thread stuck in a read would hold the exit forever
    leave(main())
