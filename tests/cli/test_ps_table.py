"""`infertop ps`'s table: every heading over its column, whatever the cells' widths."""

from __future__ import annotations

from infertop.cli.ps import HEADINGS, table_lines


def test_every_heading_stands_over_its_column() -> None:
    rows = [
        ("11585", "2026-12-02 14:17:52", "0", "deepinfer-demo", "/tmp/d128.toml", "/tmp/st/a.sqlite"),
        ("7", "2026-12-02 09:00:00", "12", "c", "/home/ops/layouts/a-long-layout-name.toml", "(not recording)"),
    ]
    lines = table_lines(rows)
    head = lines[0]
    for row_line, row in zip(lines[1:], rows, strict=True):
        for heading, cell in zip(HEADINGS, row, strict=True):
            at = row_line.index(cell) if heading not in ("PID", "VIEWERS") else None
            if at is not None:  # text columns start where their heading starts
                assert head.index(heading) == at, (heading, head, row_line)
    # the numbers end where their headings end
    assert lines[2][: head.index("VIEWERS") + len("VIEWERS") + 1].endswith(" 12 ")
    assert lines[1].startswith("11585")


def test_a_hostile_cluster_name_is_inert_and_measured_as_printed() -> None:
    rows = [("1", "2026-12-02 14:17:52", "0", "evil\x1b[2J\x07", "/tmp/l.toml", "/tmp/r.sqlite")]
    head, line = table_lines(rows)
    assert "\x1b" not in line and "\x07" not in line
    assert line.index("/tmp/l.toml") == head.index("LAYOUT")
