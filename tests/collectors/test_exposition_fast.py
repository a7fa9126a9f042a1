"""The fast path of `parse_exposition(wanted=…)` gives exactly what the exact path gives.

The exact path (`parse_exposition_exact`: the wanted-line filter, then prometheus_client's
parser) is the reference. On every bundled page, and on generated pages full of the
things that trip parsers (escapes, reserved and repeated label names, tabs, carriage
returns, `-0`, 400-digit integers, NaN, HELP without TYPE, counters without `_total`,
samples outside their family, prose), both paths either raise `ExpositionError` or
build the same samples, aliases and duplicate counts, value for value (sign of zero
included). Ordinary pages must actually take the fast path, or the comparison would be
empty.

Skimmed (`skim=True`: the lines of unwanted names passed over unchecked), a page the
exact path reads is read to the same tables; one it rejects is either rejected too or
read as the exact path reads the lines the skim looks at (wanted samples, HELP and
TYPE lines), never otherwise.
"""

from __future__ import annotations

import copy
import pickle
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from infertop.collectors.pages.exporters import EXPORTER_WANTED
from infertop.collectors.pages.exposition import (
    Exposition,
    ExpositionError,
    parse_exposition,
    parse_exposition_exact,
)
from infertop.collectors.pages.exposition_fast import parse_wanted_fast
from infertop.collectors.pages.profiles import BUNDLED_PROFILES
from tests.support.vllm_dp_page import vllm_dp_page

FIXTURES = Path(__file__).parent.parent / "fixtures"
PAGES = {
    p.name: p.read_text(encoding="utf-8")
    for p in sorted([*FIXTURES.glob("exposition/*.txt"), *FIXTURES.glob("npu/npu_exporter_*.txt")])
}
WANTED = {name: profile.wanted for name, profile in BUNDLED_PROFILES.items()} | {
    "exporters": frozenset(EXPORTER_WANTED)
}


def canonical(index: Exposition) -> tuple[object, ...]:
    """Everything an `Exposition` holds, with values by repr (so -0.0 is not 0.0)."""

    def table(t: dict[str, list[tuple[dict[str, str], float]]]) -> dict[str, list[tuple[object, str]]]:
        return {k: [(sorted(labels.items()), repr(v)) for labels, v in series] for k, series in t.items()}

    return table(index.samples), table(index.aliases), dict(index.duplicates)


def outcome(parse: object, text: str, wanted: frozenset[str]) -> object:
    try:
        return canonical(parse(text, "http://n:1/metrics", wanted))  # type: ignore[operator]
    except ExpositionError:
        return "ExpositionError"


def skimmed(text: str, where: str, wanted: frozenset[str]) -> Exposition:
    return parse_exposition(text, where, wanted, skim=True)


def lines_a_skim_reads(text: str, wanted: frozenset[str]) -> str:
    """The page less the lines a skim passes over unread: only HELP and TYPE lines, the
    lines that start with a wanted name (then a brace, a space or a tab) and those that
    start with a space (a skim gives such a page to the exact path) are left."""
    names = "|".join(re.escape(n) for n in sorted(wanted, key=len, reverse=True))
    read = re.compile(rf"# (?:HELP|TYPE)(?:[ \t\r\x0b\x0c]|$)|(?:{names})[{{ \t]|\s")
    return "\n".join(line for line in text.split("\n") if read.match(line))


def assert_same(text: str, wanted: frozenset[str]) -> None:
    exact = outcome(parse_exposition_exact, text, wanted)
    assert outcome(parse_exposition, text, wanted) == exact
    skim = outcome(skimmed, text, wanted)
    if exact != "ExpositionError":
        assert skim == exact, "a page the exact path reads was skimmed otherwise"
    elif skim != "ExpositionError":
        assert skim == outcome(parse_exposition_exact, lines_a_skim_reads(text, wanted), wanted)


@pytest.mark.parametrize("page", sorted(PAGES))
@pytest.mark.parametrize("wanted", sorted(WANTED))
def test_bundled_pages_read_the_same(page: str, wanted: str) -> None:
    assert_same(PAGES[page], WANTED[wanted])


@pytest.mark.parametrize(
    ("page", "wanted"),
    [("vllm_v1.txt", "vllm"), ("vllm_old.txt", "vllm"), ("sglang.txt", "sglang"), ("dcgm.txt", "exporters"),
     ("dcgm_new.txt", "exporters"), ("node_exporter.txt", "exporters"),
     ("npu_exporter_current.txt", "exporters"), ("npu_exporter_old.txt", "exporters")],
)
def test_ordinary_pages_take_the_fast_path(page: str, wanted: str) -> None:
    tables = parse_wanted_fast(PAGES[page], WANTED[wanted])
    assert tables is not None and tables[0], "an ordinary page fell back to the exact path"


