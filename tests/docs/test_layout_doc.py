"""docs/layout.md documents every key a layout accepts, and no key that is gone.

Each TOML table of the layout model (`layouts/model.py`) has a `### ` heading on the page
naming it, with one row per key (`| `key` | …`). `[profiles.NAME]` is a free mapping
checked by the engine profiles, not a model, and is documented as a list of keys.
"""

from __future__ import annotations

import re
import typing
from pathlib import Path

import pytest
from pydantic import BaseModel

from infertop.collectors.pages.profiles import ProfileError, custom_profile
from infertop.layouts.model import (
    AlertsConfig,
    ApiPriceTable,
    ClusterConfig,
    EngineConfig,
    Layout,
    LogPattern,
    NicExpectation,
    NodeConfig,
    PricingConfig,
    PrometheusConfig,
    ReferencePoint,
    ScoreboardConfig,
    SessionConfig,
    SloConfig,
    SshOptions,
    Thresholds,
)

PAGE = Path(__file__).resolve().parents[2] / "docs" / "layout.md"
TABLES: dict[str, type[BaseModel]] = {
    "Top level": Layout,
    "`[cluster]`": ClusterConfig,
    "`[session]`": SessionConfig,
    "`[pricing]`": PricingConfig,
    "`[pricing.api]`": ApiPriceTable,
    "`[thresholds]`": Thresholds,
    "`[alerts]`": AlertsConfig,
    "`[[nodes]]`": NodeConfig,
    "`nodes.engine`": EngineConfig,
    "`nodes.nics`": NicExpectation,
    "`[ssh]`": SshOptions,
    "`[prometheus]`": PrometheusConfig,
    "`[[log_patterns.NAME]]`": LogPattern,
    "`[slo]`": SloConfig,
    "`[scoreboard]`": ScoreboardConfig,
    "`[[scoreboard.reference_points]]`": ReferencePoint,
}
# set by the loader (where the layout was read from), never written in a file
NOT_KEYS = {"source_path"}
_ROW = re.compile(r"^\| `(\w+)` \|")


def rows_by_heading(text: str) -> dict[str, list[str]]:
    tables: dict[str, list[str]] = {}
    current: str | None = None
    for line in text.splitlines():
        if line.startswith("### "):
            current = line[4:].strip()
            tables[current] = []
        elif line.startswith("#"):
            current = None
        elif current is not None and (row := _ROW.match(line)):
            tables[current].append(row.group(1))
    return tables


def keys(model: type[BaseModel]) -> set[str]:
    return {field.alias or name for name, field in model.model_fields.items()} - NOT_KEYS


def test_every_model_of_the_layout_has_its_table() -> None:
    # the mapping above covers every nested model (so a new table cannot be missed)
    def nested(model: type[BaseModel], seen: set[type[BaseModel]]) -> set[type[BaseModel]]:
        seen.add(model)
        for field in model.model_fields.values():
            for inner in _models_in(field.annotation):
                if inner not in seen:
                    nested(inner, seen)
        return seen

    assert nested(Layout, set()) == set(TABLES.values())


def _models_in(annotation: object) -> list[type[BaseModel]]:
    found: list[type[BaseModel]] = []
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        found.append(annotation)
    for arg in typing.get_args(annotation):
        found += _models_in(arg)
    return found


def test_every_key_is_documented_and_none_is_stale() -> None:
    tables = rows_by_heading(PAGE.read_text(encoding="utf-8"))
    problems: list[str] = []
    for heading, model in TABLES.items():
        if heading not in tables:
            problems.append(f"no '### {heading}' table in docs/layout.md")
            continue
        rows, accepted = set(tables[heading]), keys(model)
        problems += [f"{heading} {k}: not documented" for k in sorted(accepted - rows)]
        problems += [f"{heading} {k}: documented, not accepted" for k in sorted(rows - accepted)]
    assert problems == []


def test_the_profile_keys_listed_are_the_ones_accepted() -> None:
    # every documented key loads, and the keys an unknown one is told about are the same set
    text = PAGE.read_text(encoding="utf-8")
    listed = re.search(r"^Keys: (.*?)\. A wrong key", text, re.M | re.S)
    assert listed is not None
    names = re.findall(r"`(\w+)`", listed.group(1))
    custom_profile("mine", {n: ("vllm" if n == "extends" else f"x_{n}") for n in names})
    with pytest.raises(ProfileError) as refused:
        custom_profile("mine", {"not_a_field": "x"})
    known = re.search(r"known: ([\w, ]+)", str(refused.value))
    assert known is not None
    assert sorted(names) == sorted(known.group(1).split(", "))
