"""Port state against Debian's real `prometheus-node-exporter` (1.5.0 here), started by the
suite, beside the re-created pages of tests/collectors/test_upstream_node_exporter.py.

Loopback reports operstate `unknown` (its driver reports none) with a carrier while it
carries traffic: it is up (`unknown_up`), never a down port, and an expected `lo` is not
judged link-starved (issue 44: it was, critical, "lo unknown", while moving 42 MB/s). The
probe's sysfs reader (the local source's too) says the same of this machine's `lo`.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from infertop.collectors.pages.exporters import EXPORTER_WANTED, parts_from_exporter
from infertop.collectors.pages.exposition import parse_exposition
from infertop.collectors.probe.host import read_nics
from infertop.collectors.sample import NicSample
from infertop.layouts.loader import parse_layout
from infertop.monitor.monitor import Monitor
from tests.support.port_file_process import stop
from tests.support.vllm_server import free_port
from tests.support.waiting import until, until_async

pytestmark = pytest.mark.integration
EXPORTER = "/usr/bin/prometheus-node-exporter"


@pytest.fixture(scope="module")
def exporter_url() -> Iterator[str]:
    if shutil.which(EXPORTER) is None:
        pytest.skip(f"{EXPORTER} missing (scripts/install-system-deps.sh installs it)")
    port = free_port()
    proc = subprocess.Popen(
        [EXPORTER, f"--web.listen-address=127.0.0.1:{port}", "--collector.disable-defaults",
         # Debian's build leaves loopback out of netdev (^lo$) unless told otherwise
         "--collector.netdev", "--collector.netdev.device-exclude=^$", "--collector.netclass"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        until(lambda: _answers(url), 30.0, "node_exporter to listen", gave_up=lambda: proc.poll() is not None)
        yield url
    finally:
        stop(proc)


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def _nics(url: str) -> dict[str, NicSample]:
    with urllib.request.urlopen(url, timeout=5) as response:
        text = response.read().decode()
    parts = parts_from_exporter(parse_exposition(text, url, wanted=EXPORTER_WANTED), keep_nics=("lo",))
    nics = parts["nics"]
    assert isinstance(nics, list)
    return {n.name: n for n in nics}


def _sysfs(name: str, field: str) -> str:
    return (Path("/sys/class/net") / name / field).read_text().strip()


def test_loopback_with_operstate_unknown_and_a_carrier_is_up(exporter_url: str) -> None:
    assert _sysfs("lo", "operstate") == "unknown" and _sysfs("lo", "carrier") == "1"  # the premise
    lo = _nics(exporter_url)["lo"]
    assert lo.state == "unknown_up"
    assert lo.is_up is True
    assert lo.kind == "loopback"


def test_every_port_reads_as_the_kernel_says(exporter_url: str) -> None:
    """Each port the exporter shows against this machine's own sysfs: `up` is up, a port
    with no carrier reading and operstate down is down, `unknown` with a carrier is up.
    Ports that change meanwhile (a namespace test adding a bridge beside) are not judged."""
    before = _kernel_states()
    nics = _nics(exporter_url)
    after = _kernel_states()
    steady = {name: state for name, state in before.items() if after.get(name) == state}
    assert "lo" in steady
    for name, nic in nics.items():
        if name not in steady:
            continue
        operstate, carrier = steady[name]
        if operstate == "up":
            assert nic.is_up is True, name
        elif operstate == "down":
            assert nic.is_up is False, name
        elif operstate == "unknown":
            assert nic.state == ("unknown_up" if carrier == "1" else "down"), name


def _kernel_states() -> dict[str, tuple[str, str | None]]:
    states = {}
    for device in Path("/sys/class/net").iterdir():
        try:
            operstate = _sysfs(device.name, "operstate")
        except OSError:
            continue  # gone meanwhile
        try:
            carrier: str | None = _sysfs(device.name, "carrier")
        except OSError:  # a down device answers EINVAL
            carrier = None
        states[device.name] = (operstate, carrier)
    return states


def test_the_probes_sysfs_reader_says_the_same_of_loopback() -> None:
    (lo,) = [n for n in read_nics(keep=frozenset({"lo"})) if n["name"] == "lo"]
    assert lo["state"] == "unknown_up"


class _LoopbackTraffic:
    """Bytes kept moving over loopback (a TCP pair), so `lo` carries traffic while judged."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with socket.create_connection(self.server.getsockname()) as out:
            peer, _ = self.server.accept()
            with peer:
                chunk = b"x" * 65536
                while not self.stop.is_set():
                    out.sendall(chunk)
                    peer.recv(1 << 20)
                    time.sleep(0.001)

    def __enter__(self) -> _LoopbackTraffic:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        self.thread.join(5)
        self.server.close()


async def test_an_expected_loopback_that_carries_traffic_is_not_link_starved(exporter_url: str) -> None:
    layout = parse_layout(
        f"""
[cluster]
interval_s = 0.5
window_s = 2
[thresholds]
hold_s = 0
[[nodes]]
name = "here"
metrics = ["{exporter_url}"]
nics = [{{ name = "lo" }}]
""",
        "lo.toml",
    )
    monitor = Monitor(layout)
    with _LoopbackTraffic():
        await monitor.start(tick=False)
        try:
            state = monitor.state.nodes["here"]
            await until_async(lambda: len(state.by_source.get("scrape", ())) >= 3, 30.0, "three scrapes")
            monitor.tick()
            snapshot = monitor.tick()
        finally:
            await monitor.stop()
    (node,) = snapshot.nodes
    (lo,) = [n for n in node.nics if n.name == "lo"]
    assert lo.up is True and lo.state == "unknown_up"
    assert lo.rx_bytes_per_s is not None and lo.rx_bytes_per_s > 0  # it carries traffic
    assert [v for v in node.verdicts if v.kind == "link-starved"] == []
