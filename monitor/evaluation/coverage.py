"""Coverage: what the layout expects of a node that no source can see now, and why. Pure.

Unknown is never healthy. A node whose node_exporter page fails has its expected ports
unknown, so no link-starved verdict can appear for it; a dcgm-exporter that does not
collect clock-event reasons leaves the throttled verdict nothing to look at. Each such
blind spot is a `CoverageGap` with a one-line reason, taken from the samples: a page that
failed (`NodeSample.pages`), what a source says it cannot see (`NodeSample.unseen`), a
source's own note, else which sources answered without it. The `blind` verdict
(`conditions.blind_condition`) quotes them.

What counts as expected: the layout's `gpus` (their count, and on NVIDIA GPUs their
clock-event reasons), each of its `nics` (state, and speed where an `expected_gbps` is
given) and its `engine`. A node without any of these (the local machine with no layout)
expects nothing and is never blind.
"""

from __future__ import annotations

from collections.abc import Sequence

from infertop.collectors.sample import NodeSample
from infertop.layouts.model import NodeConfig
from infertop.monitor.evaluation.congestion import signal_nics
from infertop.monitor.snapshot import CoverageGap, EngineView, GpuView, NicView

GPUS = "gpus"
PORTS = "ports"
PORT_SPEED = "port_speed"
ENGINE = "engine"
CLOCK_EVENTS = "clock_events"
PAUSE, CNP, ECN = "pause", "cnp", "ecn"

# what a source's `unseen` key is called in a reason ("ECC unknown: …")
UNSEEN_LABELS: dict[str, str] = {
    CLOCK_EVENTS: "throttle",
    "nvlink": "NVLink",
    "nvlink_errors": "NVLink errors",
    "ecc": "ECC",
    "nic_errors": "port errors",
    "npu_link_speed": "NPU link speed",
    "npu_traffic": "NPU traffic",
    PAUSE: "pause frames",
    CNP: "CNP",
    ECN: "ECN",
}
# the RoCE congestion counters the congested verdict reads, by coverage kind: (NicView
# fields, why none is read — where each is served)
CONGESTION_COUNTERS: dict[str, tuple[tuple[str, ...], str]] = {
    PAUSE: (("rx_pause_per_s", "tx_pause_per_s"),
            "no port reports PFC pause frames (ethtool rx/tx_prio<N>_pause: node_exporter's ethtool "
            "collector, or the probe)"),
    CNP: (("cnp_sent_per_s", "cnp_handled_per_s"),
          "no port reports congestion notifications (mlx5 hw_counters np_cnp_sent, rp_cnp_handled: "
          "the probe reads them, node_exporter's infiniband collector does not)"),
    ECN: (("ecn_marked_per_s",),
          "no port reports ECN-marked packets (ethtool rx_ecn_mark, hw_counters np_ecn_marked_roce_packets)"),
}

# a source's `unseen` keys that matter only where the layout expects accelerators / ports
GPU_KEYS = frozenset({CLOCK_EVENTS, "nvlink", "nvlink_errors", "ecc", "npu_link_speed", "npu_traffic"})
PORT_KEYS = frozenset({"nic_errors"})

# words by which a source's note is about a part (the probe's "no NVIDIA driver: no GPU
# figures (…)", the SSH source's "engine metrics: …", the log source's "engine log: …")
NOTE_WORDS: dict[str, tuple[str, ...]] = {
    "gpus": ("GPU", "NPU", "pynvml", "nvidia-smi"),
    "nics": ("port", "NIC", "infiniband"),
    "engine": ("engine", "log"),
}

PART_WORDS = {"gpus": "accelerators", "nics": "ports", "engine": "engine figures"}


def _dedupe(items: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(items))


def part_reason(part: str, latest: Sequence[NodeSample], fallback: str | None = None) -> str:
    """Why `part` ("gpus", "nics", "engine") of a node is unknown, in one line.

    `latest`: the newest good sample of each source, newest first (`NodeState.latest`);
    `fallback`: the reason when no page failed and no note says why (else: which
    sources answered without it)."""
    pages = [p for s in latest for p in s.pages if not p.ok]
    failed = [p for p in pages if part in p.parts]
    if not failed and part != "engine":
        # an exporter page that never read right: it may well be the one (an engine page
        # always says it is one)
        failed = [p for p in pages if not p.parts]
    if failed:
        return "; ".join(_dedupe([f"{p.kind} page failed ({p.error or 'no reason given'})" for p in failed]))
    words = [w.lower() for w in NOTE_WORDS.get(part, ())]
    notes = [n for s in latest if not getattr(s, part) for n in s.notes if any(w in n.lower() for w in words)]
    if notes:
        return notes[0]
    if fallback is not None:
        return fallback
    if not latest:
        return "no source has answered"
    what = PART_WORDS.get(part, part)
    covering = _dedupe([s.source for s in latest if getattr(s, part) is not None])
    if covering:
        return f"{', '.join(covering)} reports no {what}"
    return f"no source reads {what} (read by: {', '.join(_dedupe([s.source for s in latest]))})"


def _unseen(latest: Sequence[NodeSample]) -> dict[str, str]:
    """Every source's `unseen`, the newest source's reason first for a key."""
    out: dict[str, str] = {}
    for sample in latest:
        for key, reason in sample.unseen.items():
            out.setdefault(key, reason)
    return out


