"""Shared fixtures. Autouse: the developer's own config never leaks into tests."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("INFERTOP_STATE_DIR", str(home / ".infertop"))
    monkeypatch.setenv("XDG_STATE_HOME", str(home / ".local" / "state"))


REPO = Path(__file__).resolve().parent.parent
VENV_BIN = REPO / ".venv" / "bin"


def infertop_bin() -> str:
    candidate = VENV_BIN / "infertop"
    return str(candidate) if candidate.exists() else "infertop"


def is_root() -> bool:
    return os.geteuid() == 0
