"""Engine settings and health from a vLLM 0.33 page (tests/support/vllm_info_page.py)."""

from __future__ import annotations

from infertop.collectors.pages.engine_info import MAX_SETTINGS, MAX_VALUE_CHARS
from infertop.collectors.pages.profiles import engine_sample_from_text
from tests.support.sglang_page import SglangServer
from tests.support.vllm_info_page import CACHE_CONFIG, VllmInfoServer


def test_settings_are_the_cache_config_labels_less_the_engine() -> None:
    server = VllmInfoServer(engines=4)
    server.advance(5.0)
    sample = engine_sample_from_text(server.page(), "vllm")
    assert sample.settings == {f"cache.{k}": v for k, v in CACHE_CONFIG.items()}
    assert sample.healthy is True


def test_one_unhealthy_engine_makes_the_node_unhealthy_and_no_gauge_is_unknown() -> None:
    server = VllmInfoServer(engines=2)
    server.advance(5.0)
    server.healthy = False
    assert engine_sample_from_text(server.page(), "vllm").healthy is False
    server.serve_health = False
    assert engine_sample_from_text(server.page(), "vllm").healthy is None


def test_hostile_label_values_are_bounded_and_kept_as_text() -> None:
    hostile = "[bold red]x[/] \x1b]0;owned\x07" + "A" * 5000
    settings = {f"k{i}": hostile for i in range(MAX_SETTINGS + 40)}
    server = VllmInfoServer(engines=1, settings=settings)
    server.advance(1.0)
    sample = engine_sample_from_text(server.page(), "vllm")
    assert sample.settings is not None
    assert len(sample.settings) == MAX_SETTINGS
    assert all(len(v) <= MAX_VALUE_CHARS for v in sample.settings.values())
    assert not any("\x1b" in v or "\x07" in v for v in sample.settings.values())


def test_sglang_constants_are_settings_and_a_differing_node_is_drifted() -> None:
    """SGLang 0.5.23's start-up constants (`emit_constants`: page_size, context_len,
    max_total_num_tokens), one copy per DP rank, read as settings; pool drift named."""
    from infertop.monitor.evaluation.config_drift import pool_drift
    from infertop.monitor.snapshot import EngineView, NodeView

    pages = {f"d{i}": SglangServer(dp=4, seed=i) for i in range(3)}
    assert pages["d2"].constants is not None
    pages["d2"].constants["sglang:page_size"] = 32
    settings = {n: engine_sample_from_text(p.page(), "sglang").settings for n, p in pages.items()}
    assert settings["d0"] == {"sglang.context_len": "163840", "sglang.max_total_num_tokens": "1204224",
                              "sglang.page_size": "64"}
    assert settings["d2"]["sglang.page_size"] == "32"  # type: ignore[index]
    drift = pool_drift([NodeView(name=n, role="decode", status="ok", engine=EngineView(settings=s))
                        for n, s in settings.items()])
    assert [(d.setting, d.value, d.pool_value) for d in drift["d2"]] == [("sglang.page_size", "32", "64")]
    assert set(drift) == {"d2"}


def test_a_page_without_the_constants_has_no_settings() -> None:
    page = SglangServer(dp=2)
    page.constants = None
    assert engine_sample_from_text(page.page(), "sglang").settings is None
