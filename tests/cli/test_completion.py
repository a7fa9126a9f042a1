"""`infertop completion bash`: the script, sourced in a real bash, completes subcommands,
a subcommand's flags and choices, and file names after --layout (issue 18)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.infertop_cmd import run_infertop


def _complete(script: str, words: list[str], cwd: Path) -> list[str]:
    """COMPREPLY for `words` (the last one being completed), from the sourced script."""
    quoted = " ".join(f"'{w}'" for w in words)
    program = f"""{script}
COMP_WORDS=({quoted}); COMP_CWORD={len(words) - 1}
_infertop
printf '%s\\n' "${{COMPREPLY[@]}}"
"""
    out = subprocess.run(["bash", "--norc", "-c", program], capture_output=True, text=True, cwd=cwd, check=True)
    return sorted(line for line in out.stdout.splitlines() if line)


@pytest.fixture(scope="module")
def bash_script() -> str:
    (run,) = run_infertop(["completion", "bash"])
    assert run.returncode == 0, run.stderr
    return run.stdout


def test_bash_completes_commands_flags_choices_and_files(bash_script: str, tmp_path: Path) -> None:
    assert "records" in _complete(bash_script, ["infertop", "rec"], tmp_path)
    assert _complete(bash_script, ["infertop", "rec"], tmp_path) == ["record", "records"]
    assert _complete(bash_script, ["infertop", "snapshot", "--f"], tmp_path) == ["--fail-on"]
    assert _complete(bash_script, ["infertop", "phase", "wa"], tmp_path) == ["warmup"]
    (tmp_path / "cluster.toml").write_text("")
    assert _complete(bash_script, ["infertop", "snapshot", "--layout", "clu"], tmp_path) == ["cluster.toml"]


@pytest.mark.skipif(shutil.which("fish") is None, reason="fish is not installed")
def test_fish_script_loads(tmp_path: Path) -> None:
    (run,) = run_infertop(["completion", "fish"])
    subprocess.run(["fish", "--no-config", "-c", run.stdout], check=True)


def test_zsh_script_wraps_the_bash_one(bash_script: str) -> None:
    (run,) = run_infertop(["completion", "zsh"])
    assert run.stdout.startswith("# infertop completion for zsh") and "bashcompinit" in run.stdout
    assert "complete -o default -F _infertop infertop" in run.stdout
