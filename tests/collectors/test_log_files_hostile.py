"""Issue 19 (Smaller; item 7 for FIFOs): an engine log path is only ever a regular file
in the log's own directory.

infertop often runs as root on a node; the engine's log directory is often writable by
the engine's user. A symlink there to /etc/shadow was read and a value shown; a FIFO
there blocked the opening thread forever and hung `snapshot`. The follower (the same
code in the local log source and in the SSH probe) opens without blocking, refuses
anything but a regular file, and refuses a file that resolves outside the log's
directory unless the layout says `log_follow_symlink_out = true`.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from infertop.collectors.probe.bundle import probe_script
from tests.support.layout_cli import run_infertop, toml_str

# a stats line whose figures are unmistakable: if 4242 shows up, the file was read
SECRET_LINE = (
    "INFO 08-04 20:51:00 [loggers.py:123] Engine 000: Avg prompt throughput: 0.0 tokens/s, "
    "Avg generation throughput: 10.0 tokens/s, Running: 4242 reqs, Waiting: 0 reqs, "
    "GPU KV cache usage: 1.0%\n"
)


def _layout(tmp_path: Path, log: Path, extra: str = "") -> Path:
    layout = tmp_path / "layout.toml"
    layout.write_text(
        "[cluster]\ninterval_s = 0.2\nwindow_s = 1\n\n"
        f'[[nodes]]\nname = "n"\nlocal = true\nengine = {{ log = {toml_str(str(log))}{extra} }}\n'
    )
    return layout


def _snapshot(layout: Path) -> dict:
    run = run_infertop(["snapshot", "--layout", str(layout), "--window", "1", "--json"], timeout_s=20)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.cpu_s < 8, f"took {run.cpu_s:.1f} s of CPU"
    (node,) = json.loads(run.stdout)["nodes"]
    return node


def _secret_elsewhere(tmp_path: Path) -> Path:
    secret_dir = tmp_path / "etc"
    secret_dir.mkdir()
    secret = secret_dir / "shadow"
    secret.write_text(SECRET_LINE * 3)
    secret.chmod(0o600)
    return secret


def _log_dir(tmp_path: Path) -> Path:
    logs = tmp_path / "logs"
    logs.mkdir()
    return logs


def _absolute_link(tmp_path: Path) -> Path:
    link = _log_dir(tmp_path) / "engine.log"
    link.symlink_to(_secret_elsewhere(tmp_path))
    return link


def _relative_link(tmp_path: Path) -> Path:
    secret = _secret_elsewhere(tmp_path)
    link = _log_dir(tmp_path) / "engine.log"
    link.symlink_to(Path("..") / secret.parent.name / secret.name)
    return link


def _chained_links(tmp_path: Path) -> Path:
    # engine.log → current.log (same directory, fine) → the secret (outside)
    logs = _log_dir(tmp_path)
    (logs / "current.log").symlink_to(_secret_elsewhere(tmp_path))
    link = logs / "engine.log"
    link.symlink_to("current.log")
    return link


def _dir_link_inside(tmp_path: Path) -> Path:
    # a log one directory further down, linking out of that directory
    run = _log_dir(tmp_path) / "run"
    run.mkdir()
    (run / "engine.log").symlink_to(_secret_elsewhere(tmp_path))
    return run / "engine.log"


SYMLINKS_OUT = {
    "absolute": _absolute_link,
    "relative-dotdot": _relative_link,
    "chain-via-same-dir": _chained_links,
    "in-a-subdirectory": _dir_link_inside,
}


@pytest.mark.hostile
@pytest.mark.parametrize("make", SYMLINKS_OUT.values(), ids=SYMLINKS_OUT.keys())
def test_a_log_symlinked_out_of_its_directory_is_not_read(tmp_path: Path, make) -> None:
    node = _snapshot(_layout(tmp_path, make(tmp_path)))
    assert node["engine"]["requests_running"] is None  # nothing from the secret file
    # the figure 4242 itself, not the digits inside another figure (an age of
    # 0.13778424263 s held "4242" and failed a clean-clone run)
    assert not re.search(r"(?<![\d.])4242(?![\d])", json.dumps(node["engine"]))
    assert any("outside" in n and "log_follow_symlink_out" in n for n in node["notes"]), node["notes"]


@pytest.mark.hostile
@pytest.mark.skipif(not os.path.exists("/etc/shadow") or os.geteuid() != 0, reason="needs root and /etc/shadow")
def test_a_log_symlinked_to_etc_shadow_shows_nothing(tmp_path: Path) -> None:
    link = _log_dir(tmp_path) / "engine.log"
    link.symlink_to("/etc/shadow")
    layout = tmp_path / "layout.toml"
    # the original report: a user pattern that turns any digits of the file into a figure
    layout.write_text(
        "[cluster]\ninterval_s = 0.2\n\n"
        f'[[nodes]]\nname = "n"\nlocal = true\n'
        f'engine = {{ log = {toml_str(str(link))}, log_patterns = "any" }}\n\n'
        '[[log_patterns.any]]\nregex = \'(?P<requests_running>\\d+)\'\nkind = "gauge"\n'
    )
    node = _snapshot(layout)
    assert node["engine"]["requests_running"] is None
    assert any("outside" in n for n in node["notes"])


def test_a_symlink_within_the_directory_is_followed(tmp_path: Path) -> None:
    logs = _log_dir(tmp_path)
    (logs / "run-1.log").write_text(SECRET_LINE)
    (logs / "engine.log").symlink_to("run-1.log")
    node = _snapshot(_layout(tmp_path, logs / "engine.log"))
    assert node["engine"]["requests_running"] == 4242


def test_the_layout_may_allow_a_symlink_out(tmp_path: Path) -> None:
    node = _snapshot(_layout(tmp_path, _absolute_link(tmp_path), ", log_follow_symlink_out = true"))
    assert node["engine"]["requests_running"] == 4242


# ---------------------------------------------------------------- FIFOs and devices


def _fifo(tmp_path: Path) -> Path:
    path = _log_dir(tmp_path) / "engine.log"
    os.mkfifo(path)
    return path


def _fifo_via_symlink(tmp_path: Path) -> Path:
    logs = _log_dir(tmp_path)
    os.mkfifo(logs / "pipe")
    (logs / "engine.log").symlink_to("pipe")
    return logs / "engine.log"


def _dev_zero_link(tmp_path: Path) -> Path:
    link = _log_dir(tmp_path) / "engine.log"
    link.symlink_to("/dev/zero")
    return link


def _unix_socket(tmp_path: Path) -> Path:
    import socket

    path = _log_dir(tmp_path) / "engine.log"
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(path))  # left bound: the file stays a socket
    return path


# label → (make it, what the note calls it, the layout allows symlinks out)
SPECIAL_FILES = {
    "fifo": (_fifo, "FIFO", False),
    "fifo-via-symlink": (_fifo_via_symlink, "FIFO", False),
    "dev-zero": (lambda tmp_path: Path("/dev/zero"), "character device", False),
    "dev-zero-via-symlink-allowed-out": (_dev_zero_link, "character device", True),
    "unix-socket": (_unix_socket, "socket", False),
}


@pytest.mark.hostile
@pytest.mark.parametrize(("make", "kind", "allow_out"), SPECIAL_FILES.values(), ids=SPECIAL_FILES.keys())
def test_a_special_file_as_engine_log_is_refused_without_hanging(
    tmp_path: Path, make, kind: str, allow_out: bool
) -> None:
    extra = ", log_follow_symlink_out = true" if allow_out else ""
    node = _snapshot(_layout(tmp_path, make(tmp_path), extra))
    assert any(kind in n and "not a regular file" in n for n in node["notes"]), node["notes"]


# ---------------------------------------------------------------- the probe's follower


def _run_probe(tmp_path: Path, log: Path, **engine_log: object) -> list[dict]:
    script = tmp_path / "probe.py"
    script.write_text(probe_script())
    config = {
        "interval_s": 0.2, "count": 2, "npu_smi": False,
        "engine_log": {"path": str(log), "pattern_sets": ["vllm"], **engine_log},
    }
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, str(script), json.dumps(config)],
        capture_output=True, text=True, timeout=20, env=env, check=False,
    )
    assert out.returncode == 0, out.stderr
    return [json.loads(line) for line in out.stdout.splitlines()]


PROBE_CASES = {
    "symlink-out": (_absolute_link, "outside"),
    "fifo": (_fifo, "FIFO"),
    "dev-zero": (lambda tmp_path: Path("/dev/zero"), "character device"),
}


@pytest.mark.hostile
@pytest.mark.parametrize(("make", "words"), PROBE_CASES.values(), ids=PROBE_CASES.keys())
def test_the_probe_refuses_the_same_files(tmp_path: Path, make, words: str) -> None:
    readings = _run_probe(tmp_path, make(tmp_path))
    assert len(readings) == 2
    assert all((r.get("engine") or {}).get("requests_running") is None for r in readings)
    assert any(words in n for n in readings[-1]["notes"]), readings[-1]["notes"]


def test_the_probe_follows_a_symlink_out_when_allowed(tmp_path: Path) -> None:
    readings = _run_probe(tmp_path, _absolute_link(tmp_path), follow_symlink_out=True)
    assert readings[-1]["engine"]["requests_running"] == 4242


async def test_a_stuck_read_is_not_queued_behind(tmp_path: Path) -> None:
    # a read that never returns (a hung file system) held the lock; each later poll
    # queued another worker thread behind it, from the pool every source shares
    from infertop.collectors.sources.log_source import LogReadBusy, local_log_sources
    from infertop.layouts.loader import parse_layout

    log = tmp_path / "engine.log"
    log.write_text(SECRET_LINE)
    (source,) = local_log_sources(parse_layout(_layout(tmp_path, log).read_text()))
    assert (await source.poll())[0].engine is not None
    source._lock.acquire()  # as a read stuck in the kernel would hold it
    try:
        with pytest.raises(LogReadBusy):
            await source.poll()
        await source.close()  # gives up after a moment instead of waiting for the read
    finally:
        source._lock.release()
    await source.close()
