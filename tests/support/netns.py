"""A test cluster of real OpenSSH hosts, each in its own network namespace.

Topology (names carry this process's pid, so parallel runs never collide):

    root ns ── veth ──┐                      ┌── mgmt0  host 0 (ns, sshd on :22)
                      │  switch ns:          ├── mgmt0  host 1
                      └─ bridge "mgmt" ──────┤   …
                         bridge "data" ──────┼── data0  host 0 / host 1 / …

The switch lives in a namespace of its own so the host's firewall (bridge netfilter)
never sees the test traffic, and the root namespace gains one veth and nothing else.
`mgmt0` carries SSH from the test process (in the root ns); `data0` carries generated
traffic between hosts and is the link tests set down or limit, so SSH keeps working.

Every host runs `/usr/sbin/sshd -D` inside its namespace with a generated host key and
one authorized client key; `known_hosts` and an `ssh_config` (aliases `h0`, `h1`, …)
are written for the client. The probe started by sshd inherits the namespace, so it
sees that host's interfaces. `teardown()` kills every process in the namespaces and
deletes them; it runs on fixture exit and at interpreter exit.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import ipaddress
import os
import re
import shutil
import signal
import socket
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.waiting import until

SSHD = "/usr/sbin/sshd"
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else "python3"

# UDP sender run inside a namespace: a fixed program, its arguments passed as argv.
_BLAST = (
    "import socket,sys\n"
    "dst,total=sys.argv[1],int(sys.argv[2])\n"
    "s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n"
    "chunk=b'x'*1400\n"
    "sent=0\n"
    "while sent<total:\n"
    "    s.sendto(chunk,(dst,9))\n"
    "    sent+=len(chunk)\n"
)


def missing_requirements() -> str | None:
    """Why the cluster cannot be built here, or None."""
    if os.geteuid() != 0:
        return "needs root for ip netns"
    for tool in ("ip", "tc", "ssh-keygen"):
        if shutil.which(tool) is None:
            return f"needs {tool} (iproute2 / openssh-client)"
    if not os.access(SSHD, os.X_OK):
        return "needs /usr/sbin/sshd (openssh-server)"
    probe = f"itchk{os.getpid()}"
    result = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if result.returncode != 0:
        return f"ip netns add failed: {result.stderr.strip()[:100]}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check and result.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {result.stderr.strip()}")
    return result


def _ns_pids(ns: str) -> list[int]:
    result = _ip("netns", "pids", ns, check=False)
    return [int(p) for p in result.stdout.split()] if result.returncode == 0 else []


def _kill_ns_processes(ns: str) -> None:
    """Every process inside the namespace (sshd, its sessions, the probes), by pid."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        pids = _ns_pids(ns)
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        with contextlib.suppress(AssertionError):  # still there: the next signal is SIGKILL
            until(lambda: not _ns_pids(ns), 2.0, f"the processes in {ns} to end", every_s=0.02)


SUBNET_LOCK = "/run/lock/infertop-test-netns.lock" if Path("/run/lock").is_dir() else "/tmp/infertop-test-netns.lock"


def _free_subnet_index(start: int) -> int:
    """A third octet whose 10.213.x.0/24 and 10.214.x.0/24 no interface or route uses."""
    used = _ip("-4", "addr").stdout + _ip("-4", "route").stdout
    for netns in _ip("netns", "list").stdout.split("\n"):
        name = netns.split(" ")[0]
        if name:
            used += _ip("-n", name, "-4", "addr", check=False).stdout
    for k in range(250):
        x = (start + k) % 250 + 1
        if f"10.213.{x}." not in used and f"10.214.{x}." not in used:
            return x
    raise RuntimeError("no free 10.213.x.0/24 test subnet")


def cleanup_stale() -> None:
    """Remove namespaces and links left by test runs whose process is gone."""
    for line in _ip("netns", "list").stdout.splitlines():
        m = re.match(r"(it(\d+)(?:h\d+|sw))\b", line)
        if m and not Path(f"/proc/{m.group(2)}").exists():
            _kill_ns_processes(m.group(1))
            _ip("netns", "del", m.group(1), check=False)
    for line in _ip("-o", "link").stdout.splitlines():
        m = re.match(r"\d+: (it(\d+)r)[@:]", line)
        if m and not Path(f"/proc/{m.group(2)}").exists():
            _ip("link", "del", m.group(1), check=False)


class QdiscUnavailable(RuntimeError):
    """The kernel lacks a queueing discipline (e.g. sch_netem in a minimal VM kernel)."""


