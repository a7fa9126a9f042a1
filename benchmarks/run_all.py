"""`make bench`: runs every benchmarks/bench_*.py module's `run()` and writes the table.

Each module exposes `run() -> list[Row]`. The table replaces the block between the
markers in BENCHMARKS.md; everything outside the markers (figures measured by hand on a
real GPU, notes) is kept as written.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
import time
import traceback
from pathlib import Path

from benchmarks.common import Row, machine

BEGIN = "<!-- bench:begin -->"
END = "<!-- bench:end -->"
ROOT = Path(__file__).resolve().parent.parent


def table(rows: list[Row]) -> str:
    lines = [
        f"Machine: {machine()}. Produced by `make bench` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.",
        "",
        "| figure | value | target | verdict | command |",
        "| --- | --- | --- | --- | --- |",
    ]
    lines += [f"| {r.figure} | {r.value} | {r.target} | {r.verdict} | `{r.command}` |" for r in rows]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    only = set(argv[1:])
    rows: list[Row] = []
    failed = 0
    import benchmarks

    for info in sorted(pkgutil.iter_modules(benchmarks.__path__), key=lambda m: m.name):
        if not info.name.startswith("bench_") or (only and info.name not in only):
            continue
        print(f"== {info.name}", flush=True)
        try:
            module = importlib.import_module(f"benchmarks.{info.name}")
            got = module.run()
        except Exception:
            traceback.print_exc()
            failed += 1
            rows.append(Row(info.name, "failed", "—", "error", f"python -m benchmarks.run_all {info.name}"))
            continue
        for row in got:
            print(f"   {row.figure}: {row.value} ({row.verdict})", flush=True)
        rows.extend(got)
    path = ROOT / "BENCHMARKS.md"
    text = path.read_text() if path.exists() else f"# Benchmarks\n\n{BEGIN}\n{END}\n"
    if BEGIN not in text:
        text += f"\n{BEGIN}\n{END}\n"
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    if not only:
        path.write_text(f"{head}{BEGIN}\n{table(rows)}\n{END}{tail}")
    print()
    print(table(rows))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
