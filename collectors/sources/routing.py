"""Which source reads which part of which node: the one place that decides.

A node has up to seven parts a source can read — its accelerators, its host (CPU, memory),
its NICs, its engine page, its engine log, its exporter pages and its PromQL series — and
`route_node` names exactly one reader for each part the layout gives it. Every source
builder (collectors/sources/registry.py and the `…_source_for` functions it calls) takes its share
of `route_layout`'s answer and decides nothing of its own; tests/collectors/test_routing.py
walks every kind of node through it.

- `local = true`: accelerators, host and NICs by this machine (`local`); its engine page
  and exporter pages by the scrape source; its engine log by the `log` source.
- `ssh`: accelerators, host and NICs by the SSH probe; the engine page too, from the node's
  own side, unless `via_probe = false` (then the scrape source reads it directly); the
  engine log by the probe; exporter pages by the scrape source. An Ascend node whose NPUs
  an npu-exporter in `metrics` reports has its accelerators read from that page.
- neither: the engine page and exporter pages by the scrape source (the pages carry the
  accelerators, host and NICs, when they carry them).
- none of `local`, `ssh`, `metrics`, an engine page or log, with a `[prometheus]` table:
  everything through PromQL (`prom`).

A part no source can reach — an engine log on a node that is neither `local` nor `ssh` —
is a layout error naming the field, not a part silently read by no one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

from infertop.layouts.loader import LayoutError
from infertop.layouts.model import Layout, NodeConfig

Part = Literal["accelerators", "host", "nics", "engine_page", "engine_log", "exporter_pages", "promql"]
PARTS: tuple[Part, ...] = (
    "accelerators", "host", "nics", "engine_page", "engine_log", "exporter_pages", "promql",
)
Reader = Literal["local", "ssh", "scrape", "log", "prom"]
READERS: tuple[Reader, ...] = ("local", "ssh", "scrape", "log", "prom")


@dataclass(frozen=True)
class NodeRoute:
    """One node's parts and the one reader of each (a part the node lacks is absent)."""

    index: int  # the node's place in `layout.nodes` (for a message naming its field)
    node: NodeConfig
    readers: Mapping[Part, Reader]

    @property
    def name(self) -> str:
        assert self.node.name is not None  # ranges are expanded before a layout is routed
        return self.node.name

    def reads(self, part: Part, reader: Reader) -> bool:
        return self.readers.get(part) == reader

    def parts_of(self, reader: Reader) -> tuple[Part, ...]:
        return tuple(part for part in PARTS if self.readers.get(part) == reader)


@dataclass(frozen=True)
class Routing:
    """The whole layout's answer: a route per node, and whether PromQL also finds nodes."""

    routes: tuple[NodeRoute, ...]
    discover: bool  # the Prometheus source adds nodes it finds (`[prometheus] discover`)

    def read_by(self, reader: Reader) -> list[NodeRoute]:
        """The routes with at least one part for `reader`, in layout order."""
        return [route for route in self.routes if route.parts_of(reader)]

    def read_over_network(self) -> int:
        """How many nodes the monitor reads over the network itself (the probe or a page,
        not PromQL): what a larger cluster would rather hand to the prom source."""
        return sum(1 for route in self.routes if route.parts_of("ssh") or route.parts_of("scrape"))


def _node_side(node: NodeConfig) -> Reader | None:
    """The reader on the node's own side (this machine, or the probe), if any."""
    if node.local:
        return "local"  # `local` wins over an `ssh` target: this machine is read in place
    if node.ssh is not None:
        return "ssh"
    return None


def route_node(node: NodeConfig, has_prometheus: bool) -> dict[Part, Reader]:
    """The reader of each part `node` has (see the module's docstring)."""
    readers: dict[Part, Reader] = {}
    side = _node_side(node)
    engine = node.engine
    if side is not None:
        readers["host"] = readers["nics"] = side
        npus_on_page = node.accelerator == "npu" and bool(node.metrics) and side == "ssh"
        readers["accelerators"] = "scrape" if npus_on_page else side
    if engine is not None and engine.url is not None:
        by_probe = side == "ssh" and engine.via_probe is not False
        readers["engine_page"] = "ssh" if by_probe else "scrape"
    if engine is not None and (engine.log is not None or engine.log_command is not None):
        if side == "local":
            readers["engine_log"] = "log"
        elif side == "ssh":
            readers["engine_log"] = "ssh"
        # else: nowhere to read it from (route_layout says so)
    if node.metrics:
        readers["exporter_pages"] = "scrape"
    if not readers and has_prometheus and not _has_log(node):
        readers["promql"] = "prom"
    return readers


def _has_log(node: NodeConfig) -> bool:
    return node.engine is not None and (node.engine.log is not None or node.engine.log_command is not None)


def route_layout(layout: Layout) -> Routing:
    """Every node's route. An engine log no source can reach is a `LayoutError`."""
    has_prometheus = layout.prometheus is not None
    routes = []
    for index, node in enumerate(layout.nodes):
        if node.name is None:
            continue
        readers = route_node(node, has_prometheus)
        if _has_log(node) and "engine_log" not in readers:
            field = "log" if node.engine is not None and node.engine.log is not None else "log_command"
            raise LayoutError(
                layout.source_path or "<layout>",
                f"nodes[{index}].engine.{field}",
                f"node {node.name!r}: an engine log is read on the node itself: "
                "give the node `local = true` or `ssh`",
            )
        routes.append(NodeRoute(index, node, MappingProxyType(readers)))
    discover = layout.prometheus is not None and layout.prometheus.discover
    return Routing(tuple(routes), discover)
