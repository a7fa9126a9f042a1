"""Read a layout file: TOML → range expansion → pydantic validation.

Every failure becomes one `LayoutError` whose message names the file, the field (and the
line where it can be found) and the problem, so the CLI can print one line and exit 2.
"""

from __future__ import annotations

import copy
import re
import tomllib
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from layouts.hostrange import HostRangeError, expand_hosts
from layouts.model import Layout


class LayoutError(ValueError):
    """A layout that cannot be used. `str()` is the one-line message for the user."""

    def __init__(self, path: str, field: str | None, problem: str, line: int | None = None):
        self.path, self.field, self.problem, self.line = path, field, problem, line
        where = path if line is None else f"{path}:{line}"
        what = f" {field}:" if field else ""
        super().__init__(f"{where}:{what} {problem}")


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
    if isinstance(value, str):
        return value.replace("{host}", host)
    if isinstance(value, list):
        return [_substitute(v, host) for v in value]
    if isinstance(value, dict):
        return {k: _substitute(v, host) for k, v in value.items()}
    return value


def _expand_nodes(path: str, raw: dict[str, Any]) -> list[int]:
    """Expand `hosts` ranges in place; return, per expanded node, its original block index."""
    nodes = raw.get("nodes")
    if nodes is None:
        return []
    if not isinstance(nodes, list):
        raise LayoutError(path, "nodes", "must be an array of tables ([[nodes]])")
    expanded: list[Any] = []
    origin: list[int] = []
    for i, node in enumerate(nodes):
        if isinstance(node, dict) and isinstance(node.get("hosts"), str) and "name" not in node:
            try:
                names = expand_hosts(node["hosts"])
            except HostRangeError as exc:
                raise LayoutError(path, f"nodes[{i}].hosts", str(exc)) from None
            for name in names:
                clone = _substitute(copy.deepcopy(node), name)
                del clone["hosts"]
                clone["name"] = name
                expanded.append(clone)
                origin.append(i)
        else:
            expanded.append(node)
            origin.append(i)
    raw["nodes"] = expanded
    return origin


def parse_layout(text: str, path: str = "<layout>") -> Layout:
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        # Python 3.11's TOMLDecodeError carries the position only in its message
        found = re.search(r"\(at line (\d+)", str(exc))
        line = int(found.group(1)) if found else None
        msg = re.sub(r"\s*\(at (line \d+, column \d+|end of document)\)", "", str(exc))
        raise LayoutError(path, None, f"TOML syntax error: {msg}", line) from None
    origin = _expand_nodes(path, raw)
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
        return Layout.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = tuple(err["loc"])
        msg = str(err["msg"]).removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown field"
        elif err["type"] == "literal_error":
            got = err.get("input")
            msg = f"{msg} (got {got!r})"
        line = _find_line(text, loc, origin)
        raise LayoutError(path, _loc_to_field(loc) or None, msg, line) from None


def load_layout(path: str | Path) -> Layout:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise LayoutError(str(path), None, "no such file") from None
    except IsADirectoryError:
        raise LayoutError(str(path), None, "is a directory, not a layout file") from None
    except PermissionError:
        raise LayoutError(str(path), None, "permission denied") from None
    except UnicodeDecodeError:
        raise LayoutError(str(path), None, "not UTF-8 text") from None
    return parse_layout(text, str(path))


def example_path(name: str) -> Path:
    """Path of a bundled example layout (`local`, `gb300-trial`, `deepseek-64p64d`)."""
    ref = resources.files("layouts") / "examples" / f"{name}.toml"
    return Path(str(ref))


def example_names() -> list[str]:
    folder = resources.files("layouts") / "examples"
    return sorted(p.name.removesuffix(".toml") for p in folder.iterdir() if p.name.endswith(".toml"))


def local_layout() -> Layout:
    return load_layout(example_path("local"))
