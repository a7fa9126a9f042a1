"""The fast path of `parse_exposition(text, wanted=…)`: the same result, a fraction of the work.

A real page is mostly lines no profile reads (a vLLM node with 8 data-parallel engines
serves ~3,000 lines, ~2,800 of them histogram buckets; node_exporter thousands of CPU,
disk and interface series). The exact path looks at every one of those lines in Python
and then hands the wanted ones to `prometheus_client`'s parser, which reads labels a
character at a time. Here one compiled regular expression walks the page once, in C:

- a line that starts with a wanted name (a prefix test against the wanted set, built as
  one trie-shaped alternation) is handed to Python, which reads it with a strict grammar
  (plain `name{label="value",…} value [timestamp]`: no escapes, no odd spacing) and one
  float conversion;
- the lines of that same name right after it (a histogram's buckets, 8 engines' copies
  of a gauge) are read together, as a run: one `findall` in C gives each one's label
  text and value, and Python only converts them (see `_run`). A line a run cannot take
  (a timestamp, anything odd) ends it and goes to the scanner as before;
- `# HELP` / `# TYPE` lines are handed to Python too: which family a sample falls in
  decides whether a counter is renamed `<name>_total` and aliased, as the exact path does;
- every other line must be *plainly* fine (a sample line of the usual shape, a comment, a
  blank line) and is skipped without a Python step; after a TYPE line, the family's own
  lines (its name and a suffix, a histogram's buckets) are recognised by that name as a
  literal, which is cheaper than testing the name's grammar (and for a family that can
  hold no wanted name, without testing each line's name against the wanted ones).

Anything else (an escape in a wanted label, a tab, a carriage return, a timestamp with 20
digits, a line the exact path would call garbage, an unusual comment) makes the fast
path give up and return None, and the caller runs the exact path on the whole page. So
the fast path never decides anything the exact path would decide differently; it only
answers early when the page is ordinary. `tests/collectors/test_exposition_fast.py`
checks that against the exact path on the bundled pages and on generated ones.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from collections.abc import Set as AbstractSet
from functools import lru_cache
from itertools import chain
from typing import NoReturn

Series = list[tuple[dict[str, str], float]]
# samples, aliases, duplicates: the three tables of an `Exposition`
Tables = tuple[dict[str, Series], dict[str, Series], dict[str, int]]

_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
# a subset of what float() reads, so a skipped line passes the exact path's value check
# (possessive: a number never needs to give characters back; the common form first)
_VALUE = (
    r"[0-9]++(?:\.[0-9]*+)?+(?:[eE][-+]?+[0-9]++)?+"
    r"|[-+]?+(?:[0-9]++(?:\.[0-9]*+)?+|\.[0-9]++)(?:[eE][-+]?+[0-9]++)?+"
    r"|[-+]?+(?:Inf|inf|NaN|nan)"
)
_TIMESTAMP = r"[-+]?[0-9]+"
# the TYPE names prometheus_client accepts ("untyped" is read as "unknown")
_TYPES = ("counter", "gauge", "histogram", "summary", "untyped", "unknown", "info", "stateset",
          "gaugehistogram")
# the whitespace prometheus_client splits comment lines on (string.whitespace)
_WS = r" \t\r\x0b\x0c"

# A wanted sample line after its name, in the strict grammar: label values without escapes,
# no spaces around `=` or `,`, label names neither repeated (checked in Python) nor reserved (`__…`).
_LABEL_NAME = r"(?:[a-zA-Z]|_(?!_))[a-zA-Z0-9_]*"
_STRICT_LABELS = rf'(?:{_LABEL_NAME}="[^"\\\n]*"(?:,{_LABEL_NAME}="[^"\\\n]*")*,?)?'
# (the label text is taken with its braces, as a run reads it: see `_run`)
_STRICT_REST = rf"(?P<l>\{{{_STRICT_LABELS}\}})? (?P<v>{_VALUE})(?: (?P<s>{_TIMESTAMP}))?(?=\n|\Z)"
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="([^"\\\n]*)"')
# float(int(s)) overflows past ~308 digits where float(s) gives inf: leave those to the
# exact path; a timestamp's int / 1000 likewise
_MAX_INT_DIGITS = 300
_MAX_TIMESTAMP_CHARS = 19


class ReadOnlyLabels(dict[str, str]):
    """A sample's labels as the fast path hands them out: one dict for each label text,
    shared by every sample and every page with that text, so it cannot be changed
    (`dict(labels)` is a copy that can). A copy for each sample was a sixth of reading
    a vLLM page with its latency buckets (~1,000 samples), and as many more objects for
    the collector to look at."""

    def _read_only(self, *_: object, **__: object) -> NoReturn:
        raise TypeError("a sample's labels are shared and read-only: change a copy (dict(labels))")

    __setitem__ = __delitem__ = __ior__ = _read_only  # type: ignore[assignment]
    pop = popitem = clear = update = setdefault = _read_only  # type: ignore[assignment]

    def __reduce__(self) -> tuple[type[dict[str, str]], tuple[dict[str, str]]]:
        return dict, (dict(self),)  # a pickled or deep-copied one is a plain dict


# label text (with its braces) → (its labels, their set), kept across pages: an endpoint's
# wanted series have the same labels every scrape (~100 label texts a node); cleared when
# full. The labels are shared by every sample with that text (`ReadOnlyLabels`); only
# strict label texts are kept.
_LABEL_SETS: dict[str | None, tuple[ReadOnlyLabels, frozenset[tuple[str, str]]]] = {}
_MAX_LABEL_SETS = 50_000


def _trie_pattern(names: AbstractSet[str]) -> str:
    """One alternation for a set of names, with common prefixes factored out, so a
    line that matches none fails after a few characters instead of one try per name."""
    if not names:
        return "(?!)"
    tree: dict[str, dict] = {}  # type: ignore[type-arg]
    for name in names:
        node = tree
        for char in name:
            node = node.setdefault(char, {})
        node[""] = {}  # end of a name

    def emit(node: dict) -> str:  # type: ignore[type-arg]
        branches = [re.escape(char) + emit(child) if char else "" for char, child in sorted(node.items())]
        if len(branches) == 1:
            return branches[0]
        optional = "" in branches
        rest = [b for b in branches if b]
        body = rest[0] if len(rest) == 1 else "(?:" + "|".join(rest) + ")"
        return f"(?:{body})?" if optional else body

    return emit(tree)


# the suffixes a family's samples may have after the family's name (as in `_scanner`)
_RUN_SUFFIXES = ("_bucket", "_count", "_sum", "_total", "")


@lru_cache(maxsize=64)
def _scanner(wanted: frozenset[str], skim: bool = False) -> re.Pattern[str]:
    """Matched at a line start of "\\n" + page: first a run of lines Python need not see
    (plain samples of unwanted names, plain comments, blank lines), consumed without a
    Python step; then the line that ended the run, which Python must see: a wanted
    sample (groups w, l, v, s), one that is wanted but not strict (x), a HELP and TYPE
    pair (hn, hk; hp set when the family holds no wanted name), a TYPE (t, k; tp
    likewise) or HELP (h) line, the end of the page (end), or (bad) a line that is not
    plainly fine.

    `skim`: searched for, not matched: only the lines Python must see, the others passed
    over unread by `search` (a scan for the next line start, in C) instead of checked one
    by one; (bad) is then a HELP or TYPE line of an odd shape (a line that starts with a
    space matches with no group set, to the same effect), and (end) never matches (no
    match is the end of the page)."""
    trie = _trie_pattern(wanted)
    eol = r"(?=\n|\Z)"
    kinds = "|".join(_TYPES)

    # the families that may hold a wanted sample: each wanted name less any of the
    # suffixes a family's own lines may have after its name
    holding = _trie_pattern({n[: len(n) - len(s)] for n in wanted for s in _RUN_SUFFIXES if n.endswith(s)})

    def run(group: str, plain: str) -> str:
        """After a TYPE line: the family's own unwanted lines (its name, a suffix its type
        may have), the name compared as a literal (a backreference) instead of by grammar.
        For a family none of whose names is wanted (group `plain` set at its TYPE line),
        no line's name needs the test against the wanted names."""
        if skim:
            return ""  # skimmed: the family's lines are passed over by `search`
        line = (rf"(?P={group})(?:_bucket|_count|_sum|_total|)(?:\{{[^\n]*\}})? "
                rf"(?:{_VALUE})(?: {_TIMESTAMP})?{eol}")
        return rf"(?({plain})(?:\n{line})*+|(?:\n(?!{trie}[{{ ]){line})*+)"

    def unwanted(plain: str) -> str:
        """Set `plain` when the family name that follows is none that may hold a wanted sample
        (skimmed, `run` reads no lines, so the test is not made: the group stays unset)."""
        if skim:
            return rf"(?P<{plain}>(?!))?"
        return rf"(?:(?!(?:{holding}) )(?P<{plain}>))?"

    skip = (
        rf"(?:\n(?:(?!{trie}[{{ ]){_NAME}+(?:\{{[^\n]*\}})? (?:{_VALUE})(?: {_TIMESTAMP})?{eol}"
        rf"|#{eol}|# (?!(?:HELP|TYPE)(?:[{_WS}\n]|\Z))[^{_WS}\n][^\n]*+|{eol}))*+"
    )
    # (a tab after the name, as the exact path allows, makes the line not strict)
    wanted_line = rf"(?P<w>{trie})(?=[{{ \t])(?:{_STRICT_REST}|(?P<x>))"
    # a HELP line and the TYPE line of the same name after it, as prometheus_client
    # writes them, read as one: what the HELP line does, the TYPE line then redoes
    pair = (rf"HELP (?P<hn>{_NAME})(?: [^\n]*+)?\n# TYPE {unwanted('hp')}(?P=hn) (?P<hk>{kinds}){eol}"
            rf"{run('hn', 'hp')}")
    type_line = rf"TYPE {unwanted('tp')}(?P<t>{_NAME}) (?P<k>{kinds}){eol}{run('t', 'tp')}"
    help_line = rf"HELP (?P<h>{_NAME})(?=[ \n]|\Z)[^\n]*+"
    if skim:
        # One literal "\n" first, so `search` scans for it in C; the comment lines behind
        # one "#" (each line start pays for one test, not four), (end) a group that never
        # matches. A line that starts with a space may be a wanted one (the exact path
        # strips lines, as `str.strip` does: `\s`): it matches with no group set, which
        # gives the page to the exact path like (bad).
        return re.compile(
            rf"\n(?:{wanted_line}|# (?:{pair}|{type_line}|{help_line}"
            rf"|(?:HELP|TYPE)(?:[{_WS}\n]|\Z)(?P<bad>)(?P<end>(?!))?)|[^\S\n])"
        )
    event = rf"\n(?:{wanted_line}|# {pair}|# {type_line}|# {help_line}|(?P<bad>))|(?P<end>\Z)"
    return re.compile(f"{skip}(?:{event})")


