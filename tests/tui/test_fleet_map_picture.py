"""Where the fleet map puts nodes (pure): every node a cell, a glyph per state, folding."""

from __future__ import annotations

from infertop.monitor.fleet_map import MAP_STATES, MapCell, MapGroup
from infertop.tui.fleet_map_picture import GLYPH, draw_map


def groups(units: int = 64, size: int = 16, trouble: dict[str, str] | None = None) -> list[MapGroup]:
    trouble = trouble or {}
    out = []
    for u in range(units):
        pool = "prefill" if u < units // 4 else "decode"
        names = [f"n{u:02d}-{i:02d}" for i in range(size)]
        out.append(MapGroup(pool, f"unit-{u:02d}", tuple(MapCell(n, trouble.get(n, "ok")) for n in names)))  # type: ignore[arg-type]
    return out


def test_every_state_has_its_own_glyph_of_one_cell() -> None:
    assert set(GLYPH) == set(MAP_STATES)
    assert len(set(GLYPH.values())) == len(MAP_STATES)
    assert all(len(g) == 1 for g in GLYPH.values())


def test_1024_nodes_fit_160_columns_in_few_lines() -> None:
    picture = draw_map(groups(), 160, 30)
    assert not picture.folded
    assert len(picture.cells) == 1024
    assert len(picture.lines) <= 20
    assert all(x < 160 for _, _, x in picture.cells)
    places = {(line, x) for _, line, x in picture.cells}
    assert len(places) == 1024  # no two nodes on one cell


def test_too_short_folds_healthy_nodes_into_counts_and_keeps_trouble() -> None:
    trouble = {"n20-03": "critical", "n40-07": "stale", "n63-15": "unreachable"}
    picture = draw_map(groups(trouble=trouble), 80, 8)
    assert picture.folded
    assert {name for name, _, _ in picture.cells} == set(trouble)
    assert len(picture.lines) <= 8
    text = "\n".join("".join(a[1] for a in line) for line in picture.lines)
    assert "16 groups all ok" in text and "45 groups all ok" in text
    for name, state in trouble.items():
        line, x = next((ln, x) for n, ln, x in picture.cells if n == name)
        atom = next(a for a in picture.lines[line] if a[0] == x)
        assert atom[1] == GLYPH[state]  # type: ignore[index]
