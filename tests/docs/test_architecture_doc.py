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


REPO = PAGE.parents[1]
# the rooms (top-level folders) and every package inside them; infertop/<room> are links
ROOM_ROOTS = ("layouts", "collectors", "monitor", "tui", "infertop")


def _packages() -> list[str]:
    found = []
    for root in ROOM_ROOTS:
        for init in sorted((REPO / root).rglob("__init__.py")):
            folder = init.parent.relative_to(REPO)
            if "__pycache__" in folder.parts or folder.parts[0] != root:
                continue
            if root == "infertop" and len(folder.parts) > 1 and (REPO / folder).is_symlink():
                continue
            if root == "infertop" and len(folder.parts) > 1 and folder.parts[1] in ROOM_ROOTS:
                continue  # infertop/collectors … link to the rooms themselves
            found.append(folder.as_posix())
    return found


def test_every_module_of_every_room_is_listed_in_its_room() -> None:
    """The map lists each room's modules, all of them and only those."""
    table = section(PAGE.read_text(encoding="utf-8"), "Every module")
    listed = {
        room: set(re.findall(r"`(\w+)\.py`", names))
        for room, names in re.findall(r"^- \*\*([\w/]+)/\*\*: (.+)$", table, re.M)
    }
    packages = _packages()
    assert len(packages) >= 10  # the folders were found
    assert set(listed) == set(packages)
    for package in packages:
        modules = {p.stem for p in (REPO / package).glob("*.py") if not p.name.startswith("__")}
        assert listed[package] == modules, package


def test_the_recipes_name_every_place_a_change_must_touch() -> None:
    recipes = section(PAGE.read_text(encoding="utf-8"), "Where a new thing goes")
    # every file a recipe names exists, and every `file.py:Name` is in that file
    for path, name in re.findall(r"`((?:[\w]+/)+[\w]+\.py)(?::(\w+))?`", recipes):
        assert (REPO / path).is_file(), path
        if name:
            assert re.search(rf"^(?:def |class )?{name}\b", (REPO / path).read_text(), re.M), f"{path}:{name}"
    panel = next(line for line in recipes.split("\n- ") if line.startswith("**A new panel**"))
    # tui/panels.py imports the panels from PANEL_MODULES: a panel not named there never loads
    assert "tui/panels.py:register_panel" in panel and "tui/panels.py:PANEL_MODULES" in panel
    source = next(line for line in recipes.split("\n- ") if line.startswith("**A new source**"))
    # which source reads which part is decided in one place: a source the routing does not
    # know reads nothing
    assert "collectors/sources/routing.py" in source and "collectors/sources/registry.py" in source
