"""Issue 19, item 9: a layout is bounded before anything is built from it.

Each hostile layout is a real file (or FIFO, or device) given to the real CLI under a
timeout: exit 2, one line on stderr, no traceback, and fast — the sizes are checked
before a host list, a node list or a file's contents is built.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.layout_cli import assert_refused, run_infertop

MiB = 1024 * 1024


def _write(text: str) -> Callable[[Path], Path]:
    def make(tmp_path: Path) -> Path:
        path = tmp_path / "layout.toml"
        path.write_text(text)
        return path

    return make


def _named_nodes(count: int) -> Callable[[Path], Path]:
    return _write("".join(f'[[nodes]]\nname = "n{i}"\n' for i in range(count)))


def _big_file(size: int) -> Callable[[Path], Path]:
    def make(tmp_path: Path) -> Path:
        path = tmp_path / "big.toml"
        line = "# " + "x" * 1021 + "\n"  # comments: valid TOML all the way
        with path.open("w") as f:
            for _ in range(size // len(line) + 1):
                f.write(line)
        return path

    return make


def _fifo(tmp_path: Path) -> Path:
    path = tmp_path / "layout.fifo"
    os.mkfifo(path)
    return path


def _directory(tmp_path: Path) -> Path:
    path = tmp_path / "layout.d"
    path.mkdir()
    return path


def _dev_zero(tmp_path: Path) -> Path:
    return Path("/dev/zero")


def _many_metrics_per_host(tmp_path: Path) -> Path:
    # small on disk (~170 kB), but 100,000 copies of 5,000 URLs is 500 million values
    urls = ", ".join(f'"http://{{host}}:{9000 + i % 1000}/m{i}"' for i in range(5000))
    return _write(f'[[nodes]]\nhosts = "n[1-100000]"\nmetrics = [{urls}]\n')(tmp_path)


def _deep(kind: str, depth: int) -> Callable[[Path], Path]:
    if kind == "array":
        body = "x = " + "[" * depth + "]" * depth + "\n"
    elif kind == "inline-table":
        body = "[profiles]\np = " + "{ a = " * depth + "1" + " }" * depth + "\n"
    elif kind == "dotted":
        body = "[profiles]\n" + ".".join(["k"] * depth) + " = 1\n"
    else:  # an array deep enough to pass the TOML reader, in a node copied per host
        body = '[[nodes]]\nhosts = "n[1-2]"\nx = ' + "[" * depth + "]" * depth + "\n"
    return _write(body)


# label → (make the layout, words the one line must hold)
HOSTILE_LAYOUTS: dict[str, tuple[Callable[[Path], Path], tuple[str, ...]]] = {
    "range-100-million": (_write('[[nodes]]\nhosts = "n[1-100000000]"\n'), ("nodes[0].hosts", "more than 100000")),
    "range-product": (_write('[[nodes]]\nhosts = "r[1-1000]g[1-1000]"\n'), ("nodes[0].hosts", "more than 100000")),
    "range-product-of-many": (_write('[[nodes]]\nhosts = "a[1-10]b[1-10]c[1-10]d[1-10]e[1-10]f[1-10]"\n'), ("more than 100000",)),
    "range-list-items": (_write('[[nodes]]\nhosts = "n[' + ",".join(["1-50000"] * 3) + ']"\n'), ("more than 100000",)),
    "range-number-5000-digits": (_write('[[nodes]]\nhosts = "n[1-' + "9" * 5000 + ']"\n'), ("nodes[0].hosts",)),
    "range-2000-groups": (_write('[[nodes]]\nhosts = "n' + "[1]" * 2000 + '"\n'), ("nodes[0].hosts",)),
    "range-170-groups": (_write('[[nodes]]\nhosts = "n' + "[1]" * 170 + '"\n'), ("nodes[0].name",)),
    "range-number-19-digits": (_write('[[nodes]]\nhosts = "n[1-' + "9" * 19 + ']"\n'), ("digits",)),
    "ranges-over-blocks": (_write('[[nodes]]\nhosts = "a[1-60000]"\n[[nodes]]\nhosts = "b[1-60000]"\n'), ("nodes", "more than 100000")),
    "named-nodes-100001": (_named_nodes(100_001), ("nodes", "more than 100000")),
    "range-times-node-size": (_many_metrics_per_host, ("nodes[0]", "too large")),
    "file-5-MiB": (_big_file(5 * MiB), ("MiB",)),
    "file-50-MiB": (_big_file(50 * MiB), ("MiB",)),
    "fifo": (_fifo, ("FIFO", "not a regular file")),
    "dev-zero": (_dev_zero, ("/dev/zero", "not a regular file")),
    "directory": (_directory, ("directory",)),
    "nested-array-500": (_deep("array", 500), ("nested",)),
    "nested-array-5000": (_deep("array", 5000), ("nested",)),
    "nested-inline-tables-400": (_deep("inline-table", 400), ("nested",)),
    "nested-dotted-keys-900": (_deep("dotted", 900), ("nested",)),
    "nested-in-a-range-400": (_deep("range", 400), ("nested",)),
}


@pytest.mark.hostile
@pytest.mark.parametrize(("make", "needles"), HOSTILE_LAYOUTS.values(), ids=HOSTILE_LAYOUTS.keys())
def test_cli_refuses_an_unbounded_layout_fast(
    tmp_path: Path, make: Callable[[Path], Path], needles: tuple[str, ...]
) -> None:
    path = make(tmp_path)
    run = run_infertop(["snapshot", "--layout", str(path), "--window", "1"], timeout_s=20)
    assert_refused(run, str(path), *needles, max_s=5.0)


RICH_NODE = (
    'role = "decode"\ngpus = 8\nssh = "{host}"\n'
    'metrics = ["http://{host}:9400/metrics", "http://{host}:9100/metrics"]\n'
    'engine = { url = "http://127.0.0.1:8000/metrics", profile = "vllm", log = "/var/log/vllm/{host}.log" }\n'
    'nics = [{ name = "mlx5_0", expected_gbps = 400 }, { name = "bond0", expected_gbps = 200, kind = "bond" }]\n'
)


def test_a_large_honest_range_still_loads(tmp_path: Path) -> None:
    from infertop.layouts import load_layout

    path = tmp_path / "big.toml"
    path.write_text('[[nodes]]\nhosts = "decode-[000001-100000]"\nrole = "decode"\nssh = "{host}"\n')
    layout = load_layout(path)
    assert len(layout.nodes) == 100_000
    assert layout.nodes[-1].ssh == "decode-100000"
    path.write_text('[[nodes]]\nhosts = "decode-[000001-010000]"\n' + RICH_NODE)
    assert load_layout(path).nodes[-1].metrics[0] == "http://decode-010000:9400/metrics"


def test_the_size_budget_admits_100000_rich_nodes() -> None:
    import tomllib

    from infertop.layouts.loader import _check_sizes

    text = '[[nodes]]\nhosts = "decode-[000001-100000]"\n' + RICH_NODE
    _check_sizes("big.toml", text, tomllib.loads(text)["nodes"])  # counts only; raises if refused
