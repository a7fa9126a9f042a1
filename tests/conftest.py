"""Shared fixtures. Autouse: the developer's own config never leaks into tests."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("INFERTOP_STATE_DIR", str(home / ".infertop"))
    monkeypatch.setenv("XDG_STATE_HOME", str(home / ".local" / "state"))
