#!/usr/bin/env python3
"""infertop probe: reads one node, read-only, and prints one JSON object per reading.

Self-contained on purpose: standard library only (plus `pynvml` when the node has it),
so that infertop can send this file's text with the SSH command and nothing has to be
installed on the node. The same reading functions serve the local source (imported as a
module), so local and remote nodes are read by one code path.

This file is the loop (one reading: host, NICs, GPUs, NPUs, engine page, log figures);
the readers are its bundled helpers: `host.py` (/proc and /sys: host and NICs),
`nvidia_gpus.py` (NVML, else nvidia-smi), `npu.py`, `engine.py`, `logs.py`.

Every figure that cannot be read is left out or null; the probe never writes anything.
"""

from __future__ import annotations

import json
import os
import sys
import time

# Stdlib-only helpers; the SSH bundle pastes their text above this file instead.
# bundle: strip-begin
from infertop.collectors.probe.engine import ENGINE_MAX_BYTES, fetch_engine
from infertop.collectors.probe.ethtool_stats import EthtoolStats
from infertop.collectors.probe.host import read_host, read_nics
from infertop.collectors.probe.logs import LogWatch
from infertop.collectors.probe.npu import open_npus
from infertop.collectors.probe.nvidia_gpus import open_gpus

# bundle: strip-end

PROBE_VERSION = 1


# ---------------------------------------------------------------------------- main loop


def reading(gpu_reader, gpu_note, prev_cpu, engine=None, keep_nics=(), ethtool=None):
    host, cpu = read_host(prev_cpu)
    out = {
        "v": PROBE_VERSION,
        "t": time.time(),
        "gpus": gpu_reader.read() if gpu_reader is not None else [],
        "nics": read_nics(keep=keep_nics, ethtool=ethtool),
        "host": host,
        "notes": [gpu_note] if gpu_note else [],
    }
    if engine and engine.get("url"):
        text, error = fetch_engine(
            engine["url"],
            float(engine.get("timeout_s") or 1.0),
            int(engine.get("max_bytes") or ENGINE_MAX_BYTES),
        )
        if text is not None:
            out["engine_text"] = text
        else:
            out["engine_error"] = error
    # the probe's own CPU time, so its cost per tick can be measured where it runs
    times = os.times()
    out["probe_cpu_s"] = times[0] + times[1]
    return out, cpu


def open_log_watch(log_config):
    """(LogWatch, None) for the config's engine log, (None, note) if it is unusable."""
    if not log_config:
        return None, None
    try:
        return LogWatch(log_config), None
    except Exception as exc:  # a bad pattern must not stop the GPU and NIC figures
        return None, "engine log not followed: %s" % (str(exc)[:150],)


def add_npus_and_log(out, npu_reader, log_watch, log_note):
    """Put NPU figures (npu-smi) and parsed engine-log figures into a reading, in place."""
    if npu_reader is not None:
        out["gpus"] = npu_reader.read()
        out["nics"] = out["nics"] + npu_reader.read_ports()
        if npu_reader.note:
            out["notes"].append(npu_reader.note)
    if log_note:
        out["notes"].append(log_note)
    if log_watch is not None:
        try:
            out["engine"], notes = log_watch.read()
            out["notes"].extend(notes)
        except Exception as exc:  # never: the watch swallows bad input; but never die for it
            out["notes"].append("engine log: %s" % (exc.__class__.__name__,))


def parse_config(argv):
    """The probe's one argument: a JSON object (or, for hand use, `INTERVAL [COUNT]`)."""
    if len(argv) > 1 and argv[1].lstrip().startswith("{"):
        config = json.loads(argv[1])
        if not isinstance(config, dict):
            raise ValueError("probe config must be a JSON object")
        return config
    config = {}
    if len(argv) > 1:
        config["interval_s"] = float(argv[1])
    if len(argv) > 2:
        config["count"] = int(argv[2])
    return config


def _exit_on_eof(stream):
    """infertop keeps the probe's stdin open; EOF means the session is gone: stop now."""
    try:
        while stream.read(4096):
            pass
    except Exception:
        pass
    os._exit(0)  # the probe only reads: nothing to flush or clean up


def run_from_stdin(stream):
    """Entry for the SSH bootstrap: the config is the next line on stdin after the script."""
    import threading

    line = stream.readline()
    config = json.loads(line.decode("utf-8") if isinstance(line, bytes) else line)
    if not isinstance(config, dict):
        raise ValueError("probe config must be a JSON object")
    threading.Thread(target=_exit_on_eof, args=(stream,), daemon=True).start()
    return run(config)


def run(config):
    interval = float(config.get("interval_s") or 1.0)
    count = int(config.get("count") or 0)  # 0 = until the session closes
    engine = config.get("engine") or None
    # the layout's expected ports: read even when named like virtual plumbing
    keep_nics = frozenset(n for n in config.get("keep_nics") or () if isinstance(n, str))
    gpu_reader, gpu_note = open_gpus()
    # no NVIDIA GPU: an Ascend node is read through npu-smi, unless an exporter covers it
    npu_reader = None
    if gpu_reader is None and config.get("npu_smi", True):
        npu_reader, npu_note = open_npus()
        if npu_reader is not None or npu_note:
            gpu_note = npu_note
    log_watch, log_note = open_log_watch(config.get("engine_log"))
    ethtool = EthtoolStats()  # RoCE pause frames from the drivers' ethtool statistics
    prev_cpu = None
    n = 0
    try:
        while True:
            out, prev_cpu = reading(gpu_reader, gpu_note, prev_cpu, engine, keep_nics, ethtool)
            add_npus_and_log(out, npu_reader, log_watch, log_note)
            sys.stdout.write(json.dumps(out, separators=(",", ":")) + "\n")
            sys.stdout.flush()
            n += 1
            if count and n >= count:
                return 0
            # read at wall-clock multiples of the interval, as infertop's own sources do,
            # so every node's reading describes the same moment (collectors/sources/cadence.py); a
            # slow tick (engine timeout) goes on at the next boundary, never in a burst
            delay = interval - time.time() % interval
            if delay < 0.05 * interval:
                delay += interval
            time.sleep(delay)
    except (BrokenPipeError, KeyboardInterrupt):
        return 0
    finally:
        ethtool.close()
        if gpu_reader is not None:
            gpu_reader.close()


def main(argv):
    return run(parse_config(argv))


if __name__ == "__main__":
    sys.exit(main(sys.argv))
