"""A figure is written once: every field a sample part and its view share by name is
carried from one to the other (monitor/evaluation/figures.py), so a new GPU or port figure
is a field on the sample and on the view, nothing more."""

from __future__ import annotations

from infertop.collectors.sample import GpuSample, NicSample, NodeSample
from infertop.monitor.evaluation.figures import GPU_AS_READ, NIC_AS_READ, gpu_views, nic_views

GPU = GpuSample(
    index=3, kind="gpu", name="NVIDIA H200", util_pct=91.0, mem_used_bytes=7, mem_total_bytes=9,
    power_w=650.0, temp_c=71.0, sm_clock_mhz=1980.0, clock_event_reasons=0x4, xid_last=79,
    ecc_uncorrected_total=2, healthy=True, error="e", nvlink_links_total=18, nvlink_links_up=17,
)
NIC = NicSample(name="bond0", kind="bond", state="up", speed_gbps=200.0, link_downed_total=1.0,
                members=["eth0", "eth1"], members_up=1, accelerator_index=2)


def test_every_field_a_gpu_sample_and_its_view_share_is_carried() -> None:
    (view,) = gpu_views([NodeSample(node="n", source="t", taken_at=1.0, gpus=[GPU])])
    assert {f: getattr(view, f) for f in GPU_AS_READ} == {f: getattr(GPU, f) for f in GPU_AS_READ}
    assert {"util_pct", "power_w", "clock_event_reasons", "nvlink_links_up"} <= set(GPU_AS_READ)


def test_every_field_a_port_sample_and_its_view_share_is_carried() -> None:
    (view,) = nic_views([NodeSample(node="n", source="t", taken_at=1.0, nics=[NIC])], None)
    assert {f: getattr(view, f) for f in NIC_AS_READ} == {f: getattr(NIC, f) for f in NIC_AS_READ}
    assert {"state", "speed_gbps", "members_up"} <= set(NIC_AS_READ)
