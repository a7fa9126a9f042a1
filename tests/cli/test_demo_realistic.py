"""The demo's realistic pages: real size and shape, the same truth as the small ones."""

from __future__ import annotations

import re
from typing import cast

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

from infertop.collectors.pages.exporters import EXPORTER_WANTED, parts_from_exporter
from infertop.collectors.pages.exposition import parse_exposition
from infertop.collectors.pages.exposition_fast import parse_wanted_fast
from infertop.collectors.pages.profiles import BUNDLED_PROFILES, engine_sample_from_text
from infertop.collectors.sample import GpuSample, NicSample
from infertop.demo import realistic, realistic_hosts, render
from infertop.demo.realistic import ENGINES, split
from infertop.demo.realistic_hosts import DCGM_DEFAULT
from infertop.demo.scenario import IB_PORTS, SimCluster
from tests.support.vllm_dp_page import vllm_dp_page

T0 = 1_000_000.0
NODES = ("decode-01", "decode-03", "decode-07", "prefill-01", "prefill-02")


def _covers(have: BaseModel, want: BaseModel) -> None:
    """Every figure the small page gives, the realistic one gives the same (it may add more)."""
    for field, value in want.model_dump().items():
        if value is not None:
            assert getattr(have, field) == value, field


def _pair() -> tuple[SimCluster, SimCluster]:
    """Two identical clusters: one read through small pages, one through realistic ones."""
    return SimCluster(16, started_at=T0), SimCluster(16, started_at=T0)


@pytest.mark.parametrize("node", NODES)
def test_engine_page_is_real_size_and_tells_the_same_truth(node: str) -> None:
    small, real = _pair()
    for now in (T0 + 30.0, T0 + 31.3, T0 + 95.0):
        expected = engine_sample_from_text(render.engine_page(small.nodes[node], now), "deepinfer")
        text = realistic.engine_page(real.nodes[node], now)
        got = engine_sample_from_text(text, "deepinfer")
        for field in type(expected).model_fields:
            want, have = getattr(expected, field), getattr(got, field)
            if field == "ranks":
                # each of the real page's engines read alone (issue 35): lockstep, each as the one
                assert want is not None and have is not None and len(want) == 1 and len(have) == ENGINES
                assert {r.engine.steps_total for r in have} == {want[0].engine.steps_total}, field
                continue
            if field == "latency_buckets":
                # the scoreboard's histograms, summed over the engines; the real page has
                # vLLM's finer TTFT / ITL bucket sets: the same counts at the bounds both have.
                # Its e2e / queue histograms are drawn from typical values (not the scenario's)
                assert want is not None and have is not None and set(have) == set(want), field
                for name, rows in want.items():
                    if name in ("e2e", "queue"):
                        continue
                    ours = dict(have[name])
                    common = [(le, c) for le, c in rows if le in ours]
                    assert len(common) >= 2 and common[-1][0] == float("inf"), name
                    for le, count in common:
                        assert ours[le] == pytest.approx(count, abs=0.1 * ENGINES), (name, le)  # split in tenths
            elif field == "settings":
                assert have == want, field  # the same settings, however many engines
            elif isinstance(want, dict):
                # per-engine figures: the 8 engines step in lockstep, each as the one engine did
                assert len(have) == ENGINES and set(have.values()) == set(want.values()), field
            elif isinstance(want, float):
                # both pages print counters to 0.1 (sums to 1e-6): split in those units
                assert have == pytest.approx(want, abs=0.05 * ENGINES + 1e-6, rel=1e-9), field
            elif isinstance(want, tuple) and want and isinstance(want[0], float):
                # a counter per draft position, each summed like the counters above
                assert have is not None and len(have) == len(want), field
                assert list(have) == pytest.approx(list(want), abs=0.05 * ENGINES + 1e-6, rel=1e-9), field
            else:
                assert have == want, field
        assert text.count("\n") >= 2800 and len(text) > 250_000
        assert len(set(re.findall(r'engine="(\d+)"', text))) == ENGINES
        assert parse_wanted_fast(text, BUNDLED_PROFILES["deepinfer"].wanted) is not None
        # skimmed (collectors.sources.scrape reads most rounds so): the same
        assert parse_wanted_fast(text, BUNDLED_PROFILES["deepinfer"].wanted, skim=True) == parse_wanted_fast(text, BUNDLED_PROFILES["deepinfer"].wanted)


