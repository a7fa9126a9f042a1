"""Who holds each GPU: the compute processes NVML lists, with their user and command.

A leftover process holding memory on one GPU is a classic cause of an OOM or an idle
rank, and it is invisible on a per-GPU figure. NVML gives pid and GPU memory; the user,
command and cgroup come from /proc (absent when the pid lives in another PID namespace).

Stdlib + pynvml only: the SSH bundle pastes this file into the probe.
"""

from __future__ import annotations

GPU_PROCESSES_MAX = 32  # per GPU: a runaway fork bomb must not flood a reading
_COMMAND_MAX = 160
_NO_VALUE = 0xFFFFFFFFFFFFFFFF  # NVML_VALUE_NOT_AVAILABLE (usedGpuMemory under some drivers)


def _proc_text(pid, name):
    try:
        with open("/proc/%d/%s" % (pid, name), "rb") as f:
            return f.read(4096).decode("utf-8", "replace")
    except (OSError, ValueError):
        return None


def _user_of(pid):
    status = _proc_text(pid, "status")
    if status is None:
        return None
    for line in status.splitlines():
        if line.startswith("Uid:"):
            parts = line.split()
            if len(parts) > 1 and parts[1].isascii() and parts[1].isdigit():
                uid = int(parts[1])
                try:
                    import pwd

                    return pwd.getpwuid(uid).pw_name
                except (KeyError, ImportError):
                    return str(uid)
    return None


def _command_of(pid):
    cmdline = _proc_text(pid, "cmdline")
    if not cmdline:
        comm = _proc_text(pid, "comm")
        return comm.strip() if comm else None
    # one line: arguments may hold newlines (python -c "…")
    return " ".join(cmdline.replace("\0", " ").split())[:_COMMAND_MAX]


def _cgroup_of(pid):
    text = _proc_text(pid, "cgroup")
    if not text:
        return None
    # cgroup v2: "0::/kubepods/…/cri-containerd-<id>.scope"; the path says the container
    last = text.strip().splitlines()[-1]
    path = last.split(":", 2)[-1]
    return path[-_COMMAND_MAX:] if path and path != "/" else None


def describe_process(pid, gpu_mem_bytes):
    """One process as the probe reports it (unknown parts absent)."""
    proc = {"pid": int(pid)}
    if gpu_mem_bytes is not None and gpu_mem_bytes != _NO_VALUE and gpu_mem_bytes >= 0:
        proc["gpu_mem_bytes"] = int(gpu_mem_bytes)
    user = _user_of(pid)
    if user is not None:
        proc["user"] = user
    command = _command_of(pid)
    if command:
        proc["command"] = command
    cgroup = _cgroup_of(pid)
    if cgroup:
        proc["cgroup"] = cgroup
    return proc


def read_gpu_processes(nvml, handle):
    """The compute (and graphics) processes on one GPU, or None when NVML cannot say."""
    calls = [getattr(nvml, n, None) for n in ("nvmlDeviceGetComputeRunningProcesses",
                                              "nvmlDeviceGetGraphicsRunningProcesses")]
    seen = {}
    answered = False
    for call in calls:
        if call is None:
            continue
        try:
            procs = call(handle)
        except Exception:
            continue
        answered = True
        for p in procs:
            pid = getattr(p, "pid", None)
            if pid is None or pid in seen:
                continue
            seen[pid] = getattr(p, "usedGpuMemory", None)
    if not answered:
        return None
    out = [describe_process(pid, mem) for pid, mem in list(seen.items())[:GPU_PROCESSES_MAX]]
    return sorted(out, key=lambda p: -(p.get("gpu_mem_bytes") or 0))