def test_a_real_size_vllm_page_reads_the_same_on_the_fast_path() -> None:
    text, truth = vllm_dp_page(8)
    wanted = WANTED["vllm"]
    assert parse_wanted_fast(text, wanted) is not None
    assert_same(text, wanted)
    index = parse_exposition(text, wanted=wanted)
    assert sum(v for _, v in index.series("vllm:generation_tokens_total")) == truth.total("generation_tokens")
    assert len(index.series("vllm:iteration_tokens_total_count")) == 8


def test_a_real_size_vllm_page_skimmed_reads_the_same_and_a_cut_one_is_garbage() -> None:
    text, _ = vllm_dp_page(8)
    wanted = WANTED["vllm"]
    assert parse_wanted_fast(text, wanted, skim=True) == parse_wanted_fast(text, wanted)
    # cut in the middle of its last line (a family no figure is read from) or of a label
    # of an unwanted line
    last = text.rstrip("\n").rsplit("\n", 1)[1]
    assert not any(last.startswith(name) for name in wanted)
    for cut in (len(text) - len(last) // 2, text.index("{", len(text) - len(last))):
        with pytest.raises(ExpositionError):
            parse_exposition(text[:cut], wanted=wanted, skim=True)


@pytest.mark.parametrize(
    "text",
    [
        # unusual, each handed back to the exact path (which may accept or reject it)
        'x_total{a="b\\"c"} 1\n',
        'x_total{a="1",a="2"} 1\n',
        'x_total{__a="1"} 1\n',
        'x_total{__name__="y"} 1\n',
        "x_total\t1\n",
        "x_total 1\r\n",
        "x_total  1\n",
        " x_total 1\n",
        "x_total 1 2 3\n",
        "x_total 1_0\n",
        "x_total 0x10\n",
        "x_total " + "9" * 400 + "\n",
        "x_total 1 " + "9" * 400 + "\n",
        "x_total -0\n",
        "x_total +5\n",
        "x_total 1. \n",
        'x_total{a="b"}1\n',
        'x_total {a="b"} 1\n',
        "# TYPE x_total counter extra\nx_total 1\n",
        "# TYPE x_total bogus\nx_total 1\n",
        "# TYPE _total counter\n",
        "# HELP\nx_total 1\n",
        "#x HELP y doc\nx_total 1\n",
        "# \tHELP x doc\nx_total 1\n",
        "# HELP  x doc\n",
        "# TYPE x counter\nx 1\nx_total 2\n",
        "# TYPE x counter\nx_total 1\n# HELP y\nx_total 2\n",
        "# HELP x_total doc\nx_total 1\n# TYPE x_total counter\nx_total 2\n",
        "# TYPE x_total counter\ny 1\nx_total 2\n",
        "# TYPE x_total counter\nx_total{a=\"1\"} NaN\nx_total{a=\"1\"} 3\n",
        "x_total 1\nthis is not metrics\n",
        "x_total 1\n<html>\n",
        "x_total 1 # {trace=\"a\"} 1\n",
        "x_total 1\n\n\n",
        "",
        "\n",
    ],
)
def test_unusual_lines_read_the_same(text: str) -> None:
    assert_same(text, frozenset({"x_total", "x", "y"}))


_NAMES = st.sampled_from(["x", "x_total", "x_count", "x_sum", "x_bucket", "x_created", "y", "y_total", "z", "_total"])
_KINDS = ["counter", "gauge", "histogram", "summary", "untyped"]
_ODD_KINDS = ["info", "bogus", "counter x", "unknown", "stateset"]
_LABEL_NAMES = ["a", "b", "le", "_", "engine"]
_ODD_LABEL_NAMES = ["__a", "__name__", "a b", "1a", "a"]
_LABEL_VALUES = ["1", "", "x y", "}", "{", ",", "=", "#", "é", "\x1b[31m", "[bold]"]
_ODD_LABEL_VALUES = ['\\"', "\\\\", "\\n", '"']
_VALUES = ["1", "0", "1.5", "1e3", "1.7e+09", "3.0", "NaN", "+Inf", "-Inf"]
_ODD_VALUES = ["-0", "+5", ".5", "5.", "inf", "1_0", "0x1", "abc", "9" * 400, "1e400", "\u0663", ""]


@st.composite
def _line(draw: st.DrawFn) -> str:
    """Mostly ordinary lines (so pages take the fast path), now and then an odd one."""

    def pick(usual: list[str], odd: list[str]) -> str:
        return draw(st.sampled_from(odd if draw(st.integers(0, 39)) == 0 else usual))

    kind = draw(st.sampled_from(["sample"] * 6 + ["help", "type", "pair", "comment", "blank", "junk"]))
    if kind in ("help", "pair"):
        name = draw(_NAMES)
        line = f"# HELP {name}" + pick(["", " doc", ' a "quoted" doc'], ["  doc", "\tdoc"])
        return line + (f"\n# TYPE {name} {pick(_KINDS, _ODD_KINDS)}" if kind == "pair" else "")
    if kind == "type":
        return f"# TYPE {draw(_NAMES)} {pick(_KINDS, _ODD_KINDS)}"
    if kind == "comment":
        return pick(["#", "# a comment", "# HELPFUL x"], ["#x HELP x", "# TYPE", "# HELP", "#\tHELP x"])
    if kind == "blank":
        return pick([""], ["  ", "\t"])
    if kind == "junk" and draw(st.integers(0, 9)) == 0:
        return draw(st.sampled_from(["this is not metrics", "<html>", "x{", "{} 1", 'x_total 1 # {a="b"} 2']))
    labels = [(pick(_LABEL_NAMES, _ODD_LABEL_NAMES), pick(_LABEL_VALUES, _ODD_LABEL_VALUES))
              for _ in range(draw(st.integers(0, 3)))]
    body = ",".join(f'{k}="{v}"' for k, v in labels) + pick([""], [","])
    line = draw(_NAMES) + (f"{{{body}}}" if bool(labels) or draw(st.booleans()) else "")
    line += pick([" "], ["  ", "\t", ""]) + pick(_VALUES, _ODD_VALUES)
    if draw(st.integers(0, 4)) == 0:
        line += " " + pick(["1700000000000", "-1"], ["9" * 30, "x", "1.5"])
    return line + pick([""], [" ", "\r"])


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(_line(), max_size=12),
    st.sets(st.sampled_from(["x", "x_total", "x_count", "x_sum", "y", "y_total", "z", "_total"]), min_size=2),
    st.booleans(),
)
def test_generated_pages_read_the_same(lines: list[str], wanted: set[str], final_newline: bool) -> None:
    assert_same("\n".join(lines) + ("\n" if final_newline else ""), frozenset(wanted))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(PAGES)), st.sampled_from(sorted(WANTED)),
       st.lists(st.tuples(st.integers(0, 30_000), st.text(min_size=1, max_size=6)), min_size=1, max_size=5))
