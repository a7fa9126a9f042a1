"""`infertop records`: list the session records in the state directory, prune old ones."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from infertop.cli.argtypes import age_s
from infertop.cli.common import EXIT_FAIL, EXIT_OK, say
from infertop.monitor.format import UNKNOWN, fmt_bytes, inert_text
from infertop.monitor.record.catalog import RecordSummary, delete_record, list_records, prune_candidates
from infertop.monitor.record.store import state_dir

NAME = "records"
HELP = "list session records (state directory) and prune old ones"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dir", metavar="DIR", default=None,
                   help="where the records are (default: the state directory)")
    p.add_argument("--prune", type=age_s, metavar="AGE", default=None,
                   help="delete records idle for longer than AGE (7d, 12h, 30m); "
                   "a record being written is never deleted")
    p.add_argument("--dry-run", action="store_true", help="with --prune: say what would go, delete nothing")
    p.add_argument("--json", action="store_true", help="print the list as JSON")


def _when(epoch_s: float | None) -> str:
    return UNKNOWN if epoch_s is None else time.strftime("%Y-%m-%d %H:%M", time.gmtime(epoch_s))


def _row(r: RecordSummary) -> tuple[str, ...]:
    state = "recording" if r.writing else ("unreadable" if r.problem else "ended")
    return (
        inert_text(r.path.name, 80), inert_text(r.cluster or UNKNOWN, 40), _when(r.started_at),
        _when(r.last_tick_at), UNKNOWN if r.ticks is None else f"{r.ticks:,}", fmt_bytes(r.size_bytes),
        state,
    )


def _table(records: list[RecordSummary]) -> str:
    header = ("RECORD", "CLUSTER", "STARTED (UTC)", "LAST TICK", "TICKS", "SIZE", "STATE")
    rows: list[tuple[str, ...]] = [header]
    rows += [_row(r) for r in records]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows)


def _as_json(r: RecordSummary) -> dict[str, object]:
    return {
        "path": str(r.path), "cluster": r.cluster, "started_at": r.started_at,
        "last_tick_at": r.last_tick_at, "ticks": r.ticks, "size_bytes": r.size_bytes,
        "writing": r.writing, "problem": r.problem,
    }


def run(args: argparse.Namespace) -> int:
    directory = Path(args.dir) if args.dir else state_dir()
    records = list_records(directory)
    if args.prune is None:
        if args.json:
            json.dump([_as_json(r) for r in records], sys.stdout, indent=2)
            sys.stdout.write("\n")
        elif records:
            sys.stdout.write(_table(records) + "\n")
        else:
            say(f"infertop: no session records in {directory}")
        return EXIT_OK
    doomed = prune_candidates(records, args.prune, time.time())
    code = EXIT_OK
    for r in doomed:
        if args.dry_run:
            say(f"infertop: would delete {r.path} ({fmt_bytes(r.size_bytes)})")
            continue
        try:
            delete_record(r.path)
        except OSError as exc:
            say(f"infertop: cannot delete {r.path}: {exc.strerror or exc}")
            code = EXIT_FAIL
            continue
        say(f"infertop: deleted {r.path} ({fmt_bytes(r.size_bytes)})")
    kept = len(records) - len(doomed)
    say(f"infertop: {len(doomed)} record(s) {'to delete' if args.dry_run else 'deleted'}, {kept} kept")
    return code
