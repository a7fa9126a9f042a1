"""Issue 19, item 1 (the rest): no other layout string becomes a command or an option.

Every layout string that reaches a subprocess, a command line, an HTTP header or asyncssh
is checked when the layout is read: the probe's interpreter name (on the remote command
line, quoted), file paths handed to asyncssh, requests or the log follower, environment
variable names, the Prometheus header name. A `log_command` is an argv run without a
shell, and an ssh config named by the layout must be the user's own file (as OpenSSH
requires of ~/.ssh/config): it can run commands (ProxyCommand, Match exec).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.layout_cli import assert_refused, run_infertop, toml_str

# (table, key, hostile value, as an array?) → the layout field named in the error
HOSTILE_FIELDS = {
    "python-space-option": ("ssh", "python", "python3 -c 'import os'", False),
    "python-semicolon": ("ssh", "python", "python3;touch /tmp/x", False),
    "python-dollar": ("ssh", "python", "$(id)", False),
    "python-leading-dash": ("ssh", "python", "-oProxyCommand=x", False),
    "python-newline": ("ssh", "python", "python3\nid", False),
    "python-backtick": ("ssh", "python", "`id`", False),
    "known-hosts-nul": ("ssh", "known_hosts", "/tmp/kh\x00x", False),
    "known-hosts-newline": ("ssh", "known_hosts", "/tmp/kh\nx", False),
    "known-hosts-escape": ("ssh", "known_hosts", "/tmp/\x1b]0;t\x07kh", False),
    "known-hosts-empty": ("ssh", "known_hosts", "", False),
    "config-nul": ("ssh", "config", "/tmp/cfg\x00", False),
    "config-c1": ("ssh", "config", "/tmp/\x9bcfg", False),
    "identity-nul": ("ssh", "identity_files", "/tmp/id\x00", True),
    "identity-newline": ("ssh", "identity_files", "/tmp/id\n-oX", True),
    "prom-header-crlf": ("prometheus", "header_name", "X-Api-Key\r\nX-Evil: 1", False),
    "prom-header-space": ("prometheus", "header_name", "X Api", False),
    "prom-header-colon": ("prometheus", "header_name", "X-Api:", False),
    "prom-token-env-dollar": ("prometheus", "token_env", "$(id)", False),
    "prom-token-env-space": ("prometheus", "token_env", "A B", False),
    "prom-header-env-equals": ("prometheus", "header_env", "A=B", False),
    "prom-token-file-nul": ("prometheus", "token_file", "/tmp/t\x00", False),
    "prom-ca-file-newline": ("prometheus", "ca_file", "/tmp/ca\nx", False),
}


def _field_layout(table: str, key: str, value: str, array: bool) -> str:
    shown = f"[{toml_str(value)}]" if array else toml_str(value)
    head = f'[{table}]\nurl = "http://127.0.0.1:1/"\n' if table == "prometheus" else f"[{table}]\n"
    return f"{head}{key} = {shown}\n"


@pytest.mark.hostile
@pytest.mark.parametrize(("table", "key", "value", "array"), HOSTILE_FIELDS.values(), ids=HOSTILE_FIELDS.keys())
def test_cli_refuses_a_hostile_field(tmp_path: Path, table: str, key: str, value: str, array: bool) -> None:
    layout = tmp_path / "hostile.toml"
    text = _field_layout(table, key, value, array)
    layout.write_text(text)
    run = run_infertop(["snapshot", "--layout", str(layout), "--window", "1"])
    line_no = text.splitlines().index(next(li for li in text.splitlines() if li.startswith(key))) + 1
    assert_refused(run, f"{layout}:{line_no}: {table}.{key}")


HOSTILE_ENGINE = {
    "log-nul": ("log", toml_str("/var/log/x\x00y")),
    "log-newline": ("log", toml_str("/var/log/x\ny")),
    "log-empty": ("log", toml_str("")),
    "log-command-nul": ("log_command", '["tail", ' + toml_str("-F/x\x00") + "]"),
    "log-command-escape": ("log_command", '["journalctl", ' + toml_str("\x1b[2J") + "]"),
}


@pytest.mark.hostile
@pytest.mark.parametrize(("key", "value"), HOSTILE_ENGINE.values(), ids=HOSTILE_ENGINE.keys())
def test_cli_refuses_a_hostile_engine_log_setting(tmp_path: Path, key: str, value: str) -> None:
    layout = tmp_path / "hostile.toml"
    layout.write_text(f'[[nodes]]\nname = "a"\nlocal = true\nengine = {{ {key} = {value} }}\n')
    run = run_infertop(["snapshot", "--layout", str(layout), "--window", "1"])
    assert_refused(run, f"{layout}:4: nodes[0].engine.{key}")


# ------------------------------------------------------------- log_command: never a shell


@pytest.mark.hostile
def test_log_command_arguments_reach_no_shell(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    argv = ["echo", f"$(touch {marker})", f"`touch {marker}`", ";", "touch", str(marker), "|", "sh"]
    layout = tmp_path / "layout.toml"
    layout.write_text(
        "[cluster]\ninterval_s = 0.2\n\n"
        f'[[nodes]]\nname = "a"\nlocal = true\nengine = {{ log_command = [{", ".join(map(toml_str, argv))}] }}\n'
    )
    run = run_infertop(["snapshot", "--layout", str(layout), "--window", "1", "--json"], timeout_s=30)
    assert run.returncode == 0, run.stderr
    assert not marker.exists(), "a shell ran the log command"


@pytest.mark.hostile
def test_log_command_as_one_shell_string_is_one_program_name(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    layout = tmp_path / "layout.toml"
    layout.write_text(
        "[cluster]\ninterval_s = 0.2\n\n"
        f'[[nodes]]\nname = "a"\nlocal = true\nengine = {{ log_command = [{toml_str(f"touch {marker}")}] }}\n'
    )
    run = run_infertop(["snapshot", "--layout", str(layout), "--window", "1", "--json"], timeout_s=30)
    assert run.returncode == 0, run.stderr
    assert not marker.exists()
    assert "cannot run" in run.stdout  # the note says so; the rest of the node is read


# ------------------------------------------------- a layout-named ssh config must be ours

SSH_CONFIG_CASES = {
    "world-writable": 0o666,
    "group-writable": 0o620,
}


@pytest.mark.hostile
@pytest.mark.parametrize("mode", SSH_CONFIG_CASES.values(), ids=SSH_CONFIG_CASES.keys())
def test_a_writable_ssh_config_named_by_the_layout_is_not_read(tmp_path: Path, mode: int) -> None:
    # anyone who can write it could add `Match exec` or a ProxyCommand: OpenSSH refuses
    # such a ~/.ssh/config ("Bad owner or permissions"); so do we, for the layout's one
    marker = tmp_path / "pwned"
    config = tmp_path / "ssh_config"
    config.write_text(f'Match exec "touch {marker}"\n    User x\n')
    os.chmod(config, mode)
    layout = tmp_path / "layout.toml"
    layout.write_text(
        f'[ssh]\nconfig = {toml_str(str(config))}\nconnect_timeout_s = 1\n\n[[nodes]]\nname = "a"\nssh = "127.0.0.1:1"\n'
    )
    run = run_infertop(["snapshot", "--layout", str(layout), "--window", "1"], timeout_s=30)
    assert not marker.exists(), "a command in a writable ssh config ran"
    # the one node is read by no one: exit 1, its reason the one line (snapshot's exit codes)
    assert run.returncode == 1, run.stderr
    assert "writable by" in run.stderr
    assert str(config) in run.stderr


def test_an_own_ssh_config_named_by_the_layout_is_read(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    config = tmp_path / "ssh_config"
    config.write_text(f'Match exec "touch {marker}"\n    User x\n')
    os.chmod(config, 0o600)
    layout = tmp_path / "layout.toml"
    layout.write_text(
        f'[ssh]\nconfig = {toml_str(str(config))}\nconnect_timeout_s = 1\n\n[[nodes]]\nname = "a"\nssh = "127.0.0.1:1"\n'
    )
    run = run_infertop(["snapshot", "--layout", str(layout), "--window", "1"], timeout_s=30)
    assert run.returncode == 1, run.stderr  # nothing listens on port 1: no node read
    assert marker.exists()  # the user's own config: read as ssh would
