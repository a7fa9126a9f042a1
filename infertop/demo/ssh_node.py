"""One demo node read over SSH, as a node without exporters is: the stray-process finding.

Who holds a GPU is not on any exporter page infertop reads — dcgm-exporter has no
per-process fields (NVIDIA/dcgm-exporter#109, #94: "does not currently have the
functionality to allow per-PID stats") — so in a real cluster it comes from NVML, through
the SSH probe. The demo's scripted stray-process node (`TROUBLE["stray_process"]`) is
therefore read by infertop's real SSH source: a real SSH server (asyncssh, on the demo's
host, host key pinned in a known_hosts file written beside the layout) answers the
source's probe command with one probe reading a second, in the probe's own JSON shape
(`collectors/probe/main.py`: `gpus`, `nics`, `engine_text`, `t`). The monitor reads it
exactly as it reads a real node: asyncssh client, host-key check, line splitting,
`parse_reading_line` / `reading_sample`, the engine page through its profile, and the
processes into `GpuSample.processes`. Only the node's side is simulated — as the HTTP
exporters are — from the same `SimNode` figures its pages would show.

The server runs no command (it ignores the bootstrap and the bundle sent on stdin) and
lets anyone in: it serves nothing but simulated readings.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncssh

from infertop.demo.pd_trouble import xmit_wait_total
from infertop.demo.render import dcgm_gpu_values
from infertop.demo.scenario import (
    BOND_MEMBER_GBPS,
    ETH_GBPS,
    GPU_MEM_MIB,
    GPU_MODEL,
    GPUS_PER_NODE,
    IB_GBPS,
    IB_PORTS,
    SimNode,
)

MIB = 1024 * 1024
# the scripted leftover: an evaluation run that outlived its job, holding memory on one GPU
STRAY_GPU = 3
STRAY_PID = 48213
STRAY_USER = "alice"
STRAY_COMMAND = "python3 eval_ppl.py --ckpt /scratch/ckpt-0417 --batch 64"
STRAY_MEM_BYTES = 18 * 1024 * MIB
ENGINE_USER = "deepinfer"
ENGINE_PID_BASE = 20711  # engine k's core process: one process per data-parallel engine


def engine_command(gpu: int) -> str:
    """The engine's core process on GPU k (one per DP engine, named by its profile)."""
    return f"python3 -m deepinfer.engine.core --model deepseek-ai/DeepSeek-V3.2 --dp-rank {gpu}"


def gpu_processes(gpu: int, engine_mem_bytes: int, stray: bool) -> list[dict[str, Any]]:
    """What NVML and /proc say holds GPU `gpu` (the probe's `describe_process` shape)."""
    procs: list[dict[str, Any]] = [{
        "pid": ENGINE_PID_BASE + gpu, "user": ENGINE_USER, "command": engine_command(gpu),
        "cgroup": "/system.slice/deepinfer.service", "gpu_mem_bytes": engine_mem_bytes,
    }]
    if stray and gpu == STRAY_GPU:
        procs.append({"pid": STRAY_PID, "user": STRAY_USER, "command": STRAY_COMMAND,
                      "cgroup": "/user.slice/user-1001.slice/session-7.scope",
                      "gpu_mem_bytes": STRAY_MEM_BYTES})
    return procs


def _gpus(node: SimNode, now: float) -> list[dict[str, Any]]:
    g = node.advance(now)
    stray = node.plan.trouble == "stray_process"
    gpus = []
    for gpu in range(GPUS_PER_NODE):
        v = dcgm_gpu_values(node, g, gpu)  # the figures its dcgm-exporter page would carry
        engine_mem = int(v["DCGM_FI_DEV_FB_USED"] * MIB)
        if stray and gpu == STRAY_GPU:
            engine_mem -= STRAY_MEM_BYTES  # the leftover's memory is part of the GPU's used
        gpus.append({
            "index": gpu,
            "name": GPU_MODEL,
            "uuid": f"GPU-{node.plan.index:08x}-{gpu:04x}-4000-8000-00000000b200",
            "util_pct": v["DCGM_FI_DEV_GPU_UTIL"],
            "mem_used_bytes": int(v["DCGM_FI_DEV_FB_USED"] * MIB),
            "mem_total_bytes": int(GPU_MEM_MIB * MIB),
            "mem_info_version": 2,
            "power_w": v["DCGM_FI_DEV_POWER_USAGE"],
            "temp_c": v["DCGM_FI_DEV_GPU_TEMP"],
            "sm_clock_mhz": v["DCGM_FI_DEV_SM_CLOCK"],
            "clock_event_reasons": int(v["DCGM_FI_DEV_CLOCK_THROTTLE_REASONS"]),
            "xid_last": int(v["DCGM_FI_DEV_XID_ERRORS"]),
            "ecc_uncorrected_total": int(v["DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"]),
            "energy_j_total": v["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"] / 1000.0,
            "healthy": True,
            # NVML GPM, as the probe reads it on Hopper and later
            "sm_active_pct": round(v["DCGM_FI_PROF_SM_ACTIVE"] * 100.0, 2),
            "tensor_active_pct": round(v["DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"] * 100.0, 2),
            "activity_source": "gpm",
            "processes": gpu_processes(gpu, engine_mem, stray),
        })
    return gpus


