"""collectors/ and layouts/ (and the pure evaluation) must load without Textual."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.parametrize(
    "module",
    ["collectors.fleet", "collectors.local", "collectors.registry", "layouts", "infertop.runtime",
     "infertop.evaluation.cluster", "infertop.snapshot_cmd"],
)
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
