"""What the cluster is and what it costs: the layout model and its loader (no UI here)."""

from infertop.layouts.loader import LayoutError, example_path, load_layout, local_layout, parse_layout
from infertop.layouts.model import Layout, NodeConfig

__all__ = [
    "Layout",
    "LayoutError",
    "NodeConfig",
    "example_path",
    "load_layout",
    "local_layout",
    "parse_layout",
]