def _gpu_gaps(
    config: NodeConfig, latest: Sequence[NodeSample], gpus: Sequence[GpuView]
) -> tuple[list[CoverageGap], list[CoverageGap]]:
    """(count gaps, clock-event gaps): the first go first in the reason, the others after
    the ports and the engine."""
    expected = config.gpus
    if not expected:
        return [], []
    label = "NPUs" if config.accelerator == "npu" else "GPUs"
    if not gpus:
        detail = f"{label} unknown (0 of {expected} seen): {part_reason('gpus', latest)}"
        return [CoverageGap(kind=GPUS, detail=detail)], []
    nvidia = [g for g in gpus if g.kind == "gpu"]
    # Ascend NPUs have no clock-event reasons to read: nothing is missing there
    if nvidia and all(g.clock_event_reasons is None for g in nvidia):
        reason = _unseen(latest).get(CLOCK_EVENTS)
        if reason is None:
            sources = _dedupe([s.source for s in latest if s.gpus])
            reason = f"{', '.join(sources) or 'no source'} reports no clock-event reasons"
        return [], [CoverageGap(kind=CLOCK_EVENTS, detail=f"throttle unknown: {reason}")]
    return [], []


def _port_gaps(
    config: NodeConfig, latest: Sequence[NodeSample], nics: Sequence[NicView]
) -> list[CoverageGap]:
    if not config.nics:
        return []
    views = {n.name: n for n in nics}
    gaps = []
    unknown = [e.name for e in config.nics if (v := views.get(e.name)) is None or v.state is None]
    no_speed = [
        e.name for e in config.nics
        if e.expected_gbps and (v := views.get(e.name)) is not None and v.up and v.speed_gbps is None
    ]
    if not unknown and not no_speed:
        return []  # the usual case, every tick: nothing more to build
    reporting = ", ".join(_dedupe([s.source for s in latest if s.nics is not None]))
    if unknown:
        # no source covers ports (a failed page, none configured), or one that does reports
        # the port without a state; an expected port absent from a report is "missing",
        # which is link-starved, not blind
        if reporting:
            reason = f"{reporting} reports no state for {'them' if len(unknown) > 1 else 'it'}"
        else:
            reason = part_reason("nics", latest)
        if len(unknown) == len(config.nics):
            subject = "links"
        else:
            subject = ("ports " if len(unknown) > 1 else "port ") + ", ".join(unknown)
        gaps.append(CoverageGap(kind=PORTS, detail=f"{subject} unknown: {reason}"))
    if no_speed:  # a rate the layout expects but no speed to compare it with: "slow" cannot be judged
        plural = "s" if len(no_speed) > 1 else ""
        detail = f"port{plural} {', '.join(no_speed)} speed unknown: {reporting or 'no source'} reports none"
        gaps.append(CoverageGap(kind=PORT_SPEED, detail=detail))
    return gaps


def congestion_counter_gaps(nics: Sequence[NicView]) -> list[CoverageGap]:
    """The RoCE congestion counters none of the node's ports reads, one gap each, so the
    congested verdict's silence on them is said (once: a gap every peer shares is one
    finding, shared_gaps.py), never shown as 0 or a bare "—". An InfiniBand-only node has
    no pause frames, CNPs or ECN to read (credit flow control): nothing is missing there."""
    ports = signal_nics(nics)
    if not any(n.rx_bytes_per_s is not None or n.xmit_wait_per_s is not None for n in ports):
        return []  # no port rate known yet (the first reading): nothing to say is unread
    if not any(n.kind == "roce" or n.rx_pause_per_s is not None or n.tx_pause_per_s is not None
               for n in ports):
        return []
    return [CoverageGap(kind=kind, detail=f"{UNSEEN_LABELS[kind]} unknown: {why}")
            for kind, (fields, why) in CONGESTION_COUNTERS.items()
            if not any(getattr(n, f) is not None for n in ports for f in fields)]


def _engine_gaps(
    config: NodeConfig, latest: Sequence[NodeSample], engine: EngineView | None
) -> list[CoverageGap]:
    e = config.engine
    if e is None or engine is not None or not (e.url or e.log or e.log_command):
        return []
    # an engine read only from its log has figures once a stats line is parsed: an idle
    # engine may print none for a while
    fallback = None if e.url else "no stats line parsed from its log yet"
    return [CoverageGap(kind=ENGINE, detail=f"engine unknown: {part_reason('engine', latest, fallback)}")]


def expects_anything(config: NodeConfig | None) -> bool:
    return config is not None and bool(config.gpus or config.nics or config.engine is not None)


def node_coverage(
    config: NodeConfig | None,
    latest: Sequence[NodeSample],
    gpus: Sequence[GpuView],
    nics: Sequence[NicView],
    engine: EngineView | None,
) -> list[CoverageGap]:
    """The node's blind spots, most important first: accelerators, ports, engine, clock
    events, then whatever else a source says it cannot see (NVLink, ECC, …).

    `latest`: the newest good sample of each source, newest first; `gpus`, `nics`,
    `engine`: the node's views this tick (what is known)."""
    if config is None or not expects_anything(config):
        return []
    counts, clocks = _gpu_gaps(config, latest, gpus)
    gaps = [*counts, *_port_gaps(config, latest, nics), *_engine_gaps(config, latest, engine), *clocks,
            # not only ports the layout names: a port that reads pause frames says RoCE is used
            *congestion_counter_gaps(nics)]
    seen = {g.kind for g in gaps}
    for key, reason in _unseen(latest).items():
        if key == CLOCK_EVENTS or key in seen:
            continue  # judged above, from the figures themselves
        if (key in GPU_KEYS and not config.gpus) or (key in PORT_KEYS and not config.nics):
            continue  # about something this node is not expected to have
        gaps.append(CoverageGap(kind=key, detail=f"{UNSEEN_LABELS.get(key, key)} unknown: {reason}"))
        seen.add(key)
    return gaps
