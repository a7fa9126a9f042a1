"""Where the checkout, its virtual environment and the test fixtures are."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent
TESTS = REPO / "tests"
FIXTURES = TESTS / "fixtures"
VENV_BIN = REPO / ".venv" / "bin"


def infertop_bin() -> str:
    candidate = VENV_BIN / "infertop"
    return str(candidate) if candidate.exists() else "infertop"


def is_root() -> bool:
    return os.geteuid() == 0
