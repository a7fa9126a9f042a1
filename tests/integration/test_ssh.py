"""The SSH source against real OpenSSH servers, each in its own network namespace.

One cluster of 4 hosts serves the module; each test starts its own `SshSource` on it,
pointed at the cluster's generated ssh_config / known_hosts / key (never ~/.ssh).
Waits are bounded by counts of samples, not by wall-clock thresholds, so a loaded
machine makes the tests slower, not flaky.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest
from aiohttp import web

from infertop.collectors.sample import NodeSample
from infertop.collectors.sources.ssh import SshNode, SshSource
from infertop.layouts.loader import parse_layout
from infertop.layouts.model import SshOptions
from infertop.monitor.monitor import Monitor
from tests.support.netns import NetnsCluster, NsHost, QdiscUnavailable, missing_requirements
from tests.support.vllm_page import SimulatedVllmPage
from tests.support.waiting import until_async

pytestmark = [pytest.mark.netns, pytest.mark.integration]
INTERVAL_S = 0.5
PYTHON = "/usr/bin/python3"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NetnsCluster]:
    why = missing_requirements()
    if why is not None:
        pytest.skip(why)
    built = NetnsCluster(4, tmp_path_factory.mktemp("netns"))
    try:
        built.build()
        yield built
    finally:
        built.teardown()


class Recorder:
    """Collects emitted samples and lets a test wait for a condition on them."""

    def __init__(self) -> None:
        self.samples: list[NodeSample] = []
        self.arrived: list[float] = []
        self._changed = asyncio.Event()

    def __call__(self, sample: NodeSample) -> None:
        self.samples.append(sample)
        self.arrived.append(time.monotonic())
        self._changed.set()

    def good(self, node: str, after: float = 0.0) -> list[NodeSample]:
        return [s for s in self.samples if s.node == node and s.error is None and s.taken_at > after]

    def errors(self, node: str, after: float = 0.0) -> list[NodeSample]:
        return [s for s in self.samples if s.node == node and s.error is not None and s.taken_at > after]

    async def _next_sample(self, at_most_s: float) -> None:
        self._changed.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._changed.wait(), at_most_s)

    async def wait_for(self, condition: Callable[[], bool], timeout: float = 20.0) -> None:
        """Until `condition()` holds, checked again at each sample (or each second)."""
        await until_async(condition, timeout, "the samples", every_s=1.0, pause=self._next_sample,
                          detail=lambda: self.samples[-3:])


def options(cluster: NetnsCluster, **extra: object) -> SshOptions:
    settings: dict[str, object] = {
        "config": str(cluster.ssh_config),
        "known_hosts": str(cluster.known_hosts),
        "python": PYTHON,
        "connect_timeout_s": 5.0,
        "backoff_cap_s": 1.0,
    }
    settings.update(extra)
    return SshOptions.model_validate(settings)


def nodes_for(hosts: list[NsHost]) -> list[SshNode]:
    return [SshNode(name=h.alias, target=h.alias) for h in hosts]


@contextlib.asynccontextmanager
async def running(source: SshSource) -> AsyncIterator[Recorder]:
    recorder = Recorder()
    task = asyncio.create_task(source.run(recorder))
    try:
        yield recorder
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await source.close()


def nic(sample: NodeSample, name: str) -> dict[str, object]:
    assert sample.nics is not None
    found = [n for n in sample.nics if n.name == name]
    assert found, f"{name} not in {[n.name for n in sample.nics]}"
    return found[0].model_dump()


async def test_every_host_streams_its_own_interfaces_and_no_gpus(cluster: NetnsCluster) -> None:
    source = SshSource(nodes_for(cluster.hosts), INTERVAL_S, options(cluster))
    async with running(source) as rec:
        await rec.wait_for(lambda: all(len(rec.good(h.alias)) >= 2 for h in cluster.hosts))
        for host in cluster.hosts:
            sample = rec.good(host.alias)[-1]
            assert sample.source == "ssh"
            names = {n.name for n in sample.nics or []}
            # the probe runs inside the namespace: its interfaces, not this machine's
            assert names == {"lo", "mgmt0", "data0"}
            assert nic(sample, "data0")["state"] == "up"
            assert sample.gpus == []  # no NVIDIA driver here: empty, and a note says why
            assert any("GPU" in note for note in sample.notes)
            assert sample.host is not None and sample.host.mem_total_bytes
        assert not [s for s in rec.samples if s.error is not None]
        assert all(count == 1 for count in source.connects.values())

        # traffic between namespaces moves the receiving host's counters
        h0, h1 = cluster.hosts[0], cluster.hosts[1]
        before = nic(rec.good(h1.alias)[-1], "data0")["rx_bytes_total"]
        assert isinstance(before, float)
        sent_at = time.time()
        await asyncio.to_thread(cluster.send, h0, h1, 2_000_000)
        await rec.wait_for(lambda: len(rec.good(h1.alias, after=sent_at)) >= 2)
        after = nic(rec.good(h1.alias)[-1], "data0")["rx_bytes_total"]
        assert isinstance(after, float) and after - before >= 2_000_000


async def test_proxyjump_from_ssh_config_reaches_a_host_only_its_peers_can_reach(
    cluster: NetnsCluster,
) -> None:
    # j0 = host 0 by its data address (no route from here), jumping through host 1
    source = SshSource([SshNode("via-jump", "j0")], INTERVAL_S, options(cluster))
    async with running(source) as rec:
        await rec.wait_for(lambda: len(rec.good("via-jump")) >= 1 or len(rec.errors("via-jump")) >= 1)
        assert not rec.errors("via-jump"), rec.errors("via-jump")[0].error
        sample = rec.good("via-jump")[0]
        assert {n.name for n in sample.nics or []} == {"lo", "mgmt0", "data0"}


async def test_link_set_down_shows_within_two_intervals(cluster: NetnsCluster) -> None:
    host = cluster.hosts[2]
    source = SshSource(nodes_for([host]), INTERVAL_S, options(cluster))
    async with running(source) as rec:
        await rec.wait_for(lambda: len(rec.good(host.alias)) >= 1)
        assert nic(rec.good(host.alias)[-1], "data0")["state"] == "up"
        try:
            cluster.set_link(host, up=False)
            count = len(rec.samples)
            # the first reading after the change may have been taken before it; the
            # second was certainly taken after it, one interval later
            await rec.wait_for(lambda: len(rec.samples) >= count + 2)
            assert nic(rec.samples[count + 1], "data0")["state"] == "down"
        finally:
            cluster.set_link(host, up=True)
        count = len(rec.samples)
        await rec.wait_for(lambda: len(rec.samples) >= count + 2)
        assert nic(rec.samples[count + 1], "data0")["state"] == "up"


async def test_killed_sshd_makes_its_node_fail_others_continue_and_restart_recovers(
    cluster: NetnsCluster,
) -> None:
    victim, others = cluster.hosts[3], cluster.hosts[:3]
    source = SshSource(nodes_for(cluster.hosts), INTERVAL_S, options(cluster))
    async with running(source) as rec:
        await rec.wait_for(lambda: all(rec.good(h.alias) for h in cluster.hosts))
        try:
            await asyncio.to_thread(cluster.kill_sshd, victim)
            killed_at = time.time()
            # the victim says what happened (connection lost, then refused) …
            await rec.wait_for(lambda: len(rec.errors(victim.alias, after=killed_at)) >= 2)
            messages = [s.error or "" for s in rec.errors(victim.alias, after=killed_at)]
            assert any("refused" in m for m in messages), messages
            # … while every other node keeps streaming
            await rec.wait_for(lambda: all(len(rec.good(h.alias, after=killed_at)) >= 3 for h in others))
            # no reading from the victim once it said it was cut off (one the probe took as
            # sshd was being killed may still arrive just before that)
            cut_off = min(s.taken_at for s in rec.errors(victim.alias, after=killed_at))
            assert not rec.good(victim.alias, after=cut_off)
        finally:
            await asyncio.to_thread(cluster.start_sshd, victim)
        restarted_at = time.time()
        # picked up again without anyone asking: the backoff retries on its own
        await rec.wait_for(lambda: len(rec.good(victim.alias, after=restarted_at)) >= 2)
        assert source.connects[victim.alias] >= 2


async def test_host_key_mismatch_is_refused_and_says_so(cluster: NetnsCluster, tmp_path: Path) -> None:
    impostor = cluster.hosts[0]
    other_key = tmp_path / "other_ed25519"
    await asyncio.to_thread(_keygen, other_key)
    key = other_key.with_suffix(".pub").read_text().split()
    lines = [
        f"{impostor.mgmt_ip} {key[0]} {key[1]}" if impostor.mgmt_ip in line.split()[0].split(",") else line
        for line in cluster.known_hosts.read_text().splitlines()
    ]
    known = tmp_path / "known_hosts"
    known.write_text("\n".join(lines) + "\n")
    honest = cluster.hosts[1]
    source = SshSource(nodes_for([impostor, honest]), INTERVAL_S, options(cluster, known_hosts=str(known)))
    async with running(source) as rec:
        await rec.wait_for(lambda: len(rec.errors(impostor.alias)) >= 1 and len(rec.good(honest.alias)) >= 1)
        error = rec.errors(impostor.alias)[0].error or ""
        assert error.startswith("host key not trusted"), error
        assert not rec.good(impostor.alias)


async def test_wrong_identity_refused_port_and_missing_interpreter_say_what_happened(
    cluster: NetnsCluster, tmp_path: Path
) -> None:
    host = cluster.hosts[1]
    stranger = tmp_path / "stranger_ed25519"
    await asyncio.to_thread(_keygen, stranger)
    cases = [
        (SshSource(nodes_for([host]), INTERVAL_S, options(cluster, identity_files=[str(stranger)])), "auth failed"),
        (SshSource([SshNode("closed", f"root@{host.mgmt_ip}:2222")], INTERVAL_S, options(cluster)), "connection refused"),
        (
            SshSource(nodes_for([host]), INTERVAL_S, options(cluster, python="/nonexistent/python3")),
            "probe could not start (status 127)",
        ),
    ]
    for source, expected in cases:
        async with running(source) as rec:
            name = source.nodes[0]
            await rec.wait_for(lambda name=name: len(rec.errors(name)) >= 1)  # type: ignore[misc]
            error = rec.errors(name)[0].error or ""
            assert error.startswith(expected), error
            assert not rec.good(name)


async def test_delayed_host_does_not_delay_the_others(cluster: NetnsCluster) -> None:
    slow, fast = cluster.hosts[0], cluster.hosts[1:]
    try:
        cluster.tc_delay(slow, 300)
    except QdiscUnavailable:
        # no sch_netem in this kernel: shape instead. At 8 kbit/s with a one-packet
        # bucket, the handshake and each ~1.2 kB reading take seconds to leave the host.
        cluster.tc_rate(slow, "8kbit", name="mgmt0", burst="1600")
    try:
        source = SshSource(nodes_for(cluster.hosts), INTERVAL_S, options(cluster, connect_timeout_s=20.0))
        async with running(source) as rec:
            await rec.wait_for(lambda: len(rec.good(slow.alias)) >= 1, timeout=40.0)
            # a slow handshake and slow readings on one host hold no other host back: by
            # the time the slow host delivered one reading, every other host streamed on
            for host in fast:
                assert len(rec.good(host.alias)) >= 2, [s.node for s in rec.samples]
            assert not [s for s in rec.samples if s.error is not None]
    finally:
        cluster.tc_clear(slow, "mgmt0")


# A tiny engine inside one namespace, on that namespace's loopback only.
_ENGINE = (
    "import http.server,sys\n"
    "body=open(sys.argv[1],'rb').read()\n"
    "class H(http.server.BaseHTTPRequestHandler):\n"
    "    def do_GET(self):\n"
    "        self.send_response(200);self.end_headers();self.wfile.write(body)\n"
    "    def log_message(self,*a): pass\n"
    "s=http.server.HTTPServer(('127.0.0.1',0),H)\n"
    "print(s.server_address[1],flush=True)\n"
    "s.serve_forever()\n"
)
_VLLM = (
    "# TYPE vllm:iteration_tokens_total histogram\n"
    'vllm:iteration_tokens_total_bucket{engine="0",le="+Inf"} 77.0\n'
    'vllm:iteration_tokens_total_count{engine="0"} 77.0\n'
    'vllm:iteration_tokens_total_sum{engine="0"} 900.0\n'
    "# TYPE vllm:num_requests_running gauge\n"
    'vllm:num_requests_running{engine="0"} 3.0\n'
)


async def test_engine_on_the_nodes_own_localhost_is_fetched_by_the_probe(
    cluster: NetnsCluster, tmp_path: Path
) -> None:
    host = cluster.hosts[2]
    metrics = tmp_path / "metrics.txt"
    metrics.write_text(_VLLM)
    server = await asyncio.create_subprocess_exec(
        "ip", "netns", "exec", host.ns, PYTHON, "-I", "-c", _ENGINE, str(metrics),
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        assert server.stdout is not None
        port = int(await asyncio.wait_for(server.stdout.readline(), 10))
        url = f"http://127.0.0.1:{port}/metrics"  # not reachable from this namespace
        source = SshSource([SshNode(host.alias, host.alias, engine_url=url)], INTERVAL_S, options(cluster))
        async with running(source) as rec:
            await rec.wait_for(lambda: len(rec.good(host.alias)) >= 1)
            sample = rec.good(host.alias)[0]
            assert sample.engine is not None, sample.notes
            assert sample.engine.steps_total == 77.0
            assert sample.engine.requests_running == 3.0
    finally:
        server.terminate()
        await server.wait()


async def test_an_eight_engine_page_trickled_on_the_node_arrives_whole(
    cluster: NetnsCluster, tmp_path: Path
) -> None:
    """Issue 14 through the real probe and sshd: a ~320 KB vLLM page (8 DP engines),
    served on the node's own loopback in 4 KB pieces, reaches the monitor whole."""
    from tests.support.vllm_dp_page import TRICKLE, assert_engine_matches, vllm_dp_page

    host = cluster.hosts[3]
    text, truth = vllm_dp_page(8)
    page = tmp_path / "page.txt"
    page.write_text(text)
    server = await asyncio.create_subprocess_exec(
        "ip", "netns", "exec", host.ns, PYTHON, "-I", str(TRICKLE), str(page),
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        assert server.stdout is not None
        port = int(await asyncio.wait_for(server.stdout.readline(), 10))
        url = f"http://127.0.0.1:{port}/metrics"
        source = SshSource([SshNode(host.alias, host.alias, engine_url=url)], INTERVAL_S, options(cluster))
        async with running(source) as rec:
            await rec.wait_for(lambda: any(s.engine is not None for s in rec.good(host.alias)))
            sample = next(s for s in rec.good(host.alias) if s.engine is not None)
            assert not [n for n in sample.notes if n.startswith("engine")], sample.notes
            assert_engine_matches(sample.engine, truth)
    finally:
        server.terminate()
        await server.wait()


async def test_snapshot_cli_reads_the_cluster_from_a_layout(cluster: NetnsCluster, tmp_path: Path) -> None:
    """The real entry point: layout file → registry → SshSource → snapshot JSON."""
    layout = tmp_path / "cluster.toml"
    layout.write_text(
        "[cluster]\nname = \"netns\"\ninterval_s = 0.5\n\n"
        f"[ssh]\nconfig = {json.dumps(str(cluster.ssh_config))}\n"
        f"known_hosts = {json.dumps(str(cluster.known_hosts))}\npython = \"{PYTHON}\"\n\n"
        "[[nodes]]\nhosts = \"h[0-1]\"\nrole = \"decode\"\nssh = \"{host}\"\n"
    )
    venv_bin = Path(__file__).resolve().parent.parent.parent / ".venv" / "bin" / "infertop"
    command = str(venv_bin) if venv_bin.exists() else shutil.which("infertop") or "infertop"
    proc = await asyncio.create_subprocess_exec(
        command, "snapshot", "--layout", str(layout), "--window", "4", "--json",  # handshakes on a loaded host
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    snapshot = json.loads(out)
    assert snapshot["cluster"]["insecure_ssh"] is False
    by_name = {n["name"]: n for n in snapshot["nodes"]}
    assert set(by_name) == {"h0", "h1"}
    for node in by_name.values():
        assert node["status"] == "ok", node
        assert {n["name"] for n in node["nics"]} >= {"mgmt0", "data0"}
        assert node["gpus"] == []


def _keygen(path: Path) -> None:
    import subprocess

    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True, capture_output=True)


async def test_an_ssh_node_whose_engine_page_is_read_directly(cluster: NetnsCluster) -> None:
    """`via_probe = false` on an `ssh` node (issue 44): the probe reads the host, the scrape
    source reads the engine page from here, and the node's snapshot has both. The layout
    goes through the real routing (build_sources in the Monitor), the probe through sshd."""
    engine = SimulatedVllmPage(engines=2)
    served: list[float] = []

    async def page(_request: web.Request) -> web.Response:
        engine.advance(INTERVAL_S)
        served.append(time.time())
        return web.Response(text=engine.page(), content_type="text/plain")

    app = web.Application()
    app.router.add_get("/metrics", page)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    host = cluster.hosts[0]
    layout = parse_layout(
        f"""
[cluster]
interval_s = {INTERVAL_S}
window_s = 3
[ssh]
config = "{cluster.ssh_config}"
known_hosts = "{cluster.known_hosts}"
python = "{PYTHON}"
connect_timeout_s = 5.0
[[nodes]]
name = "{host.alias}"
ssh = "{host.alias}"
engine = {{ url = "http://127.0.0.1:{port}/metrics", via_probe = false }}
""",
        "direct.toml",
    )
    monitor = Monitor(layout)
    assert sorted(s.kind for s in monitor.sources) == ["scrape", "ssh"]
    await monitor.start(tick=False)
    try:
        state = monitor.state.nodes[host.alias]

        def both_read() -> bool:
            scraped = state.by_source.get("scrape", ())
            probed = state.by_source.get("ssh", ())
            return len(scraped) >= 3 and len(probed) >= 2

        await until_async(both_read, 60.0, "samples from the probe and the scrape source",
                          detail=lambda: {k: len(v) for k, v in state.by_source.items()})
        probed = state.by_source["ssh"][-1]
        assert probed.engine is None  # the probe was not asked for the page
        assert {n.name for n in probed.nics or []} >= {"data0"}
        snapshot = monitor.tick()
        (node,) = snapshot.nodes
        assert node.engine is not None and node.engine.source == "endpoint"
        assert node.engine.requests_running is not None
        assert node.host is not None and node.host.mem_total_bytes
        assert "data0" in {n.name for n in node.nics}
        assert sorted(node.sources) == ["scrape", "ssh"]
        assert served  # the page was fetched from here, not from inside the namespace
    finally:
        await monitor.stop()
        await runner.cleanup()
