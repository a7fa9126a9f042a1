"""Read a layout file: TOML → range expansion → pydantic validation.

Every failure becomes one `LayoutError` whose message names the file, the field (and the
line where it can be found) and the problem, so the CLI can print one line and exit 2.
"""

from __future__ import annotations

import difflib
import os
import re
import stat
import tomllib
from collections import Counter
from importlib import resources
from pathlib import Path
from typing import Any, get_args

from pydantic import BaseModel, ValidationError

from infertop.layouts.hostrange import MAX_HOSTS, HostRangeError, count_hosts, expand_hosts
from infertop.layouts.model import Layout

# A layout is a page of settings: these bounds are far above any real one and far below
# what would take the machine's memory or minutes to build (issue 19).
LAYOUT_MAX_BYTES = 4 * 1024 * 1024
LAYOUT_MAX_DEPTH = 24  # tables and arrays within each other; real layouts use 5
# values (and string characters) all host ranges may build between them: 100,000 nodes
# of a few dozen settings each fit; 100,000 copies of a node with 5,000 URLs do not
MAX_EXPANDED_VALUES = 5_000_000
MAX_EXPANDED_CHARS = 64 * 1024 * 1024
_TOO_BIG = f"larger than {LAYOUT_MAX_BYTES // (1024 * 1024)} MiB: not a layout"


class LayoutError(ValueError):
    """A layout that cannot be used. `str()` is the one-line message for the user; a
    layout with several problems carries them all in `problems` (the first is `self`),
    so that one run shows every error, one line each."""

    def __init__(self, path: str, field: str | None, problem: str, line: int | None = None):
        self.path, self.field, self.problem, self.line = path, field, problem, line
        where = path if line is None else f"{path}:{line}"
        what = f" {field}:" if field else ""
        super().__init__(f"{where}:{what} {problem}")
        self.problems: list[LayoutError] = [self]

    def lines(self) -> list[str]:
        """Every problem, one `file:line: field: problem` line each."""
        return [str(p) for p in self.problems]


# every setting name a layout may use, for "did you mean …?" on an unknown one
def _known_field_names(model: type[BaseModel], seen: set[type[BaseModel]] | None = None) -> set[str]:
    seen = seen if seen is not None else set()
    if model in seen:
        return set()
    seen.add(model)
    names: set[str] = set()
    for name, info in model.model_fields.items():
        names.add(info.alias or name)
        for inner in _models_in(info.annotation):
            names |= _known_field_names(inner, seen)
    return names


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in get_args(annotation) for m in _models_in(arg)]


_KNOWN_FIELDS = sorted(_known_field_names(Layout) - {"source_path"})


