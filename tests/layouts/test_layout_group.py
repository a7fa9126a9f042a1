"""A node's `group` (the fleet map groups a pool by it): a key of its own, else the `hosts`
range the node was written in."""

from __future__ import annotations

import pytest

from infertop.layouts.loader import LayoutError, parse_layout


def test_a_range_is_its_own_group_unless_it_names_one() -> None:
    layout = parse_layout(
        '[[nodes]]\nhosts = "decode-[01-03]"\nrole = "decode"\n'
        '[[nodes]]\nhosts = "prefill-[1-2]"\nrole = "prefill"\ngroup = "rack-7"\n'
        '[[nodes]]\nname = "spare"\n'
        '[[nodes]]\nname = "edge"\ngroup = "leaf-2"\n',
        "l.toml",
    )
    assert [(n.name, n.group) for n in layout.nodes] == [
        ("decode-01", "decode-[01-03]"), ("decode-02", "decode-[01-03]"), ("decode-03", "decode-[01-03]"),
        ("prefill-1", "rack-7"), ("prefill-2", "rack-7"),
        ("spare", None), ("edge", "leaf-2"),
    ]


@pytest.mark.parametrize("bad", ['""', '"rack\\u001b[31m"', "7"])
def test_a_group_is_a_plain_label(bad: str) -> None:
    with pytest.raises(LayoutError) as caught:
        parse_layout(f'[[nodes]]\nname = "a"\ngroup = {bad}\n', "l.toml")
    assert "l.toml:3: nodes[0].group: " in str(caught.value)
