"""Every layout problem in one run, with a suggestion for a misspelt key; an empty layout is
an error (issue 18, "Input and onboarding")."""

from __future__ import annotations

from pathlib import Path

import pytest

from infertop.layouts import LayoutError, parse_layout
from tests.support.infertop_cmd import run_infertop

THREE_PROBLEMS = """\
[cluster]
name = "t"
intervl_s = 1.0

[[nodes]]
name = "decode-01"
role = "decoder"
gpus = 8

[[nodes]]
name = "decode-02"
role = "decode"
gpus = -1
"""


def test_every_problem_is_reported_in_file_order() -> None:
    with pytest.raises(LayoutError) as caught:
        parse_layout(THREE_PROBLEMS, "l.toml")
    lines = caught.value.lines()
    assert len(lines) == 3, lines
    assert lines[0].startswith("l.toml:3: cluster.intervl_s: unknown field (did you mean 'interval_s'?)")
    assert lines[1].startswith("l.toml:7: nodes[0].role:") and "'decoder'" in lines[1]
    assert lines[2].startswith("l.toml:13: nodes[1].gpus:")
    assert str(caught.value) == lines[0]  # the one-line message is the first problem


def test_no_suggestion_for_a_key_like_nothing() -> None:
    with pytest.raises(LayoutError) as caught:
        parse_layout('[cluster]\nzzqqxx = 1\n[[nodes]]\nname = "a"\n', "l.toml")
    assert str(caught.value) == "l.toml:2: cluster.zzqqxx: unknown field"


@pytest.mark.parametrize("text", ["", "[cluster]\nname = \"empty\"\n", "[pricing]\ngpu_hour_usd = 1.0\n"])
def test_a_layout_without_nodes_is_an_error(text: str) -> None:
    with pytest.raises(LayoutError, match=r"nodes: no \[\[nodes\]\]"):
        parse_layout(text, "l.toml")


def test_the_cli_prints_every_problem_and_exits_2(tmp_path: Path) -> None:
    layout = tmp_path / "l.toml"
    layout.write_text(THREE_PROBLEMS)
    (run,) = run_infertop(["snapshot", "--layout", str(layout)])
    assert run.returncode == 2
    lines = run.stderr.splitlines()
    assert len(lines) == 3 and all(line.startswith(f"infertop: {layout}:") for line in lines), lines
    assert "Traceback" not in run.stderr
    empty = tmp_path / "empty.toml"
    empty.write_text("")
    (run,) = run_infertop(["snapshot", "--layout", str(empty)])
    assert run.returncode == 2 and "watches nothing" in run.stderr


RANGE_PROBLEMS = """\
[cluster]
name = "t"

[[nodes]]
hosts = "prefill-[01-04]"
role = "prefill"

[[nodes]]
hosts = "decode-[01-96]"
rol = "decode"
gpus = "eight"

[[nodes]]
name = "spare"
role = "decoder"
"""


def test_a_mistake_in_a_hosts_range_is_told_once_for_the_range() -> None:
    # a newcomer's trial: one misspelt key in a 96-node range printed 96 lines
    with pytest.raises(LayoutError) as caught:
        parse_layout(RANGE_PROBLEMS, "l.toml")
    assert caught.value.lines() == [
        "l.toml:10: nodes[4..99].rol: unknown field (did you mean 'role'?) (all 96 nodes of this hosts range)",
        "l.toml:11: nodes[4..99].gpus: Input should be a valid integer, unable to parse string as an integer "
        "(all 96 nodes of this hosts range)",
        "l.toml:15: nodes[100].role: Input should be 'prefill', 'decode' or 'mixed' (got 'decoder')",
    ]
    assert caught.value.field == "nodes[4..99].rol"


def test_a_mistake_in_some_nodes_of_a_range_says_how_many() -> None:
    # names of at most 128 characters: a127 + "9" is one, a127 + "10" and + "11" are not
    text = f'[[nodes]]\nhosts = "{"a" * 127}[9-11]"\n'
    with pytest.raises(LayoutError) as caught:
        parse_layout(text, "l.toml")
    (line,) = caught.value.lines()
    assert line.startswith("l.toml: nodes[1..2].name: node name 'a")
    assert line.endswith("may hold only letters, digits and _.:@- (2 of the 3 nodes of this hosts range)")
