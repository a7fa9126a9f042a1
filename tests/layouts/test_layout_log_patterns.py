"""Log settings in the layout: user pattern sets, their validation, the exit code."""

from __future__ import annotations

from pathlib import Path

import pytest

from infertop.cli.main import main
from infertop.layouts import LayoutError
from infertop.layouts.loader import parse_layout

GOOD = """
[[nodes]]
name = "offline-01"
engine = { log = "/var/log/deepinfer/run.log", log_patterns = ["vllm", "mine"], log_interval_s = 5 }

[[log_patterns.mine]]
regex = 'batch done: (?P<generation_tokens>\\d+) tokens, (?P<accepted_tokens>\\d+) accepted'
kind = "count"

[[log_patterns.mine]]
regex = 'queue (?P<value>\\d+)'
field = "requests_waiting"
kind = "gauge"
"""


def test_user_pattern_set_parses() -> None:
    layout = parse_layout(GOOD, "good.toml")
    engine = layout.nodes[0].engine
    assert engine is not None
    assert engine.log_pattern_sets == ["vllm", "mine"]
    assert engine.log_interval_s == 5
    assert [p.kind for p in layout.log_patterns["mine"]] == ["count", "gauge"]


def test_default_pattern_set_is_vllm() -> None:
    layout = parse_layout('[[nodes]]\nname = "a"\nengine = { log = "/x.log" }\n')
    assert layout.nodes[0].engine is not None
    assert layout.nodes[0].engine.log_pattern_sets == ["vllm"]


@pytest.mark.parametrize(
    ("text", "field", "problem"),
    [
        ("[[log_patterns.mine]]\nregex = 'unclosed (group'\n", "log_patterns.mine[0].regex", "does not compile"),
        ("[[log_patterns.mine]]\nregex = '(\\d+)'\nfield = 'tokens'\n", "log_patterns.mine[0].field", "canonical"),
        ("[[log_patterns.mine]]\nregex = '(\\d+)'\n", "log_patterns.mine[0]", "no named group"),
        ("[[log_patterns.mine]]\nregex = '(?P<steps>\\d+)'\nkind = 'often'\n", "log_patterns.mine[0].kind", "often"),
        ("[[log_patterns.mine]]\nregex = '(\\d+) (\\d+)'\nfield = 'steps'\n", "log_patterns.mine[0]", "name the group"),
    ],
)
def test_bad_patterns_name_the_field(text: str, field: str, problem: str) -> None:
    with pytest.raises(LayoutError) as info:
        parse_layout(text, "bad.toml")
    assert info.value.field == field
    assert problem in info.value.problem


def test_unknown_pattern_set_is_an_error() -> None:
    with pytest.raises(LayoutError, match=r"nodes\[0\]\.engine\.log_patterns: unknown pattern set 'nope'"):
        parse_layout('[[nodes]]\nname = "a"\nengine = { log = "/x.log", log_patterns = "nope" }\n', "l.toml")


def test_bad_regex_exits_2_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    layout = tmp_path / "bad.toml"
    layout.write_text('[[nodes]]\nname = "a"\nlocal = true\n\n[[log_patterns.x]]\nregex = "a[b"\n')
    assert main(["snapshot", "--layout", str(layout), "--json"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "bad.toml" in err and "log_patterns.x[0].regex" in err and "does not compile" in err
    assert "Traceback" not in err


def test_log_command_is_an_argv() -> None:
    layout = parse_layout(
        '[[nodes]]\nname = "a"\nengine = { log_command = ["journalctl", "-u", "vllm", "-f", "-n", "0"] }\n'
    )
    engine = layout.nodes[0].engine
    assert engine is not None and engine.log_command == ["journalctl", "-u", "vllm", "-f", "-n", "0"]
    with pytest.raises(LayoutError, match="not both"):
        parse_layout('[[nodes]]\nname = "a"\nengine = { log = "/x", log_command = ["tail", "-F", "/x"] }\n')
    with pytest.raises(LayoutError, match="log_command"):
        parse_layout('[[nodes]]\nname = "a"\nengine = { log_command = "journalctl -f" }\n')


def test_sglang_is_a_built_in_set() -> None:
    layout = parse_layout('[[nodes]]\nname = "a"\nengine = { log = "/x.log", log_patterns = ["sglang"] }\n')
    engine = layout.nodes[0].engine
    assert engine is not None and engine.log_pattern_sets == ["sglang"]