# what a page's last line must be, when `skim` passed over it (a page cut off in the
# middle of a line is garbage): a plain sample, a comment or nothing
_LAST_LINE = re.compile(rf"(?:{_NAME}(?:\{{[^\n]*\}})? (?:{_VALUE})(?: {_TIMESTAMP})?|#[^\n]*|)")


# the strict grammar of a wanted line's label text, to check one met for the first time
_STRICT_LABEL_TEXT = re.compile(_STRICT_LABELS).fullmatch


@lru_cache(maxsize=512)
def _run(name: str) -> Callable[[str, int], list[tuple[str, str]]]:
    """A wanted sample name's run reader: at the end of a line, the (label text, value
    text) of each of the following lines of that same name, up to the first line that is
    not of the plain form `name{labels} value` (or `name value`, label text ""); then a
    last ("", "") for the rest of the page, which `(?s:.*)` takes in one step (so
    `findall` stops there), unless the run ends the page.

    Such lines are exactly the ones the scanner would hand over one after the other as
    wanted, strict and without a timestamp, if their label texts are strict: the caller
    checks that (`_STRICT_LABEL_TEXT`, once per new text; the label cache holds only
    strict ones). The labels are read loosely, up to the line's last `} ` before a value
    that ends the line, as that costs a third of the strict grammar in C; for a strict
    line that is the brace that closes its labels. A timestamp, or anything else, ends
    the run and is left to the scanner. A histogram's buckets or 8 engines' copies of a
    gauge so cost one C call, not a scanner match and its 14 groups per line."""
    return re.compile(rf"\n{re.escape(name)}(\{{[^\n]*\}}|) ({_VALUE})(?=\n|\Z)|\n(?s:.*)").findall


