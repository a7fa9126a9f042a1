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
from infertop.collectors.process import library_warnings
from infertop.collectors.process.gctune import tune_gc

BEGIN = "<!-- bench:begin -->"
END = "<!-- bench:end -->"
ROOT = Path(__file__).resolve().parent.parent


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def table(rows: list[Row], durations: dict[str, float] | None = None) -> str:
    lines = [
        f"Machine: {machine()}. Produced by `make bench` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.",
        "",
        "| figure | value | target | verdict | command |",
        "| --- | --- | --- | --- | --- |",
    ]
    lines += [f"| {_cell(r.figure)} | {_cell(r.value)} | {_cell(r.target)} | {_cell(r.verdict)} | `{r.command}` |"
              for r in rows]
    if durations:
        took = ", ".join(f"{name} {seconds:.0f} s" for name, seconds in durations.items())
        lines += ["", f"The run took {sum(durations.values()) / 60:.1f} min ({took}); target < 15 min."]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    only = set(argv[1:])
    rows: list[Row] = []
    durations: dict[str, float] = {}
    failed = 0
    # as the `infertop` entry point does: benchmarks measure the process users run, and
    # its output is infertop's words (asyncssh's import made cryptography warn ten lines)
    library_warnings.install()
    tune_gc()
    import benchmarks

    for info in sorted(pkgutil.iter_modules(benchmarks.__path__), key=lambda m: m.name):
        if not info.name.startswith("bench_") or (only and info.name not in only):
            continue
        print(f"== {info.name}", flush=True)
        started = time.monotonic()
        try:
            module = importlib.import_module(f"benchmarks.{info.name}")
            got = module.run()
        except Exception:
            traceback.print_exc()
            failed += 1
            rows.append(Row(info.name, "failed", "—", "error", f"python -m benchmarks.run_all {info.name}"))
            continue
        finally:
            durations[info.name] = time.monotonic() - started
        for row in got:
            print(f"   {row.figure}: {row.value} ({row.verdict})", flush=True)
        print(f"   ({durations[info.name]:.0f} s)", flush=True)
        rows.extend(got)
    path = ROOT / "BENCHMARKS.md"
    text = path.read_text() if path.exists() else f"# Benchmarks\n\n{BEGIN}\n{END}\n"
    if BEGIN not in text:
        text += f"\n{BEGIN}\n{END}\n"
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    if not only:
        path.write_text(f"{head}{BEGIN}\n{table(rows, durations)}\n{END}{tail}")
    print()
    print(table(rows, durations))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