def test_mutated_bundled_pages_read_the_same(page: str, wanted: str, edits: list[tuple[int, str]]) -> None:
    text = PAGES[page]
    for at, insert in edits:
        at %= len(text) + 1
        text = text[:at] + insert + text[at + 1 :]
    assert_same(text, WANTED[wanted])


# Runs: the lines of one wanted name in a row, which the fast path reads with one C call
# (`_run`) instead of one scanner match each. Each page below is read on the fast path
# (or, where it must, handed back) and compared with the exact path.
_RUN_WANTED = frozenset({"x", "x_total", "y", "h_bucket", "h_count", "c"})


def assert_run_same(text: str, *, fast: bool = True) -> None:
    """Same tables as the exact path; on the fast path (fast=True) or handed back to the exact one."""
    tables = parse_wanted_fast(text, _RUN_WANTED)
    assert (tables is not None) == fast, "fast path taken" if tables is not None else "handed back"
    assert_same(text, _RUN_WANTED)


@pytest.mark.parametrize(
    "text",
    [
        # a timestamp ends a run; the stamped line and the ones after it are read too,
        # and a series seen before the break is still a duplicate after it
        'x_total{a="1"} 1\nx_total{a="2"} 2 1700000000000\nx_total{a="3"} 3\nx_total{a="1"} 4\n',
        'x_total{a="1"} 1\nx_total{a="2"} 2\nx_total{a="3"} 3 -1\nx_total{a="4"} 4\nx_total{a="5"} 5\n',
        # a different name ends a run: unwanted, wanted, or the run's name with a suffix
        'x_total{a="1"} 1\nx_total{a="2"} 2\nz{a="1"} 9\nx_total{a="3"} 3\nx_total{a="2"} 7\n',
        'x_total{a="1"} 1\nx_total{a="2"} 2\ny{a="1"} 9\ny{a="2"} 8\nx_total{a="3"} 3\n',
        'x{a="1"} 1\nx{a="2"} 2\nx_total{a="1"} 3\nx_total{a="2"} 4\nx{a="3"} 5\n',
        "x 1\nx 2\nx{} 3\ny 4\n",
        # a comment or a blank line ends a run
        'x_total{a="1"} 1\nx_total{a="2"} 2\n# a comment\nx_total{a="3"} 3\n\nx_total{a="4"} 4\n',
        # a run that ends the page, with and without a final newline
        'x_total{a="1"} 1\nx_total{a="2"} 2\nx_total{a="3"} 3',
        'x_total{a="1"} 1\nx_total{a="2"} 2\nx_total{a="3"} 3\n',
        'y 1\nx_total{a="1"} 1\nx_total 2',
        # duplicates inside a run: the same labels, in the same or another order
        'x_total{a="1"} 1\nx_total{a="1"} 2\nx_total{a="2",b="3"} 3\nx_total{b="3",a="2"} 4\nx_total{a="1"} 5\n',
        # NaN, ±Inf and overflowing values are dropped (and do not count as seen), -0 is 0
        # unless written as a float, huge integers are exact
        'x_total{a="1"} NaN\nx_total{a="1"} 5\nx_total{a="2"} +Inf\nx_total{a="3"} -Inf\nx_total{a="4"} -0\n'
        'x_total{a="5"} -0.0\nx_total{a="6"} 1e400\nx_total{a="7"} 123456789012345678901234567890\n'
        f'x_total{{a="8"}} {"9" * 300}\nx_total{{a="9"}} -0e3\nx_total{{a="10"}} 0\nx_total{{a="11"}} nan\n',
        # labels that look like the end of the labels, inside a label value
        'x_total{a="} 5"} 1\nx_total{a="} 6",b="{"} 2\nx_total{a="x} 1"} 3\nx_total{a=""} 4\n',
        # a counter family without `_total`: every line of the run renamed and aliased
        "# TYPE x counter\nx{a=\"1\"} 1\nx{a=\"2\"} 2\nx{a=\"3\"} 3\n",
        "# HELP x_total doc\n# TYPE x_total counter\nx_total{a=\"1\"} 1\nx_total{a=\"2\"} 2\n",
        # a run that leaves its family: the name's later run is a family of its own
        # (not renamed), as is a run of a name the family does not hold
        '# TYPE c counter\nc{a="1"} 1\nc{a="2"} 2\nz{a="1"} 1\nz{a="2"} 2\nc{a="3"} 3\nc{a="4"} 4\n',
        '# TYPE c counter\nc{a="1"} 1\nc{a="2"} 2\ny{a="1"} 1\ny{a="2"} 2\nc{a="3"} 3\n',
        '# TYPE h histogram\nh_bucket{le="1"} 1\nh_bucket{le="+Inf"} 2\nh_count 2\nh_bucket{le="1"} 5\n'
        '# TYPE x counter\nx 1\nx{b="1"} 2\n',
        '# TYPE y gauge\nx{a="1"} 1\nx{a="2"} 2\n# TYPE x counter\nx{a="3"} 3\nx{a="4"} 4\n',
    ],
)
def test_runs_read_the_same(text: str) -> None:
    assert_run_same(text)


