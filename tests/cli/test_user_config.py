"""The user's config (~/.config/infertop/config.toml) and `--interval` (issue 18).

Precedence, lowest first: default, config, layout, command line. Checked on what the real
`infertop record` stored as the session's layout.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from infertop.monitor.record.recording import Recording
from tests.support.infertop_cmd import run_infertop

NODE = '[[nodes]]\nname = "decode-01"\nrole = "decode"\nmetrics = ["http://127.0.0.1:9/metrics"]\n'


def _recorded_interval(tmp_path: Path, layout_text: str, config: str | None, *flags: str) -> float:
    layout = tmp_path / "l.toml"
    layout.write_text(layout_text)
    env = {"INFERTOP_STATE_DIR": str(tmp_path / "state"), "INFERTOP_CONFIG": str(tmp_path / "config.toml")}
    if config is not None:
        (tmp_path / "config.toml").write_text(config)
    record = tmp_path / "r.sqlite"
    (run,) = run_infertop(["record", "--layout", str(layout), *flags, "--record", str(record),
                           "--duration", "0.5", "-q"], env=env)
    assert run.returncode == 0, run.stderr
    rec = Recording.load(record)
    assert rec.layout is not None
    return rec.layout.cluster.interval_s


@pytest.mark.parametrize(
    ("layout_interval", "config", "flags", "expected"),
    [
        (None, None, (), 1.0),  # the built-in default
        (None, "interval_s = 3.0\n", (), 3.0),  # the user's default
        ("2.0", "interval_s = 3.0\n", (), 2.0),  # the layout beats the user's default
        ("2.0", "interval_s = 3.0\n", ("--interval", "7"), 7.0),  # the command line beats both
    ],
)
def test_interval_precedence(
    tmp_path: Path, layout_interval: str | None, config: str | None, flags: tuple[str, ...], expected: float
) -> None:
    cluster = f"[cluster]\ninterval_s = {layout_interval}\n" if layout_interval else ""
    assert _recorded_interval(tmp_path, cluster + NODE, config, *flags) == expected


def test_top_level_interval_flag(tmp_path: Path) -> None:
    layout = tmp_path / "l.toml"
    layout.write_text(NODE)
    (run,) = run_infertop(["--interval", "0", "snapshot", "--layout", str(layout)])
    assert run.returncode == 2 and "--interval" in run.stderr and "greater than 0" in run.stderr


@pytest.mark.parametrize(
    ("argv", "problem"),
    [
        # `snapshot --interval inf` polled once and then waited for ever
        (["snapshot", "--interval", "inf"], "argument --interval: 'inf' must be a finite number"),
        (["snapshot", "--interval", "1e9"], "argument --interval: '1e9' is longer than 3600 s"),
        # `snapshot --window 1e9` was taken and blocked: capped as the layout's window_s is
        (["snapshot", "--window", "1e9"], "argument --window: '1e9' is longer than 86400 s"),
        (["record", "--duration", "inf"], "argument --duration: 'inf' must be a finite number"),
    ],
)
def test_an_endless_number_of_seconds_is_exit_2_in_one_line(tmp_path: Path, argv: list[str], problem: str) -> None:
    layout = tmp_path / "l.toml"
    layout.write_text(NODE)
    env = {"INFERTOP_STATE_DIR": str(tmp_path / "state"), "INFERTOP_CONFIG": str(tmp_path / "config.toml")}
    (run,) = run_infertop([*argv, "--layout", str(layout)], env=env)
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr.strip().splitlines()[-1].endswith(problem), run.stderr


@pytest.mark.parametrize(
    ("config", "needle"),
    [
        ("intervl_s = 2\n", "config.toml:1: intervl_s: unknown setting (known: interval_s, theme, [alerts])"),
        ("[alerts]\nbel = true\n", "config.toml:2: alerts.bel: unknown setting"),
        ("interval_s = -1\n", "config.toml:1: interval_s:"),
        ("interval_s = inf\n", "config.toml:1: interval_s: Input should be a finite number"),
        ("interval_s = =\ntheme = \"nord\"\n", "config.toml:1: TOML syntax error"),
        ('theme = "no-such-theme"\n', "config.toml: theme: unknown theme 'no-such-theme' (known: "),
    ],
)
def test_a_bad_config_is_exit_2_with_file_line_and_field(tmp_path: Path, config: str, needle: str) -> None:
    layout = tmp_path / "l.toml"
    layout.write_text(NODE)
    (tmp_path / "config.toml").write_text(config)
    env = {"INFERTOP_CONFIG": str(tmp_path / "config.toml"), "INFERTOP_STATE_DIR": str(tmp_path / "state")}
    # the TUI command checks the theme before it draws anything (stdin is no terminal)
    command = ["--layout", str(layout), "--no-record"] if "theme" in config else ["snapshot", "--layout", str(layout)]
    (run,) = run_infertop(command, env=env)
    assert run.returncode == 2, (run.returncode, run.stderr[-500:])
    assert needle in run.stderr and "Traceback" not in run.stderr, run.stderr


def test_the_users_alerts_apply_where_the_layout_sets_none(tmp_path: Path) -> None:
    """The person's bell (config) for a layout without [alerts]; a layout's own wins."""
    from infertop.cli.common import layout_of
    from infertop.cli.main import build_parser

    config = tmp_path / "config.toml"
    config.write_text('[alerts]\nbell = true\non = "warning"\n')
    bare, own = tmp_path / "bare.toml", tmp_path / "own.toml"
    bare.write_text(NODE)
    own.write_text("[alerts]\nbell = false\n" + NODE)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("INFERTOP_CONFIG", str(config))
        got = layout_of(build_parser().parse_args(["--layout", str(bare)]))
        assert got.alerts.bell is True and got.alerts.on == "warning"
        assert layout_of(build_parser().parse_args(["--layout", str(own)])).alerts.bell is False
