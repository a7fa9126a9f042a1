"""The bundled probe: self-contained, streams JSON lines, exits with its session, fetches
an engine endpoint from the node's side; the bundler refuses what would break on a node."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from infertop.collectors.probe.bundle import (
    BOOTSTRAP,
    STRIP_BEGIN,
    STRIP_END,
    BundleError,
    bootstrap_payload,
    build_script,
    probe_script,
)
from infertop.collectors.probe.engine import fetch_engine
from infertop.collectors.sources.ssh import ProbeLines, SshNode, SshSource, parse_target, probe_command

PYTHON = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable

VLLM_TEXT = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 3.0
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="m"} 1234.0
# TYPE vllm:iteration_tokens_total histogram
vllm:iteration_tokens_total_bucket{engine="0",le="1.0",model_name="m"} 5.0
vllm:iteration_tokens_total_bucket{engine="0",le="+Inf",model_name="m"} 77.0
vllm:iteration_tokens_total_count{engine="0",model_name="m"} 77.0
vllm:iteration_tokens_total_sum{engine="0",model_name="m"} 900.0
# TYPE vllm:inter_token_latency_seconds histogram
vllm:inter_token_latency_seconds_bucket{engine="0",le="0.025",model_name="m"} 10.0
vllm:inter_token_latency_seconds_bucket{engine="0",le="0.05",model_name="m"} 90.0
vllm:inter_token_latency_seconds_bucket{engine="0",le="+Inf",model_name="m"} 100.0
vllm:inter_token_latency_seconds_count{engine="0",model_name="m"} 100.0
vllm:inter_token_latency_seconds_sum{engine="0",model_name="m"} 3.5
"""


def _run_script(tmp_path: Path, config: dict[str, object]) -> list[dict[str, object]]:
    """The bundled probe as a file, run by a bare interpreter in an empty directory."""
    empty = tmp_path / "empty"
    empty.mkdir()
    script = tmp_path / "probe.py"
    script.write_text(probe_script())
    result = subprocess.run(
        [PYTHON, "-I", str(script), json.dumps(config)],
        cwd=empty, capture_output=True, text=True, timeout=30,
    )
    assert result.returncode == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()]


def test_bundled_probe_runs_isolated_without_the_repo(tmp_path: Path) -> None:
    readings = _run_script(tmp_path, {"interval_s": 0.05, "count": 3})
    assert len(readings) == 3
    first = readings[0]
    assert first["v"] == 1
    nics = first["nics"]
    assert isinstance(nics, list)
    names = {n["name"] for n in nics}
    assert "lo" in names
    assert isinstance(first["gpus"], list)
    assert isinstance(first["probe_cpu_s"], float)
    # the bundle holds no package import the node could not satisfy
    assert "from infertop" not in probe_script()


def test_bootstrap_reads_script_and_config_from_stdin_and_exits_on_eof(tmp_path: Path) -> None:
    argv = shlex.split(probe_command(PYTHON))
    assert argv == [PYTHON, "-c", BOOTSTRAP]
    proc = subprocess.Popen(
        argv, cwd=tmp_path, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(bootstrap_payload(json.dumps({"interval_s": 0.05})))
        proc.stdin.flush()
        lines = [json.loads(proc.stdout.readline()) for _ in range(2)]
        assert all("nics" in line for line in lines)
        proc.stdin.close()  # the SSH session closing
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_probe_command_quotes_a_hostile_interpreter_name(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    command = probe_command(f"python3; touch {marker}")
    result = subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=10)
    assert result.returncode == 127  # one (odd) program name, not found
    assert not marker.exists()


# ---------------------------------------------------------------------------- bundler


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_bundle_pastes_helpers_and_strips_marked_imports(tmp_path: Path) -> None:
    helper = _write(tmp_path / "helper.py", "from __future__ import annotations\n\ndef twice(x):\n    return 2 * x\n")
    main = _write(
        tmp_path / "main.py",
        "#!/usr/bin/env python3\nfrom __future__ import annotations\n"
        f"{STRIP_BEGIN}\nfrom collectors.helper import twice\n{STRIP_END}\nprint(twice(21))\n",
    )
    script = build_script([helper], main)
    assert script.count("from __future__") == 1
    result = subprocess.run([PYTHON, "-I", "-c", script], capture_output=True, text=True, timeout=10)
    assert result.stdout.strip() == "42", result.stderr


@pytest.mark.parametrize(
    ("helper", "main", "problem"),
    [
        ("x = 1\n", "from infertop.collectors.helper import x\n", "outside"),
        ("def read_net():\n    pass\n", "def read_net():\n    pass\n", "also defined"),
        ("x = 1\n", f"{STRIP_BEGIN}\nimport os\n", "never closed"),
        ("if __name__ == '__main__':\n    pass\n", "pass\n", "main block"),
        ("def broken(:\n", "pass\n", "helper.py:1"),
    ],
)
def test_bundle_refuses_what_would_break_on_a_node(
    tmp_path: Path, helper: str, main: str, problem: str
) -> None:
    with pytest.raises(BundleError, match=problem):
        build_script([_write(tmp_path / "helper.py", helper)], _write(tmp_path / "main.py", main))


# ---------------------------------------------------------------------------- engine fetch


class _Engine(BaseHTTPRequestHandler):
    body = VLLM_TEXT.encode()

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def engine_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Engine)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/metrics"
    finally:
        server.shutdown()
        server.server_close()