@pytest.mark.parametrize(
    "text",
    [
        # a line of the run's name that is not strict: the page goes to the exact path
        'x_total{a="1"} 1\nx_total{a="2",a="3"} 2\n',
        'x_total{a="1"} 1\nx_total{a="b\\"c"} 2\n',
        'x_total{a="1"} 1\nx_total{__a="2"} 2\n',
        'x_total{a="1"} 1\nx_total{ a="2"} 2\n',
        'x_total{a="1"} 1\nx_total{a="2"}  2\n',
        'x_total{a="1"} 1\nx_total{a="2"} 2 \n',
        'x_total{a="1"} 1\nx_total{a="2"} 2\r\n',
        'x_total{a="1"} 1\nx_total{a="2"} 1_0\n',
        'x_total{a="1"} 1\nx_total{a="2"} 2} 3\n',
        'x_total{a="1"} 1\nx_total{a="2"}} 2\n',
        'x_total{a="1"} 1\nx_total{a="2"} 2\nx_total{a="3"} 3 # {t="1"} 1\n',
        f'x_total{{a="1"}} 1\nx_total{{a="2"}} {"9" * 400}\n',
        'x_total{a="1"} 1\nx_total{a="2"} -' + "0" * 400 + "\n",
        # a timestamp the fast path leaves to the exact path, after a run
        'x_total{a="1"} 1\nx_total{a="2"} 2\nx_total{a="3"} 3 12345678901234567890\n',
        # retyped after its samples, the samples read as a run
        "# TYPE x_total counter\nx_total{a=\"1\"} 1\nx_total{a=\"2\"} 2\n# TYPE x_total counter\nx_total 3\n",
    ],
)
def test_runs_with_an_odd_line_go_to_the_exact_path(text: str) -> None:
    assert_run_same(text, fast=False)