# the sample names a family of each type holds, by suffix (prometheus_client's rule)
_FAMILY_SUFFIXES = {"summary": ("_count", "_sum", ""), "histogram": ("_count", "_sum", "_bucket")}


class _GiveUp(Exception):
    """The page is not ordinary: let the exact path read it."""


def _exact_number(text: str, value: float) -> float:
    """What the exact path makes of a value `float()` read as `value`: prometheus_client
    reads an integer literal with int() (then float() of it), anything else with
    float(). The two agree wherever the result is finite and not zero (both round the
    same decimal); "-0" and overflowing literals are where they differ."""
    if text.isascii() and text.lstrip("+-").isdigit():
        if len(text) > _MAX_INT_DIGITS:
            raise _GiveUp
        return float(int(text))
    return value


def _new_label_set(text: str | None) -> tuple[ReadOnlyLabels, frozenset[tuple[str, str]]]:
    """A label text's labels and their set, now in the label cache; `_GiveUp` if the text
    is not strict (a wanted line the scanner would not read) or names a label twice (the
    exact path says what that is)."""
    if text and _STRICT_LABEL_TEXT(text[1:-1]) is None:
        raise _GiveUp
    pairs = _LABEL.findall(text) if text else []
    labels = ReadOnlyLabels(pairs)
    if len(labels) != len(pairs):
        raise _GiveUp
    if len(_LABEL_SETS) >= _MAX_LABEL_SETS:
        _LABEL_SETS.clear()
    known = _LABEL_SETS[text] = (labels, frozenset(pairs))
    return known