def _nics(node: SimNode, now: float) -> list[dict[str, Any]]:
    """The ports the probe reads from sysfs: 4 IB ports, eth0, the bond and its members."""
    nb = node.nic_bytes
    nics: list[dict[str, Any]] = []
    for port in IB_PORTS:
        down = node.port_down(port)
        nics.append({
            "name": port, "kind": "infiniband", "state": "down" if down else "active",
            "physical_state": "disabled" if down else "link_up", "speed_gbps": IB_GBPS,
            "rx_bytes_total": nb[port][0], "tx_bytes_total": nb[port][1],
            "xmit_wait_total": xmit_wait_total(node, port, now), "link_downed_total": 1 if down else 0,
            "errors_total": 0, "rx_errors_total": 0, "link_recoveries_total": 0,
            "link_integrity_errors_total": 0,
        })
    for dev, kind, gbps in (("eth0", "ethernet", ETH_GBPS), ("eth1", "ethernet", BOND_MEMBER_GBPS),
                            ("eth2", "ethernet", BOND_MEMBER_GBPS), ("bond0", "bond", 2 * BOND_MEMBER_GBPS)):
        nic: dict[str, Any] = {
            "name": dev, "kind": kind, "state": "up", "speed_gbps": gbps,
            "rx_bytes_total": nb[dev][0], "tx_bytes_total": nb[dev][1],
            "rx_errors_total": 0, "tx_errors_total": 0,
        }
        if kind == "bond":
            nic.update(members=["eth1", "eth2"], members_up=2)
        nics.append(nic)
    return nics


Page = Callable[[SimNode, float], str]


def probe_reading(node: SimNode, now: float, engine_page: Page | None) -> dict[str, Any]:
    """One probe reading of the node at `now`: GPUs (with who holds them), NICs, and the
    engine page the probe fetches on the node's side."""
    reading: dict[str, Any] = {"t": now, "gpus": _gpus(node, now), "nics": _nics(node, now), "notes": []}
    if engine_page is not None:
        reading["engine_text"] = engine_page(node, now)
    return reading


class _AnyoneIn(asyncssh.SSHServer):
    def begin_auth(self, username: str) -> bool:
        return False  # no authentication: this server only ever sends simulated readings


@dataclass
class SshNodeAddress:
    host: str
    port: int
    known_hosts_line: str  # "[host]:port ssh-ed25519 …": the pinned host key


class DemoSshNodes:
    """The SSH server the demo's SSH-read nodes answer on (one port for all: the login
    name picks the node, as `node@host:port` in the layout)."""

    def __init__(self, nodes: Callable[[str], SimNode | None], engine_page: Page | None,
                 interval_s: float = 1.0):
        self._nodes = nodes
        self._engine_page = engine_page
        self.interval_s = interval_s
        self._server: asyncssh.SSHAcceptor | None = None
        self.sessions = 0

    async def _session(self, process: asyncssh.SSHServerProcess[bytes]) -> None:
        node = self._nodes(process.get_extra_info("username") or "")
        self.sessions += 1
        try:
            if node is None:
                process.stderr.write(b"no such demo node\n")
                return
            while True:
                line = json.dumps(probe_reading(node, time.time(), self._engine_page)) + "\n"
                process.stdout.write(line.encode())
                await process.stdout.drain()
                await asyncio.sleep(self.interval_s)
        except (asyncssh.Error, OSError):
            pass  # the monitor went away
        finally:
            with contextlib.suppress(asyncssh.Error, OSError):
                process.exit(0)

    async def start(self, host: str, port: int = 0) -> SshNodeAddress:
        key = asyncssh.generate_private_key("ssh-ed25519")
        self._server = await asyncssh.create_server(
            _AnyoneIn, host, port, server_host_keys=[key], process_factory=self._session, encoding=None,
        )
        bound = self._server.sockets[0].getsockname()[1]
        public = key.export_public_key("openssh").decode().strip()
        return SshNodeAddress(host, bound, f"[{host}]:{bound} {public}\n")

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._server.wait_closed(), 2.0)
            self._server = None


def write_ssh_files(folder: Path, stem: str, address: SshNodeAddress) -> tuple[Path, Path]:
    """known_hosts (the server's key, pinned) and an empty ssh_config (the user's own is not
    the demo's business), beside the layout; returns their paths."""
    known = folder / f"{stem}.known_hosts"
    config = folder / f"{stem}.ssh_config"
    for path, text in ((known, address.known_hosts_line), (config, "")):
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.chmod(0o600)
        tmp.replace(path)
    return known, config
