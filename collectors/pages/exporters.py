"""Exporter pages → the GPU, NIC and NPU parts of a sample: the readers, tried on every page.

- dcgm-exporter → `GpuSample`s (collectors/pages/dcgm.py);
- node_exporter → `NicSample`s (collectors/pages/node_exporter.py);
- Huawei npu-exporter → NPUs (collectors/pages/ascend.py).

Each reader takes an `Exposition` (samples by exact name), so a Prometheus source can build
one from query results and reuse them.
"""

from __future__ import annotations

from collections.abc import Callable, Container

from infertop.collectors.pages.ascend import ASCEND_WANTED, ascend_parts
from infertop.collectors.pages.dcgm import DCGM_WANTED, dcgm_parts
from infertop.collectors.pages.exposition import Exposition
from infertop.collectors.pages.node_exporter import NODE_EXPORTER_WANTED, node_parts

#: (page, the port names the layout expects on the node) → parts
Extractor = Callable[[Exposition, Container[str]], dict[str, object]]

#: Recognisers for exporter pages, tried in order on every `metrics` URL of a node, with
#: the port names the layout expects there (kept whatever their name). Each
#: returns the parts it found ("gpus", "nics", "notes", "unseen").
EXPORTER_EXTRACTORS: list[Extractor] = [dcgm_parts, node_parts, ascend_parts]

#: Every sample name the extractors read: exporter pages are parsed for these only
#: (a real node_exporter page has thousands of lines). Extractors added to
#: `EXPORTER_EXTRACTORS` add their names to it (a frozenset: the parser's compiled scanner
#: is cached by it, and converting a set each page costs a little each time).
EXPORTER_WANTED: frozenset[str] = frozenset(DCGM_WANTED | NODE_EXPORTER_WANTED | ASCEND_WANTED)


def parts_from_exporter(families: Exposition, keep_nics: Container[str] = ()) -> dict[str, object]:
    """Every part any known exporter contributes from one page (empty if none).
    `keep_nics`: the ports the layout expects on the node, read even when named like
    container / virtual plumbing (which is otherwise left out)."""
    parts: dict[str, object] = {}
    for extract in EXPORTER_EXTRACTORS:
        for key, value in extract(families, keep_nics).items():
            if isinstance(value, list) and isinstance(parts.get(key), list):
                parts[key] = [*parts[key], *value]  # type: ignore[misc]
            elif isinstance(value, dict) and isinstance(parts.get(key), dict):
                parts[key] = {**parts[key], **value}  # type: ignore[dict-item]
            else:
                parts[key] = value
    return parts
