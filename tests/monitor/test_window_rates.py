"""Rates kept from tick to tick (`WindowRates`, `RateCache`) equal rates derived afresh.

The cache is only allowed to make a tick cheaper: every rate it gives must be exactly
(not approximately) `counter_rate` over the same window, whatever the samples do —
counters that reset, ports that come and go, unknown values, windows that slide by
several samples, jump, shrink or reach back, a source that takes over.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from infertop.collectors.bounds import counter_trust
from infertop.collectors.fleet import FleetState
from infertop.collectors.rates import CounterTrust, checked_counter_rate, counter_rate
from infertop.collectors.sample import EngineSample, GpuSample, NicSample, NodeSample
from infertop.monitor.evaluation.cluster import evaluate_nodes
from infertop.monitor.evaluation.figures import engine_counters, idle_counts, idle_fraction, nic_counters
from infertop.monitor.evaluation.window_rates import RateCache, WindowRates, WindowSums
from infertop.monitor.monitor import Monitor
from tests.support.tui_helpers import NodeSpec, make_layout, make_sample

PORTS = ("mlx5_0", "mlx5_1", "eth0")
NIC_FIELDS = ("rx_bytes_total", "tx_bytes_total", "xmit_wait_total", "errors_total")

counter = st.one_of(st.none(), st.floats(0, 1e6, allow_nan=False), st.integers(0, 10).map(float))
port = st.fixed_dictionaries({f: counter for f in NIC_FIELDS})
# each sample: which ports it reports (a port may vanish and return) and their counters
sample_parts = st.dictionaries(st.sampled_from(PORTS), port, max_size=len(PORTS))


def make_samples(parts: list[dict[str, dict[str, float | None]]], steps: list[float]) -> list[NodeSample]:
    samples, t = [], 1000.0
    for nics, step in zip(parts, steps, strict=False):
        t += step  # 0 allowed: two readings at the same instant
        samples.append(NodeSample(
            node="n", source="s", taken_at=t,
            nics=[NicSample(name=name, **fields) for name, fields in nics.items()],
        ))
    return samples


def reference(
    window: list[NodeSample], key: tuple[str, str], trust: CounterTrust | None = None
) -> tuple[float | None, str | None]:
    name, field = key
    points = []
    for s in window:
        nic = {n.name: n for n in s.nics or ()}.get(name)
        points.append((s.taken_at, getattr(nic, field) if nic is not None else None))
    return checked_counter_rate(points, trust)


# how far counters are trusted: not at all (Prometheus), by the real bounds, or so tightly
# that the generated counters often rise too fast or reset too often
TIGHT = CounterTrust(max_per_s=4e5, reset_repeat_s=2.0)
TRUSTS = {"none": None, "bounds": counter_trust, "tight": lambda key: TIGHT}


# mostly the steady state: every port, every counter known; now and then one unknown
def _steady(values: list[float], unknown: int) -> dict[str, dict[str, float | None]]:
    known: list[float | None] = list(values)
    if unknown >= 0:
        known[unknown] = None
    return {p: {"rx_bytes_total": known[2 * i], "tx_bytes_total": known[2 * i + 1]} for i, p in enumerate(PORTS)}


steady_parts = st.builds(
    _steady,
    st.lists(st.floats(0, 1e12), min_size=2 * len(PORTS), max_size=2 * len(PORTS)),
    st.sampled_from([-1] * 20 + list(range(2 * len(PORTS)))),
)

# windows as (start, end) moves: mostly sliding forward, sometimes jumping anywhere
move = st.one_of(
    st.tuples(st.integers(0, 2), st.integers(0, 2)).map(lambda d: ("slide", *d)),
    st.tuples(st.integers(0, 40), st.integers(0, 40)).map(lambda d: ("jump", *d)),
)


@settings(max_examples=150, deadline=None)
@given(
    parts=st.one_of(
        st.lists(sample_parts, min_size=1, max_size=40),
        st.lists(steady_parts, min_size=1, max_size=40),
    ),
    steps=st.lists(st.sampled_from([0.0, 0.5, 1.0, 1.0, 1.0, 2.5]), min_size=40, max_size=40),
    moves=st.lists(move, min_size=1, max_size=30),
    trust_name=st.sampled_from(sorted(TRUSTS)),
)
def test_kept_rates_equal_counter_rate_on_every_window(
    parts: list[dict[str, dict[str, float | None]]], steps: list[float], moves: list[tuple[str, int, int]],
    trust_name: str,
) -> None:
    samples = make_samples(parts, steps)
    trust = TRUSTS[trust_name]
    kept = WindowRates(nic_counters, trust)
    start, end = 0, min(3, len(samples))
    for kind, a, b in moves:
        if kind == "slide":
            start, end = start + a, end + a + b
        else:
            start, end = sorted((a, b))
        start, end = min(start, len(samples)), min(end, len(samples))
        window = samples[start:end]
        kept.update(window)
        for key in [(p, f) for p in PORTS for f in NIC_FIELDS]:
            rate, doubt = reference(window, key, trust(key) if trust else None)
            assert kept.rate(key) == rate, (key, start, end)
            assert kept.doubts.get(key) == doubt, (key, start, end)


@settings(max_examples=100, deadline=None)
@given(
    utils=st.lists(st.lists(st.one_of(st.none(), st.floats(0, 100)), max_size=4), min_size=1, max_size=30),
    moves=st.lists(move, min_size=1, max_size=30),
)
def test_kept_idle_tallies_equal_a_fresh_count(
    utils: list[list[float | None]], moves: list[tuple[str, int, int]]
) -> None:
    samples = [
        NodeSample(node="n", source="s", taken_at=float(i),
                   gpus=[GpuSample(index=g, util_pct=u) for g, u in enumerate(row)])
        for i, row in enumerate(utils)
    ]
    kept = WindowSums(lambda s: idle_counts(s, 5.0))
    start, end = 0, 1
    for kind, a, b in moves:
        start, end = (start + a, end + a + b) if kind == "slide" else tuple(sorted((a, b)))
        window = samples[min(start, len(samples)):min(end, len(samples))]
        below = sum(u < 5.0 for s in window for g in s.gpus or () if (u := g.util_pct) is not None)
        known = sum(g.util_pct is not None for s in window for g in s.gpus or ())
        assert kept.update(window).totals == (below, known)
        assert idle_fraction(window, 5.0, kept) == idle_fraction(window, 5.0) == (below / known if known else None)


def engine_sample(t: float, steps: float | None, source: str = "s") -> NodeSample:
    return NodeSample(node="n", source=source, taken_at=t,
                      engine=EngineSample(steps_total=steps, generation_tokens_total=10 * t))


def test_reset_and_unknown_values_inside_the_window() -> None:
    kept = WindowRates(engine_counters)
    window = [engine_sample(0, 100), engine_sample(1, 150), engine_sample(2, 30), engine_sample(3, 80)]
    kept.update(window)
    assert kept.rate("steps_total") == 130 / 3  # the restart counts from zero
    window = [*window[1:], engine_sample(4, None)]  # an unknown value: not a zero
    kept.update(window)
    assert kept.rate("steps_total") == counter_rate([(s.taken_at, s.engine.steps_total) for s in window
                                                     if s.engine is not None])
    assert kept.rate("steps_total") == (30 + 50) / 2
    window = [*window[2:], engine_sample(5, 90)]  # the unknown one is still inside
    kept.update(window)
    assert kept.rate("steps_total") == 10 / 2
    window = [*window[2:], engine_sample(6, 100)]  # and has left
    kept.update(window)
    assert kept.rate("steps_total") == 10.0
    assert kept.rate("generation_tokens_total") == 10.0
    assert kept.rate("drafts_total") is None  # never reported


def test_another_source_taking_over_starts_afresh() -> None:
    kept = WindowRates(engine_counters)
    kept.update([engine_sample(0, 0), engine_sample(1, 10)])
    other = [engine_sample(1.5, 5000, "t"), engine_sample(2.5, 5001, "t")]
    kept.update(other)
    assert kept.rate("steps_total") == 1.0
    kept.update(other[1:])  # a single reading: unknown
    assert kept.rate("steps_total") is None


def test_cache_forgets_nodes_no_longer_evaluated() -> None:
    cache = RateCache()
    a = cache.rates("a", "engine", engine_counters, [engine_sample(0, 0), engine_sample(1, 10)])
    assert cache.rates("a", "engine", engine_counters, []) is a
    cache.forget_except({"b"})
    assert cache.rates("a", "engine", engine_counters, []) is not a


def test_monitor_ticks_with_the_cache_equal_fresh_evaluation() -> None:
    """Every tick's node views with the cache `Monitor` keeps equal views derived afresh:
    ports down, a node going silent, an engine that restarts, a port that appears late,
    an extra tick between readings."""
    specs = [
        NodeSpec("decode-01", gpus=4),
        NodeSpec("decode-02", gpus=4, down_nics=("mlx5_1",), util_pct=3.0, steps_per_s=12.0),
        NodeSpec("decode-03", gpus=4, silent_after=9),
        NodeSpec("prefill-01", role="prefill", steps_per_s=None),
    ]
    interval = 1.0
    layout = make_layout(specs, interval_s=interval)
    t0 = 1_800_000_000.0
    monitor = Monitor(layout, sources=[], clock=lambda: t0)
    for n in range(30):
        now = t0 + n * interval
        for spec in specs:
            if spec.silent_after is not None and n >= spec.silent_after:
                continue
            sample = make_sample(spec, n, now, interval, "synthetic")
            if spec.name == "decode-01" and n >= 15:  # the engine restarted: counters from 0
                assert sample.engine is not None
                engine = sample.engine.model_copy(update={"steps_total": (n - 15) * 3.0})
                sample = sample.model_copy(update={"engine": engine})
            if spec.name == "decode-02" and n >= 12:  # a port that appears late
                extra = sample.nics[0].model_copy(update={"name": "mlx5_9"})  # type: ignore[index]
                sample = sample.model_copy(update={"nics": [*(sample.nics or []), extra]})
            monitor.fleet.ingest(sample)
        if n % 7 == 3:  # an extra tick between readings: the windows did not move
            monitor.tick(now + 0.3 * interval)
        snapshot = monitor.tick(now + 0.5 * interval)
        fresh = evaluate_nodes(monitor.state, layout, now + 0.5 * interval).nodes
        # verdicts, restart marks and the warm-up standing are the tick's (the tracker's, the
        # timeline's, judging.WarmUp's), not a view's
        tick_own = {"verdicts": [], "restarted_at": None, "standing": "ok", "first_verdicts_in_s": None}
        assert [node.model_copy(update=tick_own) for node in snapshot.nodes] == [
            node.model_copy(update=tick_own) for node in fresh
        ]
    by_name = {node.name: node for node in snapshot.nodes}
    assert by_name["decode-01"].engine is not None
    assert by_name["decode-01"].engine.decode_steps_per_s == 3.0
    assert by_name["decode-02"].nics[0].rx_bytes_per_s == 5e9


def test_a_state_read_with_a_kept_cache_reads_as_a_fresh_one() -> None:
    state = FleetState(["n"], retain_s=12.0)
    for i in range(20):
        state.add(engine_sample(float(i), float(i * i)))
    layout = make_layout([NodeSpec("n")], interval_s=1.0)
    cache = RateCache()
    for now in (15.0, 19.0, 19.5, 40.0):
        assert evaluate_nodes(state, layout, now, cache) == evaluate_nodes(state, layout, now)


def test_port_counter_keys_are_the_same_objects_every_sample() -> None:
    """The (port, field) keys of every sample are the very same tuples: ~10k fewer young
    objects a tick at 128 nodes for the paced collector to scan (collectors/process/gc_pacing.py)."""

    def sample(t: float) -> NodeSample:
        return NodeSample(node="n", source="s", taken_at=t, nics=[
            NicSample(name="mlx5_0", kind="infiniband", rx_bytes_total=t * 1e9, tx_bytes_total=t * 2e9),
            NicSample(name="eth0", kind="ethernet", rx_bytes_total=t, rx_errors_total=0.0),
        ])

    first, second = nic_counters(sample(1.0)), nic_counters(sample(2.0))
    assert list(first) == [("mlx5_0", "rx_bytes_total"), ("mlx5_0", "tx_bytes_total"),
                           ("eth0", "rx_bytes_total"), ("eth0", "rx_errors_total")]
    assert all(a is b for a, b in zip(first, second, strict=True))
    assert second[("mlx5_0", "tx_bytes_total")] == 4e9


def test_a_window_slid_by_several_samples_is_found_by_identity() -> None:
    """The window's new first sample found further in (several samples arrived at once), and
    not found at all (nothing kept: recomputed), without comparing samples field by field."""
    from infertop.monitor.evaluation.window_rates import _slid_by

    samples = [NodeSample(node="n", source="s", taken_at=float(t)) for t in range(5)]
    assert _slid_by(samples[:4], samples[2:5]) == 2
    assert _slid_by(samples[:4], samples[3:5]) == 3
    twin = samples[2].model_copy()  # equal, not the same object: recomputed, never wrong
    assert _slid_by(samples[:4], [twin, samples[3]]) is None
    assert _slid_by(samples[:2], samples[4:]) is None
    assert _slid_by(samples[:3], [samples[1], samples[0]]) is None  # begins with old[1:], then differs
