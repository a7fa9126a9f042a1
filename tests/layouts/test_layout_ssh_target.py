"""Issue 19, item 1: a layout's `ssh` target can never become options or a command.

asyncssh substitutes the host into the user's own ssh config (`ProxyCommand ssh -W %h:%p
jump`, `Match exec`), and that command line is split into arguments or run by a shell. So
a target is checked by its grammar when the layout is read — user@host[:port],
user@[v6]:port or an ssh-config alias — and anything else is a one-line layout error.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from infertop.collectors.sources.ssh import parse_target
from infertop.layouts import LayoutError, parse_layout
from tests.support.layout_cli import assert_refused, run_infertop, toml_str

# one case per class of character or shape that must never pass
HOSTILE_TARGETS = {
    "issue-19-proxycommand": "y:22 -oProxyCommand=touch\\ /tmp/pwned -oSetEnv=A=b:c",
    "space": "host name",
    "tab": "host\tname",
    "newline": "host\nProxyCommand touch /tmp/x",
    "carriage-return": "host\rname",
    "nul": "host\x00name",
    "escape": "host\x1b]0;title\x07",
    "del": "host\x7f",
    "c1-csi": "host\x9b2J",
    "bidi-override": "host\u202egnp.exe",
    "non-ascii-homoglyph": "h\u043est",
    "leading-dash": "-oProxyCommand=touch",
    "leading-dash-after-user": "ops@-oProxyCommand=touch",
    "percent-token": "host%h",
    "percent-escape": "%25host",
    "semicolon": "host;touch /tmp/x",
    "pipe": "host|sh",
    "ampersand": "host&&id",
    "backtick": "host`id`",
    "dollar-paren": "$(touch /tmp/x)",
    "dollar-brace": "host${IFS}id",
    "redirect-out": "host>/tmp/x",
    "redirect-in": "host</etc/passwd",
    "single-quote": "host'x",
    "double-quote": 'host"x',
    "backslash": "host\\x",
    "glob-star": "host*",
    "glob-question": "host?",
    "parentheses": "host(x)",
    "braces-unexpanded": "{host}",
    "bang": "host!x",
    "hash": "host#x",
    "tilde": "~host",
    "equals": "host=x",
    "comma": "host,other",
    "slash": "host/x",
    "empty": "",
    "only-user": "ops@",
    "empty-user": "@host",
    "two-at": "a@b@host",
    "user-space": "o ps@host",
    "user-metachar": "ops;id@host",
    "user-leading-dash": "-lroot@host",
    "user-percent": "%u@host",
    "port-zero": "host:0",
    "port-too-big": "host:65536",
    "port-sign": "host:+22",
    "port-space": "host: 22",
    "port-letters": "host:22x",
    "port-underscore": "host:2_2",
    "port-empty": "host:",
    "port-huge": "host:" + "9" * 5000,
    "v6-unclosed": "[::1",
    "v6-not-an-address": "[not-v6]:22",
    "v6-scope-percent": "[fe80::1%eth0]:22",
    "v6-trailing-garbage": "[::1]x",
    "label-leading-dash": "a.-b",
    "label-empty": "a..b",
    "label-too-long": "a" * 64 + ".example",
    "name-too-long": ".".join(["abcdefghi"] * 30),
}


def _layout_text(target: str) -> str:
    return f'[[nodes]]\nname = "a"\nssh = {toml_str(target)}\n'


@pytest.mark.hostile
@pytest.mark.parametrize("target", HOSTILE_TARGETS.values(), ids=HOSTILE_TARGETS.keys())
def test_cli_refuses_a_hostile_ssh_target(tmp_path: Path, target: str) -> None:
    layout = tmp_path / "hostile.toml"
    layout.write_text(_layout_text(target))
    run = run_infertop(["snapshot", "--layout", str(layout), "--window", "1"])
    assert_refused(run, f"{layout}:3: nodes[0].ssh:")


@pytest.mark.hostile
def test_a_range_checks_each_substituted_target(tmp_path: Path) -> None:
    layout = tmp_path / "range.toml"
    layout.write_text('[cluster]\n\n[[nodes]]\nhosts = "n[1-3]"\nssh = "{host} -oProxyCommand=id"\n')
    run = run_infertop(["snapshot", "--layout", str(layout), "--window", "1"])
    # each substituted target is checked: one problem of the range, told once with its count
    assert_refused(run, f"{layout}:5: nodes[0..2].ssh:", "(all 3 nodes of this hosts range)")


@pytest.mark.parametrize(
    ("target", "host", "port", "user"),
    [
        ("decode-01", "decode-01", None, None),
        ("my_alias", "my_alias", None, None),
        ("decode-01.cluster.example.", "decode-01.cluster.example.", None, None),
        ("ops@decode-01:2222", "decode-01", 2222, "ops"),
        ("first.last@host", "host", None, "first.last"),
        ("root@10.0.0.1", "10.0.0.1", None, "root"),
        ("ops@[fe80::1]:22", "fe80::1", 22, "ops"),
        ("[::1]", "::1", None, None),
        ("fe80::1", "fe80::1", None, None),
        ("host:65535", "host", 65535, None),
    ],
)
def test_good_targets_still_load(target: str, host: str, port: int | None, user: str | None) -> None:
    layout = parse_layout(_layout_text(target), "good.toml")
    assert layout.nodes[0].ssh == target
    parsed = parse_target(target)
    assert (parsed.host, parsed.port, parsed.user) == (host, port, user)


# the same inputs as above, one layer down: not marked hostile again (counted once)
@pytest.mark.parametrize("target", HOSTILE_TARGETS.values(), ids=HOSTILE_TARGETS.keys())
def test_the_ssh_source_refuses_what_the_layout_refuses(target: str) -> None:
    # defence in depth: an SshNode built by hand (tests, benchmarks) is checked again
    from infertop.layouts.model import check_ssh_target

    with pytest.raises(ValueError):
        check_ssh_target(target)
    with pytest.raises(ValueError):
        parse_target(target)


def test_message_shows_the_target_escaped() -> None:
    with pytest.raises(LayoutError) as info:
        parse_layout(_layout_text("evil\x1b[2J\n-oProxyCommand=x"), "l.toml")
    message = str(info.value)
    assert "\x1b" not in message and "\n" not in message
    assert "\\x1b[2J\\n-oProxyCommand=x" in message


# ---------------------------------------------------------------- end to end: nothing runs

# The user's own ssh config uses the host in a command, as jump-host setups do. Before the
# fix, the first target made the inner `ssh` take `-oProxyCommand=…` and run it; the
# second is the same through a ProxyCommand that a shell runs.
E2E = {
    "ssh-W-jump": (
        "ProxyCommand ssh -F /dev/null -o BatchMode=yes -W %h:%p jump.invalid",
        "y:22 -oProxyCommand=touch\\ {marker} -oSetEnv=A=b:c",
    ),
    "sh-c-echo": (
        "ProxyCommand /bin/sh -c 'echo %h >/dev/null; exit 1'",
        "y;touch {marker};",
    ),
}


@pytest.mark.hostile
@pytest.mark.parametrize(("config_line", "target"), E2E.values(), ids=E2E.keys())
def test_no_command_runs_through_the_users_proxycommand(
    tmp_path: Path, config_line: str, target: str
) -> None:
    if "ssh " in config_line and shutil.which("ssh") is None:
        pytest.skip("needs the OpenSSH client")
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True, mode=0o700)
    (home / ".ssh" / "config").write_text(f"Host *\n    {config_line}\n")
    marker = tmp_path / "pwned"
    layout = tmp_path / "layout.toml"
    layout.write_text(_layout_text(target.format(marker=marker)))
    # asyncssh reads ~/.ssh/config by default, as it does for the user: point HOME at ours
    env = {**os.environ, "HOME": str(home)}
    run = run_infertop(["snapshot", "--layout", str(layout), "--window", "1"], env=env, timeout_s=30)
    assert not marker.exists(), "the layout ran a command"
    assert_refused(run, "nodes[0].ssh:")