def test_probe_fetches_engine_text_without_buckets_or_help(tmp_path: Path, engine_url: str) -> None:
    readings = _run_script(
        tmp_path, {"interval_s": 0.05, "count": 1, "engine": {"url": engine_url, "timeout_s": 2}}
    )
    text = readings[0]["engine_text"]
    assert isinstance(text, str)
    assert "iteration_tokens_total_bucket" not in text and "# HELP" not in text
    # the latency buckets travel: the scoreboard's percentiles come from them
    assert 'vllm:inter_token_latency_seconds_bucket{engine="0",le="0.05",model_name="m"} 90.0' in text
    assert 'vllm:iteration_tokens_total_count{engine="0",model_name="m"} 77.0' in text


def test_probe_keeps_exactly_the_latency_buckets_the_scoreboard_reads() -> None:
    from infertop.collectors.pages.histograms import LATENCY_HISTOGRAMS
    from infertop.collectors.probe.engine import KEEP_BUCKETS

    wanted = {f"{b}_bucket" for bases in LATENCY_HISTOGRAMS.values() for b in bases}
    assert set(KEEP_BUCKETS) == wanted


def test_engine_fetch_errors_are_one_line(engine_url: str) -> None:
    text, error = fetch_engine(engine_url, 2.0, max_bytes=100)
    assert text is None and error is not None and "100-byte cap" in error
    text, error = fetch_engine("http://127.0.0.1:1/metrics", 1.0)
    assert text is None and error is not None and "\n" not in error and "refused" in error.lower()


def test_ssh_side_turns_engine_text_into_an_engine_sample(tmp_path: Path, engine_url: str) -> None:
    readings = _run_script(
        tmp_path, {"interval_s": 0.05, "count": 1, "engine": {"url": engine_url, "timeout_s": 2}}
    )
    source = SshSource([SshNode("n1", "n1", engine_url=engine_url)], interval_s=1.0)
    lines = ProbeLines(_never_read)
    sample = source._sample(source.ssh_nodes[0], json.dumps(readings[0]).encode(), lines)
    assert sample is not None and sample.error is None
    assert sample.engine is not None
    assert sample.engine.steps_total == 77.0
    assert sample.engine.generation_tokens_total == 1234.0
    assert sample.engine.requests_running == 3.0
    assert sample.engine.latency_buckets == {"itl": ((0.025, 10.0), (0.05, 90.0), (float("inf"), 100.0))}
    garbage = dict(readings[0], engine_text="vllm:num_requests_running{{{ nonsense\n")
    sample = source._sample(source.ssh_nodes[0], json.dumps(garbage).encode(), lines)
    assert sample is not None and sample.error is None and sample.engine is None
    assert any(note.startswith("engine metrics:") for note in sample.notes)


async def _never_read(n: int) -> bytes:
    raise AssertionError("not read in these tests")


def test_ssh_side_counts_a_bad_line_and_says_so_without_escapes() -> None:
    source = SshSource([SshNode("n1", "n1")], interval_s=1.0)
    lines = ProbeLines(_never_read)
    assert source._sample(source.ssh_nodes[0], b"\x1b[31mnot json\n", lines) is None  # dropped
    assert lines.bad == 1
    notes = lines.dropped()
    assert notes and "1 unreadable line(s) dropped" in notes[0] and "\x1b" not in notes[0]


@pytest.mark.parametrize(
    ("target", "host", "port", "user"),
    [
        ("decode-01", "decode-01", None, None),
        ("root@10.0.0.1", "10.0.0.1", None, "root"),
        ("10.0.0.1:2222", "10.0.0.1", 2222, None),
        ("ops@[fe80::1]:22", "fe80::1", 22, "ops"),
        ("fe80::1", "fe80::1", None, None),
    ],
)
def test_parse_target(target: str, host: str, port: int | None, user: str | None) -> None:
    parsed = parse_target(target)
    assert (parsed.host, parsed.port, parsed.user) == (host, port, user)


@pytest.mark.parametrize("target", ["", "host:0", "host:99999", "user@"])
def test_parse_target_refuses_garbage(target: str) -> None:
    with pytest.raises(ValueError):
        parse_target(target)


def test_connect_options_verify_host_keys_unless_explicitly_told_not_to(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from infertop.layouts.model import SshOptions

    monkeypatch.setenv("HOME", str(tmp_path))
    target = parse_target("ops@node-1:2200")
    default = SshSource([SshNode("n", "n")], 1.0)._connect_kwargs(target)
    assert "known_hosts" not in default  # asyncssh's default: ~/.ssh/known_hosts, verified
    assert (default["port"], default["username"]) == (2200, "ops")
    assert default["keepalive_interval"] > 0
    (tmp_path / "cfg").write_text("")  # a named config must exist, ours, writable by us only
    (tmp_path / "cfg").chmod(0o600)
    custom = SshOptions(known_hosts="~/kh", config="~/cfg", identity_files=["~/id"])
    kwargs = SshSource([SshNode("n", "n")], 1.0, custom)._connect_kwargs(target)
    assert kwargs["known_hosts"] == str(tmp_path / "kh")
    assert kwargs["config"] == [str(tmp_path / "cfg")]
    assert kwargs["client_keys"] == [str(tmp_path / "id")]
    insecure = SshSource([SshNode("n", "n")], 1.0, SshOptions(insecure_no_host_key_check=True))
    assert insecure._connect_kwargs(target)["known_hosts"] is None
