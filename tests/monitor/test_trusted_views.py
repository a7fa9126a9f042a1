"""GPU and port views are built unvalidated, copies of a blank view (monitor/evaluation/figures.py,
TRUSTED_VIEWS): not validated again, as their fields come from samples validated where
they were made. That holds only while every field keeps its view's type: a float where
the view says int would change the JSON ("1.0" for "1"). Here, on every upstream
exporter fixture and the demo's realistic pages, each view is the same, to the JSON
text, as the validated view of the same fields."""

from __future__ import annotations

import pytest

from infertop.collectors.pages.exporters import EXPORTER_WANTED, parts_from_exporter
from infertop.collectors.pages.exposition import parse_exposition
from infertop.collectors.sample import NodeSample
from infertop.demo.realistic_hosts import dcgm_page, node_exporter_page
from infertop.demo.scenario import SimCluster
from infertop.layouts.model import NicExpectation, NodeConfig
from infertop.monitor.evaluation.figures import gpu_views, nic_views
from infertop.monitor.snapshot import GpuView, NicView
from tests.support.upstream_pages import FIXTURES, load_truth, page_files


def _samples(pages: list[tuple[float, str]]) -> list[NodeSample]:
    out = []
    for taken_at, text in pages:
        parts = parts_from_exporter(parse_exposition(text, "page", wanted=EXPORTER_WANTED))
        out.append(NodeSample(node="n", source="scrape", taken_at=taken_at,
                              gpus=parts.get("gpus"), nics=parts.get("nics")))  # type: ignore[arg-type]
    return out


def _assert_as_validated(samples: list[NodeSample], config: NodeConfig | None = None) -> int:
    checked = 0
    for end in range(1, len(samples) + 1):
        window = samples[:end]
        views: list[GpuView | NicView] = []
        if window[-1].gpus is not None:
            views += gpu_views(window)
        if window[-1].nics is not None:
            views += nic_views(window, config)
        for view in views:
            validated = type(view)(**dict(view))
            assert view.model_dump_json() == validated.model_dump_json(), type(view).__name__
            assert view == validated
            checked += 1
    return checked


@pytest.mark.parametrize("name", FIXTURES)
def test_upstream_pages_give_views_as_validated(name: str) -> None:
    truth = load_truth(name)
    scrapes = truth.get("scrapes") or [{"taken_at": 1_000.0}]
    pages = [(float(s.get("taken_at", 1_000.0 + i)), p.read_text(encoding="utf-8"))
             for i, (s, p) in enumerate(zip(scrapes, page_files(name), strict=True))]
    assert _assert_as_validated(_samples(pages)) > 0


def test_the_demos_realistic_pages_give_views_as_validated() -> None:
    cluster = SimCluster(4, started_at=900.0)
    node = next(iter(cluster.nodes.values()))
    config = NodeConfig(name=node.plan.name, role="decode", gpus=8,
                        nics=[NicExpectation(name="mlx5_0", expected_gbps=400),
                              NicExpectation(name="eth0", expected_gbps=100)])
    gpus = _samples([(1_000.0 + t, dcgm_page(node, 1_000.0 + t)) for t in range(3)])
    nics = _samples([(1_000.0 + t, node_exporter_page(node, 1_000.0 + t)) for t in range(3)])
    assert _assert_as_validated(gpus) >= 8 and _assert_as_validated(nics, config) >= 6


@pytest.mark.parametrize("view", [GpuView, NicView])
def test_no_view_field_has_a_mutable_default(view: type[GpuView] | type[NicView]) -> None:
    # the views are copies of one blank view: a mutable default would be shared by all
    for name, field in view.model_fields.items():
        if field.is_required():
            continue  # every view sets it
        assert field.default_factory is None, name
        assert isinstance(field.default, (type(None), bool, int, float, str, tuple, frozenset)), name
