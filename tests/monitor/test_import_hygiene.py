"""layouts/, collectors/ and monitor/ load without Textual: every module of them, in a
process where importing Textual fails. (The import direction between the rooms is
import-linter's contracts in pyproject.toml, run by `make test`.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
BELOW_THE_VIEWERS = sorted(
    ".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
    for room in ("layouts", "collectors", "monitor")
    for p in (ROOT / "infertop" / room).rglob("*.py")
)


@pytest.mark.parametrize("module", BELOW_THE_VIEWERS)
def test_imports_without_textual(module: str) -> None:
    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'textual' or name.startswith('textual.'):\n"
        "            raise ImportError('textual is blocked in this test')\n"
        "sys.meta_path.insert(0, Block())\n"
        f"import {module}\n"
        "assert not any(m == 'textual' or m.startswith('textual.') for m in sys.modules)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
