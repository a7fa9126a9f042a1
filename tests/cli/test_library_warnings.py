"""A library's warnings never reach the operator's terminal; infertop's own words do.

The installed command runs under `-W default` (PYTHONWARNINGS=default, which shows every
warning once) with a package that warns when asyncssh is imported: its stderr holds only
infertop's own line. The gate itself is checked in-process: an infertop warning still shows,
a library's goes to the debug log, held until logging is set up.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from infertop.collectors.process import library_warnings

REPO = Path(__file__).resolve().parents[2]
INSTALLED = Path(sys.executable).parent / "infertop"

# Imported first by every Python started with this folder on PYTHONPATH: when anything
# imports pydantic (as infertop's CLI does, before logging is set up), it warns twice from a
# file that is not infertop's, the way cryptography 51 warns about DSA under asyncssh 2.24
# (asyncssh itself now loads only with the commands that collect, after logging is set up).
NOISY_SITECUSTOMIZE = '''
import sys, warnings

class _WarnOnImport:
    def find_spec(self, name, path=None, target=None):
        if name == "pydantic":
            warnings.warn("NOISE-deprecated: a library's deprecation", DeprecationWarning, stacklevel=1)
            warnings.warn("NOISE-user: a library's user warning", UserWarning, stacklevel=1)
        return None

sys.meta_path.insert(0, _WarnOnImport())
'''


def _commands() -> list[list[str]]:
    found = [[str(INSTALLED)]] if INSTALLED.exists() else []
    return [*found, [sys.executable, "-m", "infertop"]]


@pytest.fixture
def noisy_env(tmp_path: Path) -> dict[str, str]:
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(NOISY_SITECUSTOMIZE)
    return {
        **os.environ,
        "PYTHONWARNINGS": "default",
        "PYTHONPATH": os.pathsep.join([str(site), str(REPO)]),
        "INFERTOP_STATE_DIR": str(tmp_path / "state"),
        "HOME": str(tmp_path),
    }


def _run(command: list[str], args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*command, *args], capture_output=True, text=True, env=env, timeout=120,
                           cwd=env["HOME"])


def test_the_noisy_package_really_warns(noisy_env: dict[str, str]) -> None:
    # the control: without the gate, the same import prints the noise (else the test proves nothing)
    done = _run([sys.executable, "-c", "import pydantic"], [], noisy_env)
    assert "NOISE-deprecated" in done.stderr and "NOISE-user" in done.stderr


@pytest.mark.parametrize("command", _commands(), ids=lambda c: Path(c[-1]).name)
def test_installed_command_prints_only_its_own_words(command: list[str], noisy_env: dict[str, str],
                                                     tmp_path: Path) -> None:
    version = _run(command, ["--version"], noisy_env)
    assert version.returncode == 0 and version.stderr == "", version.stderr
    helped = _run(command, ["--help"], noisy_env)
    assert helped.returncode == 0 and helped.stderr == "", helped.stderr
    sub_help = _run(command, ["record", "--help"], noisy_env)
    assert sub_help.returncode == 0 and sub_help.stderr == "", sub_help.stderr

    bad = tmp_path / "bad.toml"
    bad.write_text('[cluster]\nname = "x"\ninterval_s = "soon"\n')
    failed = _run(command, ["snapshot", "--layout", str(bad)], noisy_env)
    assert failed.returncode == 2
    lines = failed.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("infertop: "), failed.stderr


def test_verbose_shows_library_warnings_in_the_debug_log(noisy_env: dict[str, str], tmp_path: Path) -> None:
    # held until logging is set up, then logged at debug level: -v shows them, named as a library's
    missing = tmp_path / "missing.toml"
    done = _run([sys.executable, "-m", "infertop"], ["-v", "snapshot", "--layout", str(missing)], noisy_env)
    assert done.returncode == 2
    debug = [line for line in done.stderr.splitlines() if "NOISE-" in line]
    assert len(debug) == 2 and all("infertop.library_warnings" in line for line in debug), done.stderr


def test_own_warning_shows_library_warning_is_logged(caplog) -> None:  # type: ignore[no-untyped-def]
    own_file = str(REPO / "monitor" / "monitor.py")
    library_file = str(Path(logging.__file__))
    shown: list[str] = []
    with warnings.catch_warnings(), caplog.at_level(logging.DEBUG, logger=library_warnings.LOGGER_NAME):
        # what showed warnings before the gate (stderr, in a real process)
        warnings.showwarning = lambda message, *rest: shown.append(str(message))
        library_warnings.install()
        warnings.warn_explicit("infertop says so", UserWarning, own_file, 1)
        warnings.warn_explicit("a library says so", UserWarning, library_file, 1)
    assert shown == ["infertop says so"]
    assert [r for r in caplog.records if r.getMessage().endswith("UserWarning: a library says so")]


def test_deprecations_are_for_developers_even_from_infertop() -> None:
    own_file = str(REPO / "tui" / "app.py")
    assert library_warnings.is_own_warning(UserWarning, own_file)
    assert not library_warnings.is_own_warning(DeprecationWarning, own_file)
    assert not library_warnings.is_own_warning(UserWarning, "/usr/lib/python3/dist-packages/x.py")
    # a file beside the packages (a test, a benchmark) is not a room of the product
    assert not library_warnings.is_own_warning(UserWarning, str(REPO / "tests" / "conftest.py"))
