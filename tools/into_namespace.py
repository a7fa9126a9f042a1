#!/usr/bin/env python3
"""Installs infertop's four rooms as `infertop.layouts`, `infertop.collectors`,
`infertop.monitor` and `infertop.tui`, while their folders stay at the top of the repository.

Why: a wheel that installs top-level packages named `monitor`, `tui`, `layouts` and
`collectors` breaks (or is broken by) any other distribution with a package of that name.

How: each room gets a relative symlink inside the package (`infertop/monitor -> ../monitor`,
…), so Python, setuptools (its package finder follows directory links), mypy and
import-linter all see one package tree, `infertop`, while the folders people open stay where
they were. Then every place that names a room module is rewritten to the `infertop.` form:

- Python (product, tests, benchmarks, scripts): import statements (`from monitor.x import y`,
  `import tui.app`, and the uses of an un-aliased `import tui.app` as `tui.app.…`); string
  literals that hold a module path (`"-m", "collectors.sources.scrape_worker"`, monkeypatch targets,
  import_module names, `resources.files("layouts")`); in comments and docstrings only what
  is code (`from monitor.x import`, `import tui`, `-m collectors.x`), prose that names a room's
  module is left as it reads;
- Markdown, YAML, Makefile, shell: dotted module paths (`python -m collectors.sources.prom_rules`,
  `monitor.fleet.Fleet.ingest`); file paths (`monitor/fleet.py`) stay, the files did not move;
- pyproject.toml: the package finder, package-data keys, mypy's packages, the import-linter
  contracts (same meaning, new names) and a ruff ban (TID251) on importing a room by its bare
  name (from the repository root both names would import: two copies of every module);
- a few lines whose meaning depends on where the rooms live (`EDITS` below).

A dotted name is rewritten only when it starts with a module that exists (`monitor.snapshot…`
but not `monitor.json`). The script is idempotent: run it again and nothing changes.

Usage (from the repository root, on a clean work tree):

    python3 tools/into_namespace.py            # rewrite; prints each file it changed
    python3 tools/into_namespace.py --check    # exit 1 if a run would change anything

It ends by sorting imports with ruff (`.venv/bin/ruff check --select I --fix`) in the files it
changed, when that ruff exists. Anything it cannot do itself is printed under "BY HAND".
Standard library only.
"""

from __future__ import annotations

import argparse
import ast
import io
import os
import re
import shutil
import subprocess
import sys
import tokenize
from collections.abc import Callable
from pathlib import Path

NAMESPACE = "infertop"
ROOMS = ("layouts", "collectors", "monitor", "tui")  # the one direction, bottom up
THIS = Path(__file__).resolve()

PY_SUFFIXES = {".py"}
TEXT_SUFFIXES = {".md", ".yml", ".yaml", ".sh", ".cfg", ".ini", ".toml"}
TEXT_NAMES = {"Makefile", "run"}  # .ci/run
# data the product reads and writes (records, fixtures, screenshots) is not rewritten: it holds
# no module paths (checked by the report below)
SKIP_DIRS = {".venv", ".venv-run", ".venv-latest", ".venv-lock", "build", "dist", "node_modules"}

ROOM_ALT = "|".join(ROOMS)
# a dotted path that starts with a room: `monitor.fleet.Fleet.ingest`; not `x.monitor.y`,
# `tests/monitor.py` or `infertop.monitor.y` (already done)
DOTTED = re.compile(rf"(?<![\w.\-/\\])({ROOM_ALT})((?:\.[A-Za-z_]\w*)+)")
# code inside prose (comments, docstrings): `from monitor.x import`, `import tui.app`, `-m collectors.x`
CODE_FROM = re.compile(rf"(?<![\w.])(from\s+)({ROOM_ALT})(?=(?:\.\w+)*\s+import\b)")
CODE_IMPORT = re.compile(rf"(^[\s>`#]*import\s+)({ROOM_ALT})(?=[.\s`,]|$)", re.M)
CODE_DASH_M = re.compile(rf"(-m\s+)({ROOM_ALT})(?=[\s`'\"]|$)")  # `-m tui`; a dotted one is DOTTED's


class Report:
    def __init__(self) -> None:
        self.changed: list[str] = []
        self.by_hand: list[str] = []
        self.notes: list[str] = []


def room_modules(root: Path) -> set[str]:
    """Every module and package of the rooms, dotted, without the namespace."""
    names: set[str] = set()
    for room in ROOMS:
        base = root / room
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = [d for d in dirnames if d != "__pycache__"]
            rel = Path(dirpath).relative_to(root).parts
            if "__init__.py" in filenames:
                names.add(".".join(rel))
            for name in filenames:
                if name.endswith(".py") and name != "__init__.py":
                    names.add(".".join((*rel, name[:-3])))
    return names


