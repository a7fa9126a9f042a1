"""`infertop report RECORD`: Markdown, CSVs and a chart of a session."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from infertop.cli.argtypes import non_negative_int
from infertop.cli.common import EXIT_OK, fail, say
from infertop.monitor.record.report import write_report
from infertop.monitor.record.store import RecordError, Recording

NAME = "report"
HELP = "Markdown summary, CSVs and a chart from a session record"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help="a session record (.sqlite)")
    p.add_argument("--out", metavar="DIR", default=None, help="where to write (default: FILE-report/)")
    p.add_argument("--acceptable-tasks", type=non_negative_int, default=None, metavar="N",
                   help="tasks you count as acceptable, for $ per acceptable task")


def run(args: argparse.Namespace) -> int:
    path = Path(args.file)
    try:
        rec = Recording.load(path)
    except RecordError as exc:
        return fail(str(exc))
    try:
        out = Path(args.out) if args.out else path.with_name(f"{path.stem}-report")
        try:
            written = write_report(rec, out, args.acceptable_tasks)
        except OSError as exc:
            return fail(f"{out}: cannot write the report: {exc.strerror or exc}")
        for p in written:
            say(p, sys.stdout)
        if rec.problems:
            return fail(f"{path}: damaged recording ({rec.problems[0]}); "
                        f"the report covers the {len(rec.ticks)} readable ticks")
        return EXIT_OK
    finally:
        rec.close()
