"""Hand-run on a machine with NVIDIA GPUs: infertop's GPU telemetry under a real load.

What it shows, in one run (see BENCHMARKS.md for the figures and the exact command):
  1. the GPU, driver and library versions;
  2. NVLink as NVML answers it (per-link state, the throughput/error fields) and what
     infertop's NvmlReader makes of it;
  3. idle, then ~20 s under a bf16 matmul loop (benchmarks/gpu/load.py): util, power,
     SM clock over time from the local source, with the per-tick sampling cost, and the
     same figures read through pynvml directly right after each tick;
  4. the probe script itself (`python3 collectors/probe/main.py 1 N`) run during the load,
     its lines compared with direct NVML readings taken at the same moments;
  5. per-sample cost side by side: infertop's GPU reading, direct NVML (the same six
     figures), nvitop's and gpustat's Python APIs, and an `nvidia-smi --query-gpu`
     subprocess; plus the per-call cost of each NVML function the reader uses.
Everything goes to stdout and, as JSON, to OUT/measure.json when --out is given.
Usage: python3 benchmarks/gpu/measure.py [--out DIR] [--load-s 45] [--sample-s 20]

The GPU machine has torch, pynvml and psutil but no network: carry the rest as wheels.
Here: `pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp
--platform manylinux2014_x86_64 --platform any -d .whl nvitop blessed jinxed wcwidth
pydantic==<ours> pydantic-core==<ours> annotated-types typing-inspection typing-extensions`
plus `pip wheel --no-deps -w .whl gpustat` (sdist only); there: `pip install --no-index
--no-deps --target /tmp/site .whl/*.whl` and PYTHONPATH=/tmp/site:$PWD.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import pynvml  # noqa: E402

from infertop.collectors.probe import main as probe  # noqa: E402
from infertop.collectors.probe import nvidia_gpus as probe_gpus  # noqa: E402
from infertop.collectors.sources.local import LocalSource  # noqa: E402

RESULT: dict[str, Any] = {}


def section(name: str) -> None:
    print(f"\n==== {name}", flush=True)


def quantiles_us(times_s: list[float]) -> dict[str, float]:
    ordered = sorted(times_s)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return {
        "n": len(ordered),
        "median_us": statistics.median(ordered) * 1e6,
        "p99_us": p99 * 1e6,
        "min_us": ordered[0] * 1e6,
    }


def time_calls(fn: Callable[[], Any], n: int, warmup: int = 3) -> dict[str, float]:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return quantiles_us(times)


def nvml_direct(handles: list[Any]) -> list[dict[str, float]]:
    """The six figures infertop shows per GPU, read straight through pynvml."""
    out = []
    for h in handles:
        util = pynvml.nvmlDeviceGetUtilizationRates(h)
        mem = pynvml.nvmlDeviceGetMemoryInfo(h)
        out.append(
            {
                "util_pct": float(util.gpu),
                "mem_used_bytes": int(mem.used),
                "power_w": pynvml.nvmlDeviceGetPowerUsage(h) / 1000.0,
                "temp_c": pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU),
                "sm_clock_mhz": pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM),
            }
        )
    return out


def info(handles: list[Any]) -> None:
    section("machine")
    def text(v: Any) -> str:
        return v.decode() if isinstance(v, bytes) else str(v)

    found = {
        "driver": text(pynvml.nvmlSystemGetDriverVersion()),
        "nvml": text(pynvml.nvmlSystemGetNVMLVersion()),
        "gpus": [text(pynvml.nvmlDeviceGetName(h)) for h in handles],
        "pynvml": _version("nvidia-ml-py"),
        "nvitop": _version("nvitop"),
        "gpustat": _version("gpustat"),
        "torch": _version("torch"),
        "python": sys.version.split()[0],
        "cpus": os.cpu_count(),
    }
    try:
        found["power_limit_w"] = pynvml.nvmlDeviceGetEnforcedPowerLimit(handles[0]) / 1000.0
    except pynvml.NVMLError:
        pass
    RESULT["machine"] = found
    for k, v in found.items():
        print(f"{k}: {v}")


def _version(dist: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def nvlink_raw(handles: list[Any]) -> None:
    """What NVML itself answers about NVLink, before infertop interprets it."""
    section("nvlink as NVML answers it")
    fields = [91, 138, 139, 161, 162, 163, 38, 45, 52, 59]
    rows = []
    for i, h in enumerate(handles):
        states: dict[str, Any] = {}
        for link in range(pynvml.NVML_NVLINK_MAX_LINKS):
            try:
                states[str(link)] = pynvml.nvmlDeviceGetNvLinkState(h, link)
            except pynvml.NVMLError as exc:
                states[str(link)] = type(exc).__name__
        answers = {}
        for scope_name, scope in (("all", 0xFFFFFFFF), ("link0", 0)):
            try:
                values = pynvml.nvmlDeviceGetFieldValues(h, [(f, scope) for f in fields])
                answers[scope_name] = {
                    str(f): (int(v.nvmlReturn), probe_gpus._field_number(v)) for f, v in zip(fields, values, strict=True)
                }
            except pynvml.NVMLError as exc:
                answers[scope_name] = type(exc).__name__
        rows.append({"gpu": i, "link_state": states, "fields": answers})
        distinct = sorted({str(s) for s in states.values()})
        print(f"gpu {i}: link states seen {distinct}")
        print(f"gpu {i}: fields (nvmlReturn, value) scope=all {answers.get('all')}")
    reader = probe_gpus.NvmlReader()
    first = reader.read()
    t_second = time.perf_counter()
    reader.read()
    second_s = time.perf_counter() - t_second
    keys = ["nvlink_links_total", "nvlink_links_up", "nvlink_tx_bytes_total", "nvlink_rx_bytes_total",
            "nvlink_errors_total"]
    mapped = [{k: g.get(k) for k in keys} for g in first]
    print("NvmlReader nvlink fields:", mapped)
    print(f"NvmlReader cached link probe: {reader.nvlinks}; fields {reader.nvlink_fields}")
    print(f"second read (links cached) took {second_s * 1e6:.0f} us for {len(handles)} GPU(s)")
    RESULT["nvlink"] = {"raw": rows, "reader": mapped, "links_cached": reader.nvlinks,
                        "fields_cached": [list(f or ()) for f in reader.nvlink_fields]}
    reader.close()


def start_load(seconds: float) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "benchmarks" / "gpu" / "load.py"), str(seconds)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()  # "ready" once the first products ran
    print("load:", line.strip(), flush=True)
    return proc


def under_load(handles: list[Any], load_s: float, sample_s: float, probe_ticks: int) -> None:
    section("idle, then under load: local source vs direct NVML, and the probe script")
    source = LocalSource("local", interval_s=0.5)
    series: list[dict[str, Any]] = []
    tick_costs: list[float] = []
    t0 = time.time()

    def tick(phase: str) -> None:
        c0 = time.perf_counter()
        reading = source.read()
        if phase == "load":
            tick_costs.append(time.perf_counter() - c0)
        direct = nvml_direct(handles)
        for g, d in zip(reading["gpus"], direct, strict=True):
            series.append({"t": round(time.time() - t0, 2), "phase": phase, "gpu": g["index"],
                           "util_pct": g.get("util_pct"), "power_w": g.get("power_w"),
                           "sm_clock_mhz": g.get("sm_clock_mhz"), "temp_c": g.get("temp_c"),
                           "direct": d})

    for _ in range(6):
        tick("idle")
        time.sleep(0.5)
    load = start_load(load_s)
    probe_lines: list[tuple[float, dict[str, Any], list[dict[str, float]]]] = []

    def run_probe() -> None:
        # the probe as the ssh source sends it: the bundled single file, its own process, with
        # no access to this repository (PYTHONPATH dropped), JSON lines on stdout
        script = Path("/tmp/infertop-probe-bundle.py")
        try:
            from infertop.collectors.probe.bundle import probe_script

            script.write_text(probe_script())
            argv = [sys.executable, str(script), "1", str(probe_ticks)]
            env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
            print("probe: bundled single file", script, flush=True)
        except Exception as exc:  # no bundler in this checkout: the module file itself
            print(f"probe: bundle unavailable ({exc}); running collectors/probe/main.py", flush=True)
            argv = [sys.executable, str(ROOT / "collectors" / "probe.py"), "1", str(probe_ticks)]
            env = dict(os.environ)
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env=env)
        assert proc.stdout is not None
        for line in proc.stdout:
            at = time.time() - t0
            probe_lines.append((at, json.loads(line), nvml_direct(handles)))
        proc.wait()

    prober = threading.Thread(target=run_probe)
    prober.start()
    end = time.monotonic() + sample_s
    while time.monotonic() < end:
        tick("load")
        time.sleep(0.5)
    prober.join()
    RESULT["series"] = series
    RESULT["local_tick_cost"] = quantiles_us(tick_costs)
    print("t_s phase gpu util% power_W sm_MHz temp_C | direct util% power_W sm_MHz")
    for row in series:
        d = row["direct"]
        print(f"{row['t']:5.1f} {row['phase']:4} {row['gpu']} {row['util_pct']!s:>5} {row['power_w']!s:>7} "
              f"{row['sm_clock_mhz']!s:>5} {row['temp_c']!s:>3} | {d['util_pct']:5} {d['power_w']:7.1f} {d['sm_clock_mhz']:5}")
    cost = RESULT["local_tick_cost"]
    print(f"local source tick (NVML+NICs+psutil) under load: median {cost['median_us']:.0f} us, "
          f"p99 {cost['p99_us']:.0f} us over {cost['n']} ticks")
    section("probe script vs direct NVML at the same moment")
    diffs: dict[str, list[float]] = {"util_pct": [], "power_w": [], "sm_clock_mhz": []}
    rows = []
    for at, line, direct in probe_lines:
        for g, d in zip(line.get("gpus", []), direct, strict=False):
            row = {"t": round(at, 2), "gpu": g["index"], **{k: g.get(k) for k in diffs}, "direct": d}
            rows.append(row)
            for k in diffs:
                if g.get(k) is not None:
                    diffs[k].append(abs(g[k] - d[k]))
            print(f"{at:5.1f} gpu {g['index']} probe util {g.get('util_pct')} power {g.get('power_w')} "
                  f"sm {g.get('sm_clock_mhz')} | direct util {d['util_pct']} power {d['power_w']:.1f} sm {d['sm_clock_mhz']}")
    summary = {k: {"median_abs_diff": statistics.median(v), "max_abs_diff": max(v)} for k, v in diffs.items() if v}
    print("probe − direct NVML:", summary)
    cpu = [line.get("probe_cpu_s") for _, line, _ in probe_lines]
    if len(cpu) >= 3 and all(c is not None for c in cpu):
        # skip the first tick: it includes start-up and nvmlInit
        per_tick_ms = (cpu[-1] - cpu[1]) / (len(cpu) - 2) * 1000
        summary["probe_cpu_ms_per_tick"] = per_tick_ms
        print(f"probe CPU per tick (user+sys, from its own os.times): {per_tick_ms:.2f} ms")
    RESULT["probe_vs_direct"] = {"rows": rows, "summary": summary, "lines": len(probe_lines)}
    load.wait(timeout=load_s + 30)
    tail = load.stdout.read() if load.stdout else ""
    print("load:", tail.strip())


def per_call_costs(handles: list[Any]) -> None:
    section("NVML per call (first GPU)")
    h = handles[0]
    calls: dict[str, Callable[[], Any]] = {
        "utilization": lambda: pynvml.nvmlDeviceGetUtilizationRates(h),
        "memory": lambda: pynvml.nvmlDeviceGetMemoryInfo(h),
        "power": lambda: pynvml.nvmlDeviceGetPowerUsage(h),
        "temperature": lambda: pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU),
        "sm_clock": lambda: pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM),
        "clock_event_reasons": lambda: pynvml.nvmlDeviceGetCurrentClocksEventReasons(h),
        "ecc_uncorrected": lambda: pynvml.nvmlDeviceGetTotalEccErrors(
            h, pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, pynvml.NVML_VOLATILE_ECC),
        "total_energy": lambda: pynvml.nvmlDeviceGetTotalEnergyConsumption(h),
        "nvlink_state_link0": lambda: pynvml.nvmlDeviceGetNvLinkState(h, 0),
        "field_values_nvlink_tx_rx": lambda: pynvml.nvmlDeviceGetFieldValues(h, [(138, 0xFFFFFFFF), (139, 0xFFFFFFFF)]),
    }
    out = {}
    for name, fn in calls.items():
        try:
            out[name] = time_calls(fn, 200 if name != "total_energy" else 50)
            print(f"{name:28} median {out[name]['median_us']:9.1f} us  p99 {out[name]['p99_us']:9.1f} us")
        except pynvml.NVMLError as exc:
            out[name] = {"error": type(exc).__name__}
            print(f"{name:28} {type(exc).__name__} (timed failing call: ", end="")
            try:
                t = time_calls(lambda fn=fn: _swallow(fn), 200)
                print(f"median {t['median_us']:.1f} us)")
                out[name]["failing_call"] = t
            except Exception as exc2:  # pragma: no cover - diagnostic only
                print(exc2, ")")
    RESULT["nvml_per_call"] = out


def _swallow(fn: Callable[[], Any]) -> None:
    try:
        fn()
    except pynvml.NVMLError:
        pass


def side_by_side(handles: list[Any], key: str = "side_by_side") -> None:
    section(f"per-sample cost of every GPU, side by side ({key})")
    rows: dict[str, dict[str, float]] = {}
    reader = probe_gpus.NvmlReader()
    reader.read()  # learn what is unsupported first, as it would in a running monitor
    rows["infertop NvmlReader.read (probe & local)"] = time_calls(reader.read, 300)
    rows["direct NVML, same six figures"] = time_calls(lambda: nvml_direct(handles), 300)
    try:
        state: dict[str, Any] = {"prev": None}

        def probe_tick() -> None:
            _, state["prev"] = probe.reading(reader, None, state["prev"])

        rows["infertop probe.reading (GPUs+NICs+host, one tick)"] = time_calls(probe_tick, 200)
    except Exception as exc:
        print("probe.reading failed:", type(exc).__name__, exc)
    source = LocalSource("local", interval_s=1.0)
    source.read()
    rows["infertop LocalSource.read (GPUs+NICs+host)"] = time_calls(source.read, 200)
    try:
        from nvitop import Device

        devices = Device.all()

        def nvitop_same() -> list[tuple[Any, ...]]:
            return [(d.gpu_utilization(), d.memory_used(), d.memory_total(), d.power_usage(), d.temperature(),
                     d.sm_clock()) for d in devices]

        rows["nvitop Device methods, same six figures"] = time_calls(nvitop_same, 300)
        rows["nvitop Device.as_snapshot()"] = time_calls(lambda: [d.as_snapshot() for d in devices], 100)
    except Exception as exc:
        print("nvitop failed:", type(exc).__name__, exc)
    try:
        import gpustat

        rows["gpustat new_query()"] = time_calls(gpustat.new_query, 100)
    except Exception as exc:
        print("gpustat failed:", type(exc).__name__, exc)
    smi = probe_gpus.NvidiaSmiReader("nvidia-smi")
    rows["nvidia-smi --query-gpu subprocess (probe fallback)"] = time_calls(smi.run, 30, warmup=2)
    got = smi.run()
    print("nvidia-smi fallback parsed:", got)
    RESULT["nvidia_smi_parsed"] = got
    base = rows["direct NVML, same six figures"]["median_us"]
    print(f"{'reader':52} {'median us':>10} {'p99 us':>10} {'x direct NVML':>14}")
    for name, r in rows.items():
        r["ratio_to_direct_nvml"] = r["median_us"] / base
        print(f"{name:52} {r['median_us']:10.1f} {r['p99_us']:10.1f} {r['ratio_to_direct_nvml']:14.1f}")
    RESULT[key] = rows
    reader.close()


def side_by_side_under_load(handles: list[Any]) -> None:
    load = start_load(40.0)
    try:
        time.sleep(1.0)
        side_by_side(handles, key="side_by_side_under_load")
    finally:
        load.kill()
        load.wait()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=None)
    parser.add_argument("--load-s", type=float, default=40.0)
    parser.add_argument("--sample-s", type=float, default=20.0)
    parser.add_argument("--probe-ticks", type=int, default=12)
    args = parser.parse_args()
    pynvml.nvmlInit()
    handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
    steps: list[Callable[[], None]] = [
        lambda: info(handles),
        lambda: nvlink_raw(handles),
        lambda: under_load(handles, args.load_s, args.sample_s, args.probe_ticks),
        lambda: per_call_costs(handles),
        lambda: side_by_side(handles),
        lambda: side_by_side_under_load(handles),
    ]
    failed = 0
    for step in steps:
        try:
            step()
        except Exception as exc:  # one broken step must not lose the others' figures
            failed += 1
            import traceback

            traceback.print_exc()
            RESULT.setdefault("errors", []).append(f"{type(exc).__name__}: {exc}")
    if args.out:
        Path(args.out, "measure.json").write_text(json.dumps(RESULT, indent=1, default=str))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