def make_links(root: Path, report: Report, dry: bool) -> None:
    for room in ROOMS:
        link = root / NAMESPACE / room
        target = f"../{room}"
        if link.is_symlink():
            if os.readlink(link) != target:
                report.by_hand.append(f"{link} links to {os.readlink(link)!r}, expected {target!r}")
            continue
        if link.exists():
            report.by_hand.append(f"{link} exists and is not a link: move it aside")
            continue
        report.changed.append(f"{link.relative_to(root)} -> {target} (symlink)")
        if not dry:
            link.symlink_to(target, target_is_directory=True)


def candidate_files(root: Path) -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=root, capture_output=True, check=True,
    ).stdout.decode().split("\0")
    links = {root / NAMESPACE / room for room in ROOMS}
    out: list[Path] = []
    for rel in sorted(set(filter(None, listed))):
        path = root / rel
        if path.resolve() == THIS or path in links or path.is_symlink() or not path.is_file():
            continue
        if SKIP_DIRS.intersection(Path(rel).parts) or any(p in links for p in path.parents):
            continue
        if path.suffix in PY_SUFFIXES | TEXT_SUFFIXES or path.name in TEXT_NAMES:
            out.append(path)
    return out


def dotted_rewriter(modules: set[str], unsure: list[str] | None = None) -> Callable[[str], str]:
    def replace(match: re.Match[str]) -> str:
        room, tail = match.group(1), match.group(2)
        first = tail.split(".")[1]
        if f"{room}.{first}" in modules:
            return f"{NAMESPACE}.{room}{tail}"
        if unsure is not None:
            unsure.append(match.group(0))
        return match.group(0)

    return lambda text: DOTTED.sub(replace, text)


def rewrite_code_in_prose(text: str, modules: set[str]) -> str:
    text = CODE_FROM.sub(lambda m: f"{m.group(1)}{NAMESPACE}.{m.group(2)}", text)
    text = CODE_IMPORT.sub(lambda m: f"{m.group(1)}{NAMESPACE}.{m.group(2)}", text)
    text = CODE_DASH_M.sub(lambda m: f"{m.group(1)}{NAMESPACE}.{m.group(2)}", text)
    # `python -m collectors.sources.prom_rules`: the module path after -m, when it is one
    dotted = dotted_rewriter(modules)
    return re.sub(rf"(-m )((?:{ROOM_ALT})(?:\.\w+)+)", lambda m: m.group(1) + dotted(m.group(2)), text)


# -- Python files ---------------------------------------------------------------------------

def _docstring_starts(tree: ast.AST) -> set[tuple[int, int]]:
    starts: set[tuple[int, int]] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                starts.add((body[0].lineno, body[0].col_offset))
    return starts


# a bare room name as a string is a module name only as these calls' first argument
_MODULE_NAME_CALLS = {"files", "import_module", "find_spec", "as_file", "import_module_from"}


