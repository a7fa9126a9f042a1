"""docs/architecture.md stays a true map: its subcommand table is `SUBCOMMANDS`, in order,
and every name its tick table gives can be imported."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

from infertop.cli.main import SUBCOMMANDS

PAGE = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"


def section(text: str, heading: str) -> str:
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def test_the_subcommand_table_is_subcommands_in_order() -> None:
    table = section(PAGE.read_text(encoding="utf-8"), "Subcommands")
    rows = re.findall(r"^\| `([\w-]+)` \| `([\w/]+\.py)` \|", table, re.M)
    assert [name for name, _ in rows] == [m.NAME for m in SUBCOMMANDS]
    for (name, path), module in zip(rows, SUBCOMMANDS, strict=True):
        assert path == module.__name__.replace(".", "/") + ".py", name


def resolve(dotted: str) -> object:
    """`pkg.module.Class.attr` → the object, importing the longest module prefix."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise ModuleNotFoundError(dotted)


def test_every_name_of_the_tick_resolves() -> None:
    table = section(PAGE.read_text(encoding="utf-8"), "One tick, from a source to the screen")
    names = re.findall(r"`((?:collectors|monitor|tui|layouts|infertop)\.[\w.]+)`", table)
    assert len(names) >= 20  # the table is there and was read
    missing = []
    for name in names:
        try:
            resolve(name)
        except (ModuleNotFoundError, AttributeError):
            missing.append(name)
    assert missing == []