def test_engine_page_has_vllms_own_families_and_buckets() -> None:
    """The same families, types and bucket bounds as the page prometheus_client builds
    from vLLM's definitions (tests/fixtures/vllm_dp_page.py)."""

    def shape(text: str) -> tuple[set[str], set[tuple[str, str]]]:
        types = set(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M))
        buckets = set(re.findall(r'^(\S+)_bucket\{engine="0",le="([^"]+)"', text, re.M))
        return {f"{n} {k}" for n, k in types}, buckets

    reference, _ = vllm_dp_page(ENGINES)
    ours = realistic.engine_page(SimCluster(16, started_at=T0).nodes["decode-01"], T0 + 60)
    (our_types, our_buckets), (ref_types, ref_buckets) = shape(ours), shape(reference)
    # beyond vLLM's core families: its NIXL connector's (a disaggregated decode node's),
    # and the info / health gauges (vllm:cache_config_info is vLLM's; the reference page
    # builds only the stat logger's families)
    nixl = {t for t in our_types - ref_types
            if t.startswith(("vllm:nixl_", "vllm:cache_config_info ", "vllm:engine_healthy "))}
    assert our_types - nixl == ref_types
    assert {b for b in our_buckets if not b[0].startswith("vllm:nixl_")} == ref_buckets


def test_dcgm_page_has_the_default_counters_for_eight_gpus_and_the_same_gpus() -> None:
    small, real = _pair()
    for node in NODES:
        text = realistic_hosts.dcgm_page(real.nodes[node], T0 + 40)
        expected = parts_from_exporter(parse_exposition(render.dcgm_page(small.nodes[node], T0 + 40),
                                                        wanted=EXPORTER_WANTED))
        gpus = cast(list[GpuSample], parts_from_exporter(parse_exposition(text, wanted=EXPORTER_WANTED))["gpus"])
        # the default counters add NVLink traffic (DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL), which the
        # scenario does not drive; every figure it drives is the same
        for gpu, want in zip(gpus, cast(list[GpuSample], expected["gpus"]), strict=True):
            _covers(gpu, want)
            assert gpu.nvlink_bytes_per_s is not None and 0 <= gpu.nvlink_bytes_per_s < 400e9
        for name, _, _ in DCGM_DEFAULT:
            assert len(re.findall(rf"^{name}\{{", text, re.M)) == 8, name
        assert parse_wanted_fast(text, EXPORTER_WANTED) is not None
        # skimmed (collectors.sources.scrape reads most rounds so): the same
        assert parse_wanted_fast(text, EXPORTER_WANTED, skim=True) == parse_wanted_fast(text, EXPORTER_WANTED)


def test_node_exporter_page_has_many_interfaces_and_the_same_links() -> None:
    small, real = _pair()
    for node in NODES:
        text = realistic_hosts.node_exporter_page(real.nodes[node], T0 + 50)
        parts = parts_from_exporter(parse_exposition(text, wanted=EXPORTER_WANTED))
        nics = {n.name: n for n in cast(list[NicSample], parts["nics"])}
        expected = parts_from_exporter(parse_exposition(render.node_exporter_page(small.nodes[node], T0 + 50),
                                                        wanted=EXPORTER_WANTED))
        for nic in cast(list[NicSample], expected["nics"]):
            # a real node_exporter also reports error and drop counters: zeros, a healthy node
            _covers(nics[nic.name], nic)
            assert {nics[nic.name].rx_errors_total, nics[nic.name].rx_drops_total} <= {0.0, None}
        # the page serves 32 network devices (a veth per pod, docker0); the pod plumbing
        # is not read (collectors.virtual_nics): the host's own ports and the IB ports are
        assert text.count("node_network_up{") >= 30 and text.count("\n") > 3000
        assert set(nics) == {"lo", "eth0", "eth1", "eth2", "bond0", "eno1", "eno2", *IB_PORTS}
        assert parse_wanted_fast(text, EXPORTER_WANTED) is not None
        # skimmed (collectors.sources.scrape reads most rounds so): the same
        assert parse_wanted_fast(text, EXPORTER_WANTED, skim=True) == parse_wanted_fast(text, EXPORTER_WANTED)


@given(st.floats(min_value=0, max_value=1e12), st.floats(min_value=0, max_value=1e6),
       st.sampled_from([1, 10, 1_000_000]))
def test_split_over_engines_sums_exactly_and_never_goes_down(total: float, more: float, scale: int) -> None:
    now, later = split(total, scale), split(total + more, scale)
    assert sum(now) == round(total * scale)
    assert all(b >= a for a, b in zip(now, later, strict=True))