def test_a_family_with_no_wanted_name_is_skipped_but_a_wanted_suffix_is_read() -> None:
    # `h` holds a wanted name only with a suffix (`h_count`), `g` none: g's lines are
    # skipped without the wanted-name test, h's are not
    text = ('# HELP g doc\n# TYPE g histogram\ng_bucket{le="1"} 1\ng_count 1\ng_sum 1\n'
            '# HELP h doc\n# TYPE h histogram\nh_bucket{le="1"} 1\nh_count 1\nh_sum 1\n'
            '# TYPE g summary\ng_count 2\n# TYPE c counter\nc 3\n')
    assert_run_same(text)
    index = parse_exposition(text, wanted=_RUN_WANTED)
    assert [v for _, v in index.series("h_count")] == [1.0]
    assert [v for _, v in index.series("c_total")] == [3.0]


@st.composite
def _run_page(draw: st.DrawFn) -> str:
    """Pages of runs: a few names, each repeated in a row, with now and then an odd line
    (about half the pages are read on the fast path)."""
    lines: list[str] = []
    for _ in range(draw(st.integers(1, 6))):
        if draw(st.integers(0, 3)) == 0:
            lines.append(draw(st.sampled_from(["# TYPE x counter", "# TYPE x_total counter", "# HELP x doc",
                                               "# TYPE c counter", "# TYPE h histogram", "# TYPE y gauge", "",
                                               "# a comment", "z 1"])))
        name = draw(st.sampled_from(["x", "x_total", "y", "c", "h_bucket", "h_count", "z"]))
        for _ in range(draw(st.integers(1, 5))):
            labels = draw(st.lists(st.tuples(st.sampled_from(["a", "b", "le"]),
                                             st.sampled_from(["1", "2", "} 3", ""])),
                                   max_size=2, unique_by=lambda pair: pair[0]))
            body = ",".join(f'{k}="{v}"' for k, v in labels)
            line = name + (f"{{{body}}}" if labels or draw(st.integers(0, 3)) == 0 else "")
            line += " " + draw(st.sampled_from(["1", "0", "-0", "2.5", "NaN", "+Inf", "1e400", "7", "-0.0", "+5"] * 10
                                               + ["1_0", "9" * 400]))
            if draw(st.integers(0, 40)) == 0:
                line += draw(st.sampled_from([" 1700000000000", " ", "\r", " 1 2", " 12345678901234567890"]))
            lines.append(line)
    return "\n".join(lines) + draw(st.sampled_from(["", "\n"]))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_run_page())
def test_generated_runs_read_the_same(text: str) -> None:
    assert_same(text, _RUN_WANTED)


def test_labels_are_shared_read_only_and_copy_to_plain_dicts() -> None:
    """A label text's labels are one dict for every sample and page with that text
    (no copy each): so no caller may change them, and a copy of them is an ordinary dict."""
    text, wanted = 'x_total{engine="0"} 1\n', frozenset({"x_total"})
    first = parse_exposition(text, wanted=wanted).series("x_total")[0][0]
    again = parse_exposition(text, wanted=wanted).series("x_total")[0][0]
    assert first is again and first == {"engine": "0"}
    changes = [
        lambda d: d.__setitem__("engine", "1"), lambda d: d.__delitem__("engine"), lambda d: d.pop("engine"),
        lambda d: d.popitem(), lambda d: d.clear(), lambda d: d.update(engine="1"),
        lambda d: d.setdefault("other", "1"), lambda d: d.__ior__({"engine": "1"}),
    ]
    for change in changes:
        with pytest.raises(TypeError, match="read-only"):
            change(first)
    assert first == {"engine": "0"}
    for plain in (dict(first), first.copy(), copy.copy(first), copy.deepcopy(first),
                  pickle.loads(pickle.dumps(first))):
        assert type(plain) is dict and plain == first
        plain["engine"] = "1"  # a copy can be changed
    assert first == {"engine": "0"}