def rewrite_python(path: Path, text: str, modules: set[str], report: Report) -> str:
    try:
        tree = ast.parse(text, filename=str(path))
    except SyntaxError as exc:
        report.by_hand.append(f"{path}: does not parse ({exc.msg}, line {exc.lineno}); not rewritten")
        return text
    tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    line_starts = [0]
    for line in text.splitlines(keepends=True):
        line_starts.append(line_starts[-1] + len(line))

    def offset(pos: tuple[int, int]) -> int:
        return line_starts[pos[0] - 1] + pos[1]

    edits: dict[int, tuple[int, str]] = {}  # start offset -> (end offset, replacement)
    prefix = f"{NAMESPACE}."
    import_rows: set[int] = set()
    bare_roots: set[str] = set()  # `import tui.app` (no alias) binds `tui` in this module
    unsure: list[str] = []
    docstrings = _docstring_starts(tree)
    dotted = dotted_rewriter(modules, unsure)

    significant = [t for t in tokens if t.type not in (tokenize.NL, tokenize.COMMENT)]
    for i, tok in enumerate(significant):
        if tok.type != tokenize.NAME or tok.string not in ("from", "import"):
            continue
        before = significant[i - 1] if i else None
        at_statement_start = before is None or before.type in (
            tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT) or before.string in (";", ":")
        if not at_statement_start:
            continue
        import_rows.add(tok.start[0])
        if tok.string == "from":
            nxt = significant[i + 1]
            if nxt.type == tokenize.NAME and nxt.string in ROOMS:
                edits[offset(nxt.start)] = (offset(nxt.start), prefix)
            continue
        # import a.b as c, d.e
        j, expect_module = i + 1, True
        while significant[j].type not in (tokenize.NEWLINE, tokenize.ENDMARKER):
            t = significant[j]
            if t.type == tokenize.NAME and expect_module:
                if t.string in ROOMS:
                    edits[offset(t.start)] = (offset(t.start), prefix)
                    k = j + 1
                    while significant[k].string == ".":
                        k += 2
                    if significant[k].string != "as":
                        bare_roots.add(t.string)
                expect_module = False
            elif t.string == ",":
                expect_module = True
            j += 1

    for i, tok in enumerate(significant):
        if tok.type == tokenize.NAME and tok.string in bare_roots and tok.start[0] not in import_rows:
            before = significant[i - 1] if i else None
            after = significant[i + 1]
            if (before is None or before.string != ".") and after.string == ".":
                edits[offset(tok.start)] = (offset(tok.start), prefix)
        elif tok.type == tokenize.STRING or tok.type == getattr(tokenize, "FSTRING_MIDDLE", -1):
            if tok.start in docstrings:
                new = rewrite_code_in_prose(tok.string, modules)
            else:
                new = rewrite_code_in_prose(dotted(tok.string), modules)
                bare = tok.string.strip("\"'")
                if bare in ROOMS and tok.string[0] in "\"'":
                    call = significant[i - 2] if i >= 2 else None
                    if significant[i - 1].string == "(" and call is not None and \
                            call.string in _MODULE_NAME_CALLS:
                        new = tok.string.replace(bare, f"{NAMESPACE}.{bare}")
                    else:
                        report.notes.append(f"{path}:{tok.start[0]}: the string {tok.string} (left as is)")
            if new != tok.string:
                edits[offset(tok.start)] = (offset(tok.end), new)
    for tok in tokens:
        if tok.type == tokenize.COMMENT:
            new = rewrite_code_in_prose(tok.string, modules)
            if new != tok.string:
                edits[offset(tok.start)] = (offset(tok.end), new)
    for name in sorted(set(unsure)):
        report.notes.append(f"{path}: string holds {name!r}, not a module: left as is")

    out = text
    for start in sorted(edits, reverse=True):
        end, replacement = edits[start]
        out = out[:start] + replacement + out[end:]
    return out


# -- pyproject.toml and the lines that depend on where the rooms live -----------------------

def _section_sub(text: str, section: str, pattern: str, repl: str | Callable[[re.Match[str]], str]) -> str:
    """`re.sub` limited to the lines of one `[section]` (and its `[[section.…]]` tables)."""
    lines = text.splitlines(keepends=True)
    inside = False
    for n, line in enumerate(lines):
        header = re.match(r"^\[\[?([^\]]+)\]\]?\s*$", line)
        if header:
            inside = header.group(1) == section or header.group(1).startswith(section + ".")
            continue
        if inside:
            lines[n] = re.sub(pattern, repl, line)
    return "".join(lines)


def front_door_modules(root: Path) -> list[str]:
    """infertop's own children (cli, demo, front_door, …): the top layer, above the viewers."""
    pkg = root / NAMESPACE
    names = []
    for child in sorted(pkg.iterdir()):
        hidden = child.name.startswith((".", "_")) and child.name != "__main__.py"
        if child.name in ROOMS or hidden:
            continue
        if child.is_dir() and (child / "__init__.py").exists():
            names.append(child.name)
        elif child.suffix == ".py":
            names.append(child.stem)
    return names


BANNED_API = f"""\
# the rooms are packages of infertop (infertop/<room> links to the top-level folder); imported
# by their bare names they would load a second time, as other modules (tools/into_namespace.py)
[tool.ruff.lint.flake8-tidy-imports.banned-api]
{chr(10).join(f'"{r}".msg = "import {NAMESPACE}.{r}: bare `{r}` loads it a second time"' for r in ROOMS)}

"""