def _did_you_mean(key: object) -> str:
    close = difflib.get_close_matches(str(key), _KNOWN_FIELDS, n=1, cutoff=0.7)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _loc_to_field(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def _find_line(text: str, loc: tuple[Any, ...], node_origin: list[int]) -> int | None:
    """Best-effort line of a field: walks tables, `[[nodes]]` blocks, then the key."""
    lines = text.splitlines()
    start = 0
    parts = list(loc)
    if parts and parts[0] == "nodes" and len(parts) > 1 and isinstance(parts[1], int):
        index = parts[1]
        block = node_origin[index] if index < len(node_origin) else index
        seen = -1
        for i, line in enumerate(lines):
            if line.strip().startswith("[[nodes]]"):
                seen += 1
                if seen == block:
                    start = i
                    break
        parts = parts[2:]
        if not parts:
            return start + 1
    elif parts and isinstance(parts[0], str):
        for i, line in enumerate(lines):
            if re.match(rf"\s*\[{re.escape(parts[0])}\]", line):
                start = i
                parts = parts[1:]
                break
    keys = [p for p in parts if isinstance(p, str)]
    if not keys:
        return start + 1 if start else None
    for i in range(start, len(lines)):
        if i > start and lines[i].lstrip().startswith("[") and start:
            break
        if re.match(rf"\s*{re.escape(keys[0])}\s*=", lines[i]) or re.search(
            rf"[{{,]\s*{re.escape(keys[-1])}\s*=", lines[i]
        ):
            return i + 1
    return None


def _substitute(value: Any, host: str) -> Any:
    """A copy of `value` with ``{host}`` replaced in every string (tables and arrays new)."""
    if isinstance(value, str):
        return value.replace("{host}", host)
    if isinstance(value, list):
        return [_substitute(v, host) for v in value]
    if isinstance(value, dict):
        return {k: _substitute(v, host) for k, v in value.items()}
    return value


def _depth(value: Any) -> int:
    """How deeply tables and arrays nest in `value` (walked without recursion)."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        deepest = max(deepest, depth)
        if depth > LAYOUT_MAX_DEPTH:
            break
        stack.extend((child, depth + 1) for child in children)
    return deepest


def _weight(value: Any) -> tuple[int, int]:
    """(values, string characters) in `value`: what one copy per host costs."""
    values = chars = 0
    stack = [value]
    while stack:
        item = stack.pop()
        values += 1
        if isinstance(item, str):
            chars += len(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
            chars += sum(len(k) for k in item)
        elif isinstance(item, list):
            stack.extend(item)
    return values, chars


def _is_range(node: Any) -> bool:
    return isinstance(node, dict) and isinstance(node.get("hosts"), str) and "name" not in node


def _block_line(text: str, block: int, key: str | None = None) -> int | None:
    """The line of the `block`-th [[nodes]] table (or of its `key`), before expansion."""
    loc: tuple[Any, ...] = ("nodes", block) if key is None else ("nodes", block, key)
    return _find_line(text, loc, list(range(block + 1)))


def _check_sizes(path: str, text: str, nodes: list[Any]) -> None:
    """Count what the ranges will build before building any of it."""
    total_nodes = values = chars = 0
    for i, node in enumerate(nodes):
        if not _is_range(node):
            total_nodes += 1
            continue
        try:
            hosts = count_hosts(node["hosts"])
        except HostRangeError as exc:
            raise LayoutError(path, f"nodes[{i}].hosts", str(exc), _block_line(text, i, "hosts")) from None
        if hosts > MAX_HOSTS:
            problem = f"range expands to more than {MAX_HOSTS} hosts"
            raise LayoutError(path, f"nodes[{i}].hosts", problem, _block_line(text, i, "hosts"))
        total_nodes += hosts
        node_values, node_chars = _weight(node)
        values += hosts * node_values
        chars += hosts * node_chars
        if values > MAX_EXPANDED_VALUES or chars > MAX_EXPANDED_CHARS:
            raise LayoutError(
                path, f"nodes[{i}]",
                f"too large once expanded: {hosts} hosts x {node_values} values ({node_chars} characters) "
                f"each; all ranges together may build {MAX_EXPANDED_VALUES} values, "
                f"{MAX_EXPANDED_CHARS // (1024 * 1024)} Mi characters",
                _block_line(text, i),
            )
    if total_nodes > MAX_HOSTS:
        raise LayoutError(path, "nodes", f"{total_nodes} nodes: more than {MAX_HOSTS} in one layout")


def _expand_nodes(path: str, text: str, raw: dict[str, Any]) -> list[int]:
    """Expand `hosts` ranges in place; return, per expanded node, its original block index."""
    nodes = raw.get("nodes")
    if nodes is None:
        return []
    if not isinstance(nodes, list):
        raise LayoutError(path, "nodes", "must be an array of tables ([[nodes]])")
    _check_sizes(path, text, nodes)
    expanded: list[Any] = []
    origin: list[int] = []
    for i, node in enumerate(nodes):
        if _is_range(node):
            try:
                names = expand_hosts(node["hosts"])
            except HostRangeError as exc:
                raise LayoutError(path, f"nodes[{i}].hosts", str(exc)) from None
            for name in names:
                clone = _substitute(node, name)  # new containers; TOML scalars are immutable
                del clone["hosts"]
                clone["name"] = name
                clone.setdefault("group", node["hosts"])  # a range is a group of its own
                expanded.append(clone)
                origin.append(i)
        else:
            expanded.append(node)
            origin.append(i)
    raw["nodes"] = expanded
    return origin


def _nested_too_deeply(path: str) -> LayoutError:
    return LayoutError(path, None, f"tables or arrays nested more than {LAYOUT_MAX_DEPTH} deep")


def parse_layout(text: str, path: str = "<layout>") -> Layout:
    if len(text) > LAYOUT_MAX_BYTES:
        raise LayoutError(path, None, f"{len(text)} characters: {_TOO_BIG}")
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        # Python 3.11's TOMLDecodeError carries the position only in its message
        found = re.search(r"\(at line (\d+)", str(exc))
        line = int(found.group(1)) if found else None
        msg = re.sub(r"\s*\(at (line \d+, column \d+|end of document)\)", "", str(exc))
        raise LayoutError(path, None, f"TOML syntax error: {msg}", line) from None
    except RecursionError:  # tomllib reads nested arrays and inline tables recursively
        raise _nested_too_deeply(path) from None
    if _depth(raw) > LAYOUT_MAX_DEPTH:  # copying and validating would recurse as deep
        raise _nested_too_deeply(path)
    origin = _expand_nodes(path, text, raw)
    names: dict[str, int] = {}
    for i, node in enumerate(raw.get("nodes", [])):
        name = node.get("name") if isinstance(node, dict) else None
        if isinstance(name, str):
            if name in names:
                line = _find_line(text, ("nodes", i, "name"), origin)
                raise LayoutError(
                    path, f"nodes[{i}].name", f"duplicate node name {name!r}", line
                )
            names[name] = i
    raw["source_path"] = path
    try:
        layout = Layout.model_validate(raw)
    except ValidationError as exc:
        raise _all_problems(path, text, origin, exc) from None
    if not layout.nodes and not (layout.prometheus is not None and layout.prometheus.discover):
        # an empty table that exits 0 hides a mistake (a misspelt [[nodes]], a wrong file)
        raise LayoutError(
            path, "nodes", "no [[nodes]]: the layout watches nothing "
            "(list nodes, or set [prometheus] discover = true)", None,
        )
    _check_gpus_priced(path, text, layout, origin)
    return layout


def _all_problems(path: str, text: str, origin: list[int], exc: ValidationError) -> LayoutError:
    """Every validation error at once, in file order, each one line. A mistake in a
    `hosts` range block is one mistake, however many nodes the range makes: it is told
    once, for the range (`nodes[32..127].rol`), not once per node."""
    found: list[LayoutError] = []
    seen: set[str] = set()
    # a mistake in a range block (block, the field within a node, error type) → its
    # first problem and the nodes of the range it was found in
    in_ranges: dict[tuple[int, tuple[Any, ...], str], tuple[LayoutError, list[int]]] = {}
    nodes_of_block = Counter(origin)  # a range block makes more than one
    for err in exc.errors():
        loc = tuple(err["loc"])
        key, index = None, loc[1] if len(loc) > 1 else None
        if loc[:1] == ("nodes",) and isinstance(index, int) and index < len(origin):
            if nodes_of_block[origin[index]] > 1:
                key = (origin[index], loc[2:], str(err["type"]))
                if key in in_ranges:
                    in_ranges[key][1].append(index)
                    continue
        msg = str(err["msg"]).removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown field" + (_did_you_mean(loc[-1]) if loc else "")
        elif err["type"] == "literal_error":
            got = err.get("input")
            msg = f"{msg} (got {got!r})"
        problem = LayoutError(path, _loc_to_field(loc) or None, msg, _find_line(text, loc, origin))
        if key is not None and isinstance(index, int):
            in_ranges[key] = (problem, [index])
        if str(problem) not in seen:
            seen.add(str(problem))
            found.append(problem)
    for (block, within, _), (first, members) in in_ranges.items():
        if len(members) > 1 and first in found:
            tail = _loc_to_field(within)
            field = f"nodes[{members[0]}..{members[-1]}]" + (tail if tail.startswith("[") else f".{tail}")
            whole = nodes_of_block[block]
            many = f"all {whole}" if len(members) == whole else f"{len(members)} of the {whole}"
            found[found.index(first)] = LayoutError(
                path, field, f"{first.problem} ({many} nodes of this hosts range)", first.line
            )
    return _one_error(found)


def _one_error(found: list[LayoutError]) -> LayoutError:
    """The problems in file order, as one LayoutError carrying them all."""
    found.sort(key=lambda p: p.line if p.line is not None else 1 << 30)
    first = found[0]
    first.problems = found
    return first


def _check_gpus_priced(path: str, text: str, layout: Layout, origin: list[int]) -> None:
    """A rented node priced per GPU must say how many GPUs are reserved: the bill runs for
    every reserved GPU, whether or not the node ever answers (priced by the GPUs it shows,
    a node that never answers would be billed $0). Every such node is reported at once."""
    pricing = layout.pricing
    if pricing.mode != "rented":
        return
    found = []
    for i, node in enumerate(layout.nodes):
        if node.gpus is not None:
            continue
        node_rate = node.node_hour_usd if node.node_hour_usd is not None else pricing.node_hour_usd
        per_gpu = node.gpu_hour_usd is not None or (node_rate is None and pricing.gpu_hour_usd is not None)
        if per_gpu:
            line = _find_line(text, ("nodes", i), origin)
            problem = (
                f"required for node {node.name!r}: it is priced per GPU (gpu_hour_usd), and the "
                "reserved GPUs are billed whether or not the node answers"
            )
            found.append(LayoutError(path, f"nodes[{i}].gpus", problem, line))
    if found:
        raise _one_error(found)


_FILE_KINDS = {
    stat.S_IFIFO: "a FIFO", stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
}


def _check_layout_file(path: str, st: os.stat_result) -> None:
    if stat.S_ISDIR(st.st_mode):
        raise LayoutError(path, None, "is a directory, not a layout file")
    if not stat.S_ISREG(st.st_mode):
        kind = _FILE_KINDS.get(stat.S_IFMT(st.st_mode), "a special file")
        raise LayoutError(path, None, f"is {kind}, not a regular file: not read")
    if st.st_size > LAYOUT_MAX_BYTES:
        raise LayoutError(path, None, _TOO_BIG)


def _read_layout_bytes(path: str) -> bytes:
    """The file's bytes, if it is a regular file of at most LAYOUT_MAX_BYTES.

    Opened without blocking (a FIFO with no writer would wait forever), checked on the
    open descriptor (no swap between check and read), and read to the bound only.
    """
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise LayoutError(path, None, "no such file") from None
    except PermissionError:
        raise LayoutError(path, None, "permission denied") from None
    except OSError as exc:
        raise LayoutError(path, None, f"cannot open: {exc.strerror or type(exc).__name__}") from None
    try:
        _check_layout_file(path, os.fstat(fd))
    except LayoutError:
        os.close(fd)
        raise
    with os.fdopen(fd, "rb") as f:
        try:
            data = f.read(LAYOUT_MAX_BYTES + 1)  # it may grow, or be a /proc file of size 0
        except OSError as exc:
            raise LayoutError(path, None, f"cannot read: {exc.strerror or type(exc).__name__}") from None
    if len(data) > LAYOUT_MAX_BYTES:
        raise LayoutError(path, None, _TOO_BIG)
    return data


def load_layout(path: str | Path) -> Layout:
    try:
        text = _read_layout_bytes(str(path)).decode("utf-8")
    except UnicodeDecodeError:
        raise LayoutError(str(path), None, "not UTF-8 text") from None
    return parse_layout(text, str(path))


def example_path(name: str) -> Path:
    """Path of a bundled example layout (`local`, `gb300-trial`, `deepseek-64p64d`)."""
    ref = resources.files("infertop.layouts") / "examples" / f"{name}.toml"
    return Path(str(ref))


def local_layout() -> Layout:
    return load_layout(example_path("local"))
