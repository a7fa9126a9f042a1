"""docs/snapshot.md lists every field the `infertop.snapshot/1` JSON carries, and no other.

The page has one `### `Model`` table per pydantic model reachable from `Snapshot`, one row
per JSON field (`| `name` | …`). The models are walked recursively from `Snapshot` through
their annotations, so a field added anywhere in the tree without a row here fails, and so
does a row left for a field that is gone or a model no longer reachable.
"""

from __future__ import annotations

import re
import typing
from pathlib import Path

from pydantic import BaseModel

from infertop.monitor.snapshot import Snapshot

PAGE = Path(__file__).resolve().parents[2] / "docs" / "snapshot.md"
_HEADING = re.compile(r"^### `(\w+)`\s*$")
_ROW = re.compile(r"^\| `(\w+)` \|")


def models_under(root: type[BaseModel]) -> dict[str, type[BaseModel]]:
    """Every model reachable from `root` through field annotations, by class name."""
    found: dict[str, type[BaseModel]] = {}

    def nested(annotation: object) -> typing.Iterator[type[BaseModel]]:
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            yield annotation
        for arg in typing.get_args(annotation):
            yield from nested(arg)

    def walk(model: type[BaseModel]) -> None:
        if model.__name__ in found:
            return
        found[model.__name__] = model
        for field in model.model_fields.values():
            for inner in nested(field.annotation):
                walk(inner)

    walk(root)
    return found


def json_fields(model: type[BaseModel]) -> set[str]:
    """The names the model's JSON carries: aliases, computed fields, excluded ones left out."""
    names = {
        field.alias or name
        for name, field in model.model_fields.items()
        if not field.exclude
    }
    return names | set(model.model_computed_fields)


def documented_fields(text: str) -> dict[str, list[str]]:
    """Model name → the field names of its table, in page order (duplicates kept)."""
    tables: dict[str, list[str]] = {}
    current: str | None = None
    for line in text.splitlines():
        heading = _HEADING.match(line)
        if heading:
            current = heading.group(1)
            tables.setdefault(current, [])
            continue
        if line.startswith("#"):
            current = None
            continue
        row = _ROW.match(line)
        if row and current is not None:
            tables[current].append(row.group(1))
    return tables


def test_the_walk_finds_the_nested_models() -> None:
    # guards the walk itself: if it found only the root, the comparison below would be hollow
    models = models_under(Snapshot)
    assert {"Snapshot", "NodeView", "GpuView", "NicView", "RollupView", "SessionView"} <= set(models)
    assert "up" in json_fields(models["NicView"])  # a computed field
    assert "schema" in json_fields(Snapshot)  # the alias, not `schema_`
    assert "window_latency_buckets" not in json_fields(models["EngineView"])  # excluded


def test_every_model_has_a_table_and_no_table_is_stale() -> None:
    tables = documented_fields(PAGE.read_text(encoding="utf-8"))
    models = models_under(Snapshot)
    assert sorted(set(models) - set(tables)) == [], "models without a table in docs/snapshot.md"
    assert sorted(set(tables) - set(models)) == [], "tables for models the snapshot no longer has"


def test_every_field_is_documented_once_and_none_is_stale() -> None:
    tables = documented_fields(PAGE.read_text(encoding="utf-8"))
    problems: list[str] = []
    for name, model in models_under(Snapshot).items():
        rows = tables.get(name, [])
        carried = json_fields(model)
        problems += [f"{name}.{f}: not in docs/snapshot.md" for f in sorted(carried - set(rows))]
        problems += [f"{name}.{f}: documented, not in the model" for f in sorted(set(rows) - carried)]
        problems += [f"{name}.{f}: documented twice" for f in sorted({r for r in rows if rows.count(r) > 1})]
    assert problems == []


def test_a_missing_row_is_caught() -> None:
    # the comparison fails on a page with one row removed (the test can fail)
    text = PAGE.read_text(encoding="utf-8")
    cut = "\n".join(line for line in text.splitlines() if not line.startswith("| `taken_at` |"))
    assert "taken_at" not in documented_fields(cut)["Snapshot"]
    assert "taken_at" in json_fields(Snapshot)