def rewrite_pyproject(root: Path, text: str, report: Report) -> str:
    quoted = rf'"({ROOM_ALT})((?:\.\w+)*)"'
    # the wheel: one top-level package; the rooms are found through their links
    text = _section_sub(text, "tool.setuptools.packages.find", r'^include = \[[^\]]*\](?=\n)',
                        f'include = ["{NAMESPACE}*"]  # the rooms too: infertop/<room> links to ./<room>')
    text = _section_sub(text, "tool.setuptools.package-data", rf"^({ROOM_ALT}) = ",
                        rf'"{NAMESPACE}.\1" = ')
    # import-linter: the same rooms and direction, as infertop's subpackages; the front door
    # (every other child of infertop) stays on top, and `exhaustive` makes a new child choose
    # its layer instead of slipping out of the contract
    front = " : ".join(front_door_modules(root))
    text = _section_sub(text, "tool.importlinter", r"^root_packages = \[[^\]]*\](?=\n)",
                        f'root_packages = ["{NAMESPACE}"]')
    old_layers = re.compile(rf'^layers = \["{NAMESPACE}", "tui", "monitor", "collectors", "layouts"\]\n',
                            re.M)
    if old_layers.search(text):
        text = old_layers.sub(
            f'containers = ["{NAMESPACE}"]\n'
            "layers = [\n"
            f'    "{front}",  # the front door\n'
            '    "tui",\n    "monitor",\n    "collectors",\n    "layouts",\n]\n'
            "exhaustive = true  # a new child of infertop must be given its layer here\n",
            text,
        )
    elif "containers = [" not in text:
        report.by_hand.append("pyproject.toml: the layers contract changed; rewrite it with containers = "
                              f'["{NAMESPACE}"] and the front door ({front}) on top')
    else:
        current = re.search(r'^layers = \[\s*"([^"]*)"', text, re.M)

        def children(layer: str) -> set[str]:
            return set(layer.replace(" ", "").split(":"))

        if current and children(current.group(1)) != children(front):
            report.by_hand.append(f"pyproject.toml: the top layer {current.group(1)!r} should be {front!r}")
    # module names elsewhere in the contracts (a layer is named inside its container)
    text = _section_sub(text, "tool.importlinter", r"^(?!layers|containers|    ).*",
                        lambda m: re.sub(quoted, rf'"{NAMESPACE}.\1\2"', m.group(0)))
    # mypy: each file under one module name, through the package
    text = _section_sub(text, "tool.mypy", r"^packages = \[[^\]]*\](?=\n)",
                        f'packages = ["{NAMESPACE}"]  # the rooms through infertop/<room>: one name per file')
    # ruff's TID251 bans the bare names
    if "flake8-tidy-imports.banned-api" not in text:
        text = _section_sub(text, "tool.ruff.lint", r'^select = \[(.*)\]$',
                            lambda m: m.group(0) if "TID251" in m.group(1)
                            else f'select = [{m.group(1)}, "TID251"]')
        anchor = "[tool.ruff.lint.per-file-ignores]"
        if anchor in text:
            text = text.replace(anchor, BANNED_API + anchor, 1)
        else:
            report.by_hand.append("pyproject.toml: add the TID251 banned-api table:\n" + BANNED_API)
    return text


# (path, old, new, why): regexes applied once; when `old` is gone and `new` is absent, the
# line changed on another branch and must be redone by hand
EDITS: list[tuple[str, str, str, str]] = [
    (
        "collectors/probe/bundle.py",
        r'OUR_PACKAGES = \("collectors", "layouts"\)',
        f'OUR_PACKAGES = ("{NAMESPACE}",)',
        "a bundled helper may import no package of ours (on the node there is none)",
    ),
    (
        "collectors/process/library_warnings.py",
        r'OWN_PACKAGES = \("infertop", "collectors", "layouts", "monitor", "tui"\)',
        'OWN_PACKAGES = ("collectors", "layouts", "monitor", "tui")  # and infertop itself',
        "the rooms, beside the package folder itself",
    ),
    (
        "collectors/process/library_warnings.py",
        r"_SOURCE_ROOT = Path\(__file__\)\.resolve\(\)\.parent\.parent\n"
        r'_OWN_DIRS = tuple\(str\(_SOURCE_ROOT / name\) \+ "/" for name in OWN_PACKAGES\)\n',
        "# infertop's folder as imported (in a source tree its rooms are links to the top-level\n"
        "# folders), and each room's real folder: warnings name files by their resolved paths\n"
        "_PACKAGE_DIR = Path(os.path.abspath(__file__)).parent.parent\n"
        '_OWN_DIRS = tuple(str((_PACKAGE_DIR / name).resolve()) + "/" for name in (".", *OWN_PACKAGES))\n',
        "infertop's own files are under the package folder and the rooms' real folders",
    ),
    (
        "collectors/process/library_warnings.py",
        r"\nimport logging\nimport warnings\n",
        "\nimport logging\nimport os\nimport warnings\n",
        "os.path.abspath for the package folder",
    ),
    (
        "collectors/sources/prom_rules.py",
        r'        "# infertop\'s Prometheus rules\. Generated by '
        r'`python -m infertop\.collectors\.prom_rules`: do not edit\.",\n',
        '        "# infertop\'s Prometheus rules. Generated by "\n'
        '        "`python -m infertop.collectors.sources.prom_rules`: do not edit.",\n',
        "the header line grew past 110 characters (the YAML it writes is unchanged)",
    ),
    (
        "tests/collectors/test_probe_bundle.py",
        r'assert "from collectors" not in probe_script\(\)',
        f'assert "from {NAMESPACE}" not in probe_script()',
        "the bundle holds no import of our packages",
    ),
    (
        "tests/monitor/test_import_hygiene.py",
        r"for p in \(ROOT / room\)\.rglob",
        f'for p in (ROOT / "{NAMESPACE}" / room).rglob',
        "module names from the paths under the package",
    ),
]


