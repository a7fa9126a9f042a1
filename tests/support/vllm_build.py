"""Builds the session's tiny models in one process (torch and transformers imported once).

Run with the vLLM venv's python: ``python tests/support/vllm_build.py KIND OUT [KIND OUT …]``,
KIND one of `llama` (`vllm_tiny_model.py`), `deepseek` and `deepseek-disagree`
(`vllm_tiny_deepseek.py`, the second with its MTP head scrambled).
"""

from __future__ import annotations

import sys
from pathlib import Path

from tests.support import vllm_tiny_deepseek, vllm_tiny_model

KINDS = ("llama", "deepseek", "deepseek-disagree")


def build(kind: str, out: Path) -> None:
    if kind == "llama":
        vllm_tiny_model.build(out)
    elif kind in ("deepseek", "deepseek-disagree"):
        vllm_tiny_deepseek.build(out, disagree=kind == "deepseek-disagree")
    else:
        raise SystemExit(f"unknown model kind {kind!r} (one of {', '.join(KINDS)})")


if __name__ == "__main__":
    pairs = sys.argv[1:]
    if not pairs or len(pairs) % 2:
        raise SystemExit("usage: vllm_build.py KIND OUT [KIND OUT …]")
    for kind, out in zip(pairs[::2], pairs[1::2], strict=True):
        build(kind, Path(out))
        print(out)
