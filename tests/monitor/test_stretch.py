"""The one rule for the stretch the session's $/unit figures cover (`choose_stretch`), the
end every engine has been read to (`stretch_end`), and the counts kept across a restart."""

from __future__ import annotations

from decimal import Decimal

import pytest

from infertop.monitor.evaluation.stretch import (
    NodeStart,
    Stretch,
    StretchCounts,
    choose_stretch,
    stretch_end,
)

R = 1000.0  # the reservation start

W = NodeStart  # shorthand: NodeStart(first_at, whole, born_at)


@pytest.mark.parametrize(("now", "nodes", "expected"), [
    # before the reservation starts: nothing to cover
    (R - 1, [W(R - 50)], None),
    # no engine read yet
    (R + 5, [], None),
    # every engine's counters began within it: the whole reservation
    (R + 500, [W(R + 100, True, R + 10), W(R + 102, True, R + 20)], Stretch("reservation", R)),
    # one began before it: from the latest first reading of such an engine
    (R + 500, [W(R + 100, True, R + 10), W(R + 103)], Stretch("watched", R + 103)),
    (R + 500, [W(R + 103), W(R + 100, True, R + 10)], Stretch("watched", R + 103)),
    # a whole engine first read after that moment, its counters born before it: no guess
    # at its count then, the stretch starts at its reading
    (R + 500, [W(R + 100), W(R + 104, True, R + 10)], Stretch("watched", R + 104)),
    # ... but one born after that moment counted 0 then: the stretch stays
    (R + 500, [W(R + 100), W(R + 104, True, R + 101)], Stretch("watched", R + 100)),
    # read before the reservation started: from its start, which is the reservation's
    (R + 500, [W(R - 30), W(R - 20)], Stretch("reservation", R)),
    # an engine that joins an hour in restarts the stretch at its first reading
    (R + 4000, [W(R + 100), W(R + 3700)], Stretch("watched", R + 3700)),
])
def test_choose_stretch(now: float, nodes: list[NodeStart], expected: Stretch | None) -> None:
    assert choose_stretch(R, now, nodes) == expected


@pytest.mark.parametrize(("latest", "now", "cap", "expected"), [
    ([(R + 10, 1.0), (R + 8, 10.0)], R + 11, None, R + 8),  # the log's line holds it back
    ([(R + 10, 1.0), (R - 100, 1.0)], R + 11, None, R + 10),  # a node silent 111 s: left
    ([(R + 10, 1.0), (R - 100, 100.0)], R + 11, None, R - 100),  # ... unless its gaps are long
    ([(R + 10, 1.0)], R + 11, R + 5, R + 5),  # not past the reservation end
    ([(R - 500, 1.0)], R + 11, None, R - 500),  # all gone: the last anyone was read to
    ([], R, None, None),
])
def test_stretch_end(latest: list[tuple[float, float | None]], now: float, cap: float | None,
                     expected: float | None) -> None:
    assert stretch_end(latest, now, cap) == expected


def test_counts_go_on_after_a_restart_of_infertop() -> None:
    counts = StretchCounts(R)
    counts.first_sight("a", "scrape", R + 10, None, {"generation_tokens_total": 5e6})
    for k in range(1, 11):
        counts.reading("a", "scrape", R + 10 + k, {"generation_tokens_total": 100.0 * k})
        counts.spent(R + 10 + k, Decimal(k))
    before = counts.sums(R + 20)
    assert before is not None and before.counts["output_tokens"] == pytest.approx(1000.0)
    again = StretchCounts.from_state(counts.to_state(), R, counts.prices)
    again.reading("a", "scrape", R + 21, {"generation_tokens_total": 1100.0})
    again.spent(R + 21, Decimal(11))
    after = again.sums(R + 21)
    assert after is not None and after.counts["output_tokens"] == pytest.approx(1100.0)
    # the spend at the stretch's start, read off the spend before the restart, is kept
    assert after.start == R + 10 and float(after.spend_usd or 0) == pytest.approx(11 - 10 / 11)


@pytest.mark.parametrize("state", [
    {"nodes": [{"node": "a", "source": "s", "first_at": 1e300, "whole": False, "points": [[R, [0] * 6]]}]},
    {"nodes": [{"node": "a", "source": "s", "first_at": R, "whole": False, "points": []}]},
    {"nodes": [{"node": "a", "source": "s", "first_at": R, "whole": False, "points": [[R, [0] * 5]]}]},
    {"spend": [[R, "1e999999"]]},
    {"based_on": ["forever", R]},
])
def test_a_crafted_state_is_refused(state: object) -> None:
    from infertop.monitor.record.checks import BadValue

    with pytest.raises(BadValue):
        StretchCounts.from_state(state, R, StretchCounts(R).prices)