def apply_edits(root: Path, texts: dict[Path, str], report: Report) -> None:
    for rel, old, new, why in EDITS:
        path = root / rel
        if path not in texts:
            if path.exists():
                texts[path] = path.read_text(encoding="utf-8")
            else:
                report.by_hand.append(f"{rel}: missing; was: {why}")
                continue
        text = texts[path]
        if re.search(old, text):
            texts[path] = re.sub(old, new.replace("\\", "\\\\"), text, count=1)
        elif new in text:
            continue
        else:
            report.by_hand.append(f"{rel}: the line to change is not as expected ({why})")


# -- the run --------------------------------------------------------------------------------

def drop_stale_build(root: Path, report: Report, dry: bool) -> None:
    """setuptools reuses build/lib, and bdist_wheel packs all of it: an earlier build's
    top-level rooms would ride along into the next wheel (`pip install .`, `make demo`)."""
    for room in ROOMS:
        stale = root / "build" / "lib" / room
        if stale.is_dir() and not stale.is_symlink():
            report.changed.append(f"{stale.relative_to(root)} (stale build output, removed)")
            if not dry:
                shutil.rmtree(stale)


def run(root: Path, dry: bool) -> Report:
    report = Report()
    make_links(root, report, dry)
    drop_stale_build(root, report, dry)
    modules = room_modules(root)
    dotted = dotted_rewriter(modules)
    texts: dict[Path, str] = {}
    for path in candidate_files(root):
        original = path.read_text(encoding="utf-8")
        if path.suffix == ".py":
            new = rewrite_python(path.relative_to(root), original, modules, report)
        else:
            new = rewrite_code_in_prose(dotted(original), modules)
            if path.name == "pyproject.toml" and path.parent == root:
                new = rewrite_pyproject(root, new, report)
        texts[path] = new
    apply_edits(root, texts, report)
    changed_py: list[Path] = []
    for path, new in texts.items():
        if new != path.read_text(encoding="utf-8"):
            report.changed.append(str(path.relative_to(root)))
            if not dry:
                path.write_text(new, encoding="utf-8")
            if path.suffix == ".py":
                changed_py.append(path)
    venv_ruff = root / ".venv" / "bin" / "ruff"
    ruff = str(venv_ruff) if venv_ruff.exists() else shutil.which("ruff")
    if changed_py and not dry:
        if ruff:
            # the imports' order: `infertop.collectors` now sorts among infertop's own
            files = [str(p) for p in changed_py]
            subprocess.run([ruff, "check", "--quiet", "--select", "I", "--fix", "--exit-zero", *files],
                           cwd=root, check=True)
            # a string that grew by "infertop." may pass the line length: say where
            long_lines = subprocess.run(
                [ruff, "check", "--select", "E501", "--output-format", "concise", "--exit-zero", *files],
                cwd=root, capture_output=True, text=True, check=True,
            ).stdout
            report.by_hand.extend(line for line in long_lines.splitlines() if "E501" in line)
        else:
            report.by_hand.append("sort the imports: ruff check --select I --fix .")
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a run would")
    parser.add_argument("--root", type=Path, default=THIS.parent.parent, help="the repository")
    args = parser.parse_args()
    report = run(args.root.resolve(), dry=args.check)
    for line in report.changed:
        print(("would change " if args.check else "changed ") + line)
    for line in report.notes:
        print("note: " + line)
    for line in report.by_hand:
        print("BY HAND: " + line)
    if args.check:
        return 1 if report.changed or report.by_hand else 0
    return 2 if report.by_hand else 0


if __name__ == "__main__":
    sys.exit(main())