@dataclass
class NsHost:
    index: int
    alias: str  # "h0": the Host entry in the generated ssh_config
    ns: str
    mgmt_ip: str
    data_ip: str
    dir: Path
    sshd: subprocess.Popen[bytes] | None = None

    def exec(self, *argv: str, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
        """Run argv inside this host's namespace (no shell)."""
        return subprocess.run(
            ["ip", "netns", "exec", self.ns, *argv], capture_output=True, text=True, timeout=timeout
        )


@dataclass
class NetnsCluster:
    size: int
    workdir: Path
    data_links: bool = True
    hosts: list[NsHost] = field(default_factory=list)
    tag: str = field(default_factory=lambda: f"it{os.getpid()}")
    client_key: Path = Path()
    known_hosts: Path = Path()
    ssh_config: Path = Path()
    _built: list[str] = field(default_factory=list)  # namespaces to delete
    _root_link: str | None = None

    @property
    def switch(self) -> str:
        return f"{self.tag}sw"

    # ------------------------------------------------------------------ build

    def build(self) -> NetnsCluster:
        cleanup_stale()
        atexit.register(self.teardown)
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # sshd's privsep chroot
        self.workdir.mkdir(parents=True, exist_ok=True)
        if self.size > 250:
            raise ValueError("at most 250 hosts per cluster")
        # one builder at a time on this machine picks a subnet and puts it on a link:
        # parallel workers (pytest -n) or other checkouts' runs never take the same one
        with open(SUBNET_LOCK, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            x = _free_subnet_index(os.getpid())
            mgmt = ipaddress.IPv4Network(f"10.213.{x}.0/24")
            data = ipaddress.IPv4Network(f"10.214.{x}.0/24")
            self._make_switch(mgmt)
        self._make_keys()
        for i in range(self.size):
            host = NsHost(
                index=i,
                alias=f"h{i}",
                ns=f"{self.tag}h{i}",
                mgmt_ip=str(mgmt[i + 2]),
                data_ip=str(data[i + 2]),
                dir=self.workdir / f"h{i}",
            )
            self._make_host(host)
            self.hosts.append(host)
        self._write_client_files()
        for host in self.hosts:
            self.start_sshd(host, wait=False)
        for host in self.hosts:
            self.wait_sshd(host)
        return self

    def _make_switch(self, mgmt: ipaddress.IPv4Network) -> None:
        sw = self.switch
        _ip("netns", "add", sw)
        self._built.append(sw)
        for bridge in ("mgmt", "data"):
            _ip("-n", sw, "link", "add", bridge, "type", "bridge")
            _ip("-n", sw, "link", "set", bridge, "up")
        root, peer = f"{self.tag}r", f"{self.tag}s"
        _ip("link", "add", root, "type", "veth", "peer", "name", peer)
        self._root_link = root
        _ip("link", "set", peer, "netns", sw)
        _ip("-n", sw, "link", "set", peer, "master", "mgmt", "up")
        _ip("addr", "add", f"{mgmt[1]}/24", "dev", root)
        _ip("link", "set", root, "up")

    def _make_keys(self) -> None:
        self.client_key = self.workdir / "client_ed25519"
        _keygen(self.client_key)

    def _make_host(self, host: NsHost) -> None:
        ns, sw = host.ns, self.switch
        host.dir.mkdir(parents=True, exist_ok=True)
        _ip("netns", "add", ns)
        self._built.append(ns)
        _ip("-n", ns, "link", "set", "lo", "up")
        links = [("mgmt0", "mgmt", host.mgmt_ip)]
        if self.data_links:
            links.append(("data0", "data", host.data_ip))
        for name, bridge, addr in links:
            outer = f"{self.tag}{name[0]}{host.index}"  # e.g. it1234m7, in the switch ns
            inner = f"{outer}x"
            _ip("link", "add", outer, "type", "veth", "peer", "name", inner)
            _ip("link", "set", outer, "netns", sw)
            _ip("link", "set", inner, "netns", ns)
            _ip("-n", sw, "link", "set", outer, "master", bridge, "up")
            _ip("-n", ns, "link", "set", inner, "name", name)
            _ip("-n", ns, "addr", "add", f"{addr}/24", "dev", name)
            _ip("-n", ns, "link", "set", name, "up")
        _keygen(host.dir / "host_ed25519")
        shutil.copy(self.client_key.with_suffix(".pub"), host.dir / "authorized_keys")
        (host.dir / "sshd_config").write_text(
            "\n".join(
                [
                    "Port 22",
                    f"ListenAddress {host.mgmt_ip}",
                    # reachable only from other hosts: the target of ProxyJump tests
                    *([f"ListenAddress {host.data_ip}"] if self.data_links else []),
                    f"HostKey {host.dir / 'host_ed25519'}",
                    "PidFile none",
                    f"AuthorizedKeysFile {host.dir / 'authorized_keys'}",
                    "AuthenticationMethods publickey",
                    "PasswordAuthentication no",
                    "KbdInteractiveAuthentication no",
                    "PermitRootLogin prohibit-password",
                    "UsePAM no",
                    "StrictModes no",
                    "UseDNS no",
                    "PrintMotd no",
                    "MaxStartups 200",
                    "LogLevel ERROR",
                    "",
                ]
            )
        )

    def _write_client_files(self) -> None:
        self.known_hosts = self.workdir / "known_hosts"
        lines = []
        for host in self.hosts:
            key = (host.dir / "host_ed25519.pub").read_text().split()
            names = f"{host.mgmt_ip},{host.data_ip}" if self.data_links else host.mgmt_ip
            lines.append(f"{names} {key[0]} {key[1]}")
        self.known_hosts.write_text("\n".join(lines) + "\n")
        self.ssh_config = self.workdir / "ssh_config"
        blocks = [
            f"Host {h.alias}\n  HostName {h.mgmt_ip}\n  User root\n"
            f"  IdentityFile {self.client_key}\n  UserKnownHostsFile {self.known_hosts}\n"
            for h in self.hosts
        ]
        if self.data_links and len(self.hosts) > 1:
            # j<i>: host i by its data address, which only the other hosts can reach,
            # through the next host as a ProxyJump
            blocks += [
                f"Host j{h.index}\n  HostName {h.data_ip}\n  User root\n"
                f"  ProxyJump h{(h.index + 1) % len(self.hosts)}\n"
                f"  IdentityFile {self.client_key}\n  UserKnownHostsFile {self.known_hosts}\n"
                for h in self.hosts
            ]
        self.ssh_config.write_text("\n".join(blocks))

    # ------------------------------------------------------------------ sshd

    def start_sshd(self, host: NsHost, wait: bool = True) -> None:
        log = open(host.dir / "sshd.log", "ab")
        host.sshd = subprocess.Popen(
            ["ip", "netns", "exec", host.ns, SSHD, "-D", "-e", "-f", str(host.dir / "sshd_config")],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
        )
        log.close()
        if wait:
            self.wait_sshd(host)

    def wait_sshd(self, host: NsHost, timeout: float = 10.0) -> None:

        def listening() -> bool:
            with socket.create_connection((host.mgmt_ip, 22), 0.5):
                return True

        until(
            listening, timeout, f"sshd on {host.ns} to listen", every_s=0.02, ignore=(OSError,),
            gave_up=lambda: host.sshd is not None and host.sshd.poll() is not None,
            detail=lambda: (host.dir / "sshd.log").read_text(errors="replace")[-300:],
        )

    def kill_sshd(self, host: NsHost) -> None:
        """The host's sshd and everything it started (sessions, probes), by pid."""
        _kill_ns_processes(host.ns)
        if host.sshd is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                host.sshd.wait(2.0)
            host.sshd = None

    # ------------------------------------------------------------------ links and traffic

    def set_link(self, host: NsHost, up: bool, name: str = "data0") -> None:
        _ip("-n", host.ns, "link", "set", name, "up" if up else "down")

    def tc_delay(self, host: NsHost, delay_ms: float, name: str = "mgmt0") -> None:
        """A fixed delay on the host's egress (netem); `QdiscUnavailable` without sch_netem."""
        result = host.exec("tc", "qdisc", "replace", "dev", name, "root", "netem", "delay", f"{delay_ms}ms")
        if result.returncode != 0:
            error = result.stderr.strip()
            if "unknown" in error:
                raise QdiscUnavailable(f"netem: {error}")
            raise RuntimeError(f"tc netem on {host.ns}: {error}")

    def tc_rate(self, host: NsHost, rate: str, name: str = "data0", burst: str = "32kbit") -> None:
        """Limit the host's egress rate (token bucket)."""
        result = host.exec(
            "tc", "qdisc", "replace", "dev", name, "root", "tbf", "rate", rate, "burst", burst,
            "latency", "400ms",
        )
        if result.returncode != 0:
            raise RuntimeError(f"tc tbf on {host.ns}: {result.stderr.strip()}")

    def tc_clear(self, host: NsHost, name: str = "mgmt0") -> None:
        host.exec("tc", "qdisc", "del", "dev", name, "root")

    def send(self, src: NsHost, dst: NsHost, total_bytes: int) -> None:
        """UDP from src to dst over the data network (moves both hosts' data0 counters)."""
        result = src.exec(PYTHON, "-I", "-c", _BLAST, dst.data_ip, str(total_bytes))
        if result.returncode != 0:
            raise RuntimeError(f"traffic {src.ns} → {dst.ns}: {result.stderr.strip()[-200:]}")

    def counters(self, host: NsHost, name: str = "data0") -> tuple[int, int]:
        """(rx_bytes, tx_bytes) of an interface, read from inside the namespace."""
        result = host.exec("cat", f"/sys/class/net/{name}/statistics/rx_bytes",
                           f"/sys/class/net/{name}/statistics/tx_bytes")
        rx, tx = result.stdout.split()
        return int(rx), int(tx)

    # ------------------------------------------------------------------ teardown

    def teardown(self) -> None:
        for ns in reversed(self._built):
            _kill_ns_processes(ns)
        for host in self.hosts:
            if host.sshd is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    host.sshd.wait(2.0)
                host.sshd = None
        for ns in reversed(self._built):
            _ip("netns", "del", ns, check=False)
        self._built.clear()
        if self._root_link is not None:
            _ip("link", "del", self._root_link, check=False)
            self._root_link = None
        with contextlib.suppress(Exception):
            atexit.unregister(self.teardown)


def _keygen(path: Path) -> None:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "infertop-test", "-f", str(path)],
        check=True,
        capture_output=True,
    )
