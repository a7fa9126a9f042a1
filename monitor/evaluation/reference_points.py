"""The bundled, dated reference points of the throughput / interactivity chart.

DeepSeek's published decode points for DeepSeek-V4.1-Flash at 64 requests per rank, as
quoted in the trial brief (infertop issue 17, read 2026-12-01). DeepSeek counts decode
throughput with full-acceptance accounting (every drafted token counted as if accepted):
compare them with the live full-acceptance figure, and read the accepted figure beside
it for what users actually receive. A layout replaces the table with
``[[scoreboard.reference_points]]`` (and says where its points come from in
``[scoreboard] reference_source``).
"""

from __future__ import annotations

from infertop.layouts.model import Layout, ReferencePoint

REFERENCE_SOURCE = (
    "DeepSeek V4.1-Flash decode, 64 requests/rank, full-acceptance accounting "
    "(published chart, read 2026-12-01)"
)
REFERENCE_POINTS: tuple[ReferencePoint, ...] = (
    ReferencePoint(label="EP64", output_tokens_per_s_per_gpu=15_700, output_tokens_per_s_per_user=246),
    ReferencePoint(label="EP8", output_tokens_per_s_per_gpu=12_600, output_tokens_per_s_per_user=198),
)


def reference_points(layout: Layout) -> tuple[tuple[ReferencePoint, ...], str]:
    """The layout's points and their source, else the bundled ones."""
    own = layout.scoreboard.reference_points
    if own is not None:
        return tuple(own), layout.scoreboard.reference_source or "from the layout"
    return REFERENCE_POINTS, REFERENCE_SOURCE