def parse_wanted_fast(text: str, wanted: AbstractSet[str], skim: bool = False) -> Tables | None:
    """The tables `parse_exposition(text, wanted=wanted)` would build, or None when the
    page is not ordinary enough to be sure (the caller then runs the exact path).

    prometheus_client's family rules, replayed: a sample belongs to the family of the
    last HELP / TYPE line when its name is one the family's type allows; otherwise it is
    a family of its own (untyped) and so are the next samples until the next HELP /
    TYPE. A counter family renames samples without `_total` to `<name>_total`, and its
    samples are also indexed by the family name (the aliases). Samples are indexed as
    they come, in page order (the order the exact path yields them); a TYPE line that
    retypes a family after its samples is left to the exact path.

    `skim`: the lines of unwanted names are passed over unread (only the last line of
    the page is checked), so a page the exact path rejects for such a line may still be
    read; every wanted, HELP and TYPE line is read as without it, so whenever the exact
    path reads the page, so does this, to the same tables. The caller reads whole pages
    now and then to catch the rest (`collectors/sources/scrape.py`, `WHOLE_PAGE_EVERY`).
    """
    body = "\n" + text
    scanner = _scanner(frozenset(wanted), skim)
    match_at = scanner.search if skim else scanner.match
    label_sets = _LABEL_SETS
    samples: dict[str, Series] = {}
    aliases: dict[str, Series] = {}
    duplicates: dict[str, int] = {}
    seen: dict[str, set[frozenset[tuple[str, str]]]] = {}  # sample name → its label sets so far
    family = ""  # the current family ("" = none)
    allowed: tuple[str, ...] = ()  # the sample names it holds
    rename = False  # a counter family without `_total`: its samples get the suffix
    alias_of: str | None = None  # a counter family: the sample name indexed under alias_to
    alias_to = ""
    used = False  # the family has samples already
    pos = 0
    try:
        while True:
            match = match_at(body, pos)
            if match is None:
                # skim: no line Python must see is left; else cannot happen (the last
                # alternatives match anything)
                if skim and _LAST_LINE.fullmatch(body, body.rfind("\n") + 1) is not None:
                    return samples, aliases, duplicates
                return None
            (name, label_text, value_text, stamp, _loose, pair_name, _, pair_kind, _, type_name, kind,
             help_name, _bad, end) = match.groups()
            pos = match.end()
            if value_text is not None:
                if stamp is not None and len(stamp) > _MAX_TIMESTAMP_CHARS:
                    return None
                # the family rules depend on the name only: they hold for the whole run
                raw, aliased = name, False
                if name in allowed:
                    used = True
                    if rename:
                        name += "_total"
                    aliased = name == alias_of
                else:  # a family of its own, and no family after it
                    family, allowed, rename, alias_of, used = "", (), False, None, False
                lines: list[tuple[str | None, str]] = [(label_text, value_text)]
                # the next line has this name too: read the run of them at once (unless
                # this line has a timestamp: the next ones will too, as on npu-exporter's
                # pages, and are left to the scanner)
                if stamp is None and body.startswith(raw, pos + 1):
                    found = _run(raw)(body, pos)
                    if not found[-1][1]:
                        found.pop()  # the rest of the page
                    if found:
                        lines += found
                        # each line is "\n", the name, the label text, " ", the value
                        pos += len(found) * (len(raw) + 2) + len("".join(chain.from_iterable(found)))
                out = samples.get(name)
                also = aliases.get(alias_to) if aliased else None
                seen_here = seen.get(name)
                if seen_here is None:
                    seen_here = seen[name] = set()
                for label_text, value_text in lines:
                    try:
                        labels, label_set = label_sets[label_text]
                    except KeyError:
                        labels, label_set = _new_label_set(label_text)
                    value = float(value_text)
                    # NaN and ±Inf (x - x is NaN only for those), and a negative zero: where
                    # the exact path may read the text otherwise (see _exact_number)
                    if value - value or (not value and value_text[0] == "-"):
                        value = _exact_number(value_text, value)
                        if value - value:
                            continue  # the exact path drops non-finite values
                    if label_set in seen_here:
                        duplicates[name] = duplicates.get(name, 0) + 1
                        continue
                    seen_here.add(label_set)
                    sample = (labels, value)  # shared, read-only (ReadOnlyLabels)
                    if out is None:
                        out = samples[name] = []
                    out.append(sample)
                    if aliased:
                        if also is None:
                            also = aliases[alias_to] = []
                        also.append(sample)
            elif pair_kind is not None or kind is not None:
                new, new_kind = (pair_name, pair_kind) if pair_kind is not None else (type_name, kind)
                if new == family and used:
                    return None  # retyped after its samples
                family, used = new, False
                allowed = tuple(new + s for s in _FAMILY_SUFFIXES.get(new_kind, ("",)))
                rename, alias_of = False, None
                if new_kind == "counter":
                    if new.endswith("_total"):
                        alias_to, alias_of = new[:-6], new
                    else:
                        alias_to, alias_of, rename = new, new + "_total", True
                    if not alias_to:
                        return None  # prometheus_client rejects an empty family name
            elif help_name is not None:
                if help_name != family:
                    family, allowed, rename, alias_of, used = help_name, (help_name,), False, None, False
            elif end is not None:
                return samples, aliases, duplicates
            else:
                return None  # wanted but not strict, or a line that is not plainly fine
    except _GiveUp:
        return None
