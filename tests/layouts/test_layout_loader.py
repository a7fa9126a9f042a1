"""Layout loading: good examples load, and each class of bad layout gets one clear line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from infertop.layouts import LayoutError, example_path, load_layout, parse_layout
from infertop.layouts.hostrange import HostRangeError, expand_hosts


def test_examples_load() -> None:
    for name in ("local", "gb300-trial", "deepseek-64p64d"):  # shipped with the package
        assert example_path(name).is_file()
    big = load_layout(example_path("deepseek-64p64d"))
    roles = [n.role for n in big.nodes]
    assert roles.count("prefill") == 8 and roles.count("decode") == 8
    assert sum(n.gpus or 0 for n in big.nodes if n.role == "prefill") == 64
    assert big.nodes[0].metrics[0] == "http://prefill-01:9400/metrics"
    trial = load_layout(example_path("gb300-trial"))
    assert [n.name for n in trial.nodes] == ["prefill-01", "decode-01", "decode-02", "decode-03"]
    assert trial.nodes[2].ssh == "decode-02"


@pytest.mark.parametrize(
    ("pattern", "names"),
    [
        ("decode-[01-03]", ["decode-01", "decode-02", "decode-03"]),
        ("n[1-2,7]", ["n1", "n2", "n7"]),
        ("r[1-2]g[0-1]", ["r1g0", "r1g1", "r2g0", "r2g1"]),
        ("plain", ["plain"]),
        ("d-[8-10]", ["d-8", "d-9", "d-10"]),
    ],
)
def test_expand_hosts(pattern: str, names: list[str]) -> None:
    assert expand_hosts(pattern) == names


@pytest.mark.parametrize("pattern", ["a-[3-1]", "a-[x-2]", "a-[1-2", "a-]", "a-[]", "a-[1-999999]"])
def test_expand_hosts_bad(pattern: str) -> None:
    with pytest.raises(HostRangeError):
        expand_hosts(pattern)


BAD = [
    ("toml", "[cluster\nname='x'", None, "TOML syntax error", 1),
    ("role", '[[nodes]]\nname = "a"\nrole = "superdecode"\n', "nodes[0].role", "superdecode", 3),
    ("negative price", "[pricing]\ngpu_hour_usd = -3\n", "pricing.gpu_hour_usd", "greater than or equal to 0", 2),
    ("wrong type", '[cluster]\ninterval_s = "fast"\n', "cluster.interval_s", "valid number", 2),
    # TOML writes infinity and NaN; no layout figure means anything there
    ("endless interval", "[cluster]\ninterval_s = inf\n", "cluster.interval_s", "finite number", 2),
    ("hour-long interval", "[cluster]\ninterval_s = 7200\n", "cluster.interval_s", "less than or equal to 3600", 2),
    ("NaN price", "[pricing]\ngpu_hour_usd = nan\n", "pricing.gpu_hour_usd", "finite number", 2),
    ("endless timeout", "[ssh]\nconnect_timeout_s = inf\n", "ssh.connect_timeout_s", "finite number", 2),
    ("duplicate", '[[nodes]]\nname = "a"\n[[nodes]]\nname = "a"\n', "nodes[1].name", "duplicate node name 'a'", 4),
    ("duplicate by range", '[[nodes]]\nname = "d-02"\n[[nodes]]\nhosts = "d-[01-03]"\n', "nodes[2].name", "duplicate", None),
    ("bad url", '[[nodes]]\nname = "a"\nmetrics = ["ftp://x/metrics"]\n', "nodes[0].metrics", "malformed URL", 3),
    ("bad engine url", '[[nodes]]\nname = "a"\nengine = { url = "localhost:8000" }\n', "nodes[0].engine.url", "malformed URL", 3),
    ("unknown key", "[cluster]\nnmae = 'x'\n", "cluster.nmae", "unknown field", 2),
    ("bad range", '[[nodes]]\nhosts = "d-[9-1]"\n', "nodes[0].hosts", "backwards", None),
    ("naive time", '[session]\nreservation_start = 2026-11-29T09:00:00\n', "session.reservation_start", "time zone", 2),
    # a node priced per GPU that does not say how many is billed by the GPUs it shows:
    # $0 when it never answers, while its reserved GPUs are billed all the same
    ("per-GPU price without gpus", '[pricing]\ngpu_hour_usd = 10.582\n[[nodes]]\nname = "a"\ngpus = 8\n'
     '[[nodes]]\nname = "b"\nrole = "decode"\n', "nodes[1].gpus", "priced per GPU", 6),
    ("node's own per-GPU price without gpus", '[pricing]\nnode_hour_usd = 50\n[[nodes]]\nname = "a"\n'
     'gpu_hour_usd = 9.0\n', "nodes[0].gpus", "required for node 'a'", 3),
    ("per-GPU range without gpus", '[pricing]\ngpu_hour_usd = 1\n[[nodes]]\nhosts = "d-[1-2]"\n',
     "nodes[0].gpus", "priced per GPU", 3),
    ("end and duration", '# trial\n[session]\nreservation_end = 2026-11-29T12:00:00Z\nduration_h = 3\n', "session",
     "at most one of reservation_end and duration_h", 2),
    ("end before start", '# trial\n[session]\nreservation_start = 2026-11-29T09:00:00Z\n'
     'reservation_end = 2026-11-29T08:00:00Z\n', "session", "must be after reservation_start", 2),
]


def test_priced_nodes_need_no_gpus_otherwise() -> None:
    """Priced per node, owned, or not priced at all: `gpus` stays optional."""
    parse_layout('[pricing]\nnode_hour_usd = 50\n[[nodes]]\nname = "a"\n')
    parse_layout('[pricing]\ngpu_hour_usd = 9\n[[nodes]]\nname = "a"\nnode_hour_usd = 50\n')
    parse_layout('[pricing]\nmode = "owned"\nkwh_usd = 0.1\n[[nodes]]\nname = "a"\n')
    parse_layout('[[nodes]]\nname = "a"\n')
    node = '[[nodes]]\nname = "a"\n'  # a layout must list what it watches
    end = parse_layout('[session]\nreservation_end = 2026-11-29T12:00:00Z\n' + node).session.reservation_end
    assert end is not None and end.hour == 12
    assert parse_layout("[session]\nduration_h = 3\n" + node).session.duration_h == 3.0


@pytest.mark.parametrize(("label", "text", "field", "problem", "line"), BAD, ids=[b[0] for b in BAD])
def test_bad_layouts(label: str, text: str, field: str | None, problem: str, line: int | None) -> None:
    with pytest.raises(LayoutError) as info:
        parse_layout(text, "bad.toml")
    err = info.value
    message = str(err)
    assert "\n" not in message
    assert message.startswith("bad.toml")
    assert err.field == field
    assert problem in message
    if line is not None:
        assert err.line == line


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(LayoutError, match="no such file"):
        load_layout(tmp_path / "nope.toml")


@pytest.mark.parametrize(
    "text",
    ["[cluster\n", '[[nodes]]\nname = "a"\nrole = "x"\n', "[pricing]\ngpu_hour_usd = -1\n"],
)
def test_cli_bad_layout_exit_2_one_line(tmp_path: Path, text: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    proc = subprocess.run(
        [sys.executable, "-m", "infertop", "snapshot", "--layout", str(path), "--json"],
        capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert str(path) in lines[0]
    assert "Traceback" not in proc.stderr


def test_cli_missing_layout_exit_2() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "infertop", "--layout", "/nonexistent/x.toml", "snapshot"],
        capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip() == "infertop: /nonexistent/x.toml: no such file"
