"""Builds the one file that is sent over SSH and run by the node's own `python3`.

The probe is `collectors/probe/main.py` plus the stdlib-only helper modules listed in
`HELPERS` (the text sanitiser, the virtual-NIC rule, the log vocabulary, the engine fetch,
the log follower, parsers and figures, the `npu-smi` reader). Inside the packages those
helpers are ordinary modules that main.py imports; on the node there is no package, so the
bundle pastes each helper's text above main.py's and drops the package imports, which each
file keeps between two marker lines:

    # bundle: strip-begin
    from infertop.collectors.probe.logs import follow_log
    # bundle: strip-end

The result is checked before it is used: it must compile, must not import from
`collectors` or `layouts`, and two files must not define the same top-level name (one would silently
replace the other once they share a namespace).
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent
PACKAGES = HERE.parent.parent  # where collectors/ and layouts/ are
MAIN = HERE / "main.py"
# stdlib-only modules, bundled in this order before main.py (a helper's own package imports
# name modules listed before it)
HELPERS: tuple[str, ...] = (
    "collectors/safe_text.py",
    "collectors/virtual_nics.py",
    "layouts/log_vocabulary.py",
    "collectors/probe/engine.py",
    "collectors/probe/log_follower.py",
    "collectors/probe/log_parsers.py",
    "collectors/probe/logs.py",
    "collectors/probe/npu.py",
    "collectors/probe/gpm.py",
    "collectors/probe/gpu_processes.py",
    "collectors/probe/ethtool_stats.py",
    "collectors/probe/host.py",
    "collectors/probe/nvidia_gpus.py",
)
OUR_PACKAGES = ("infertop",)

STRIP_BEGIN = "# bundle: strip-begin"
STRIP_END = "# bundle: strip-end"
_FUTURE = re.compile(r"^from __future__ import [\w, ]+\s*$")


class BundleError(ValueError):
    """The probe cannot be bundled; the message names the file and the problem."""


def _strip(path: Path) -> str:
    """A file's text without its shebang, `__future__` imports and marked package imports."""
    out: list[str] = []
    skipping = False
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        marker = line.strip()
        if marker == STRIP_BEGIN:
            if skipping:
                raise BundleError(f"{path.name}:{number}: nested {STRIP_BEGIN!r}")
            skipping = True
            continue
        if marker == STRIP_END:
            if not skipping:
                raise BundleError(f"{path.name}:{number}: {STRIP_END!r} without a begin")
            skipping = False
            continue
        if skipping or (number == 1 and line.startswith("#!")) or _FUTURE.match(line):
            continue
        out.append(line)
    if skipping:
        raise BundleError(f"{path.name}: {STRIP_BEGIN!r} is never closed")
    return "\n".join(out) + "\n"


def _top_level_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def _check_helper(path: Path, tree: ast.Module) -> None:
    for node in tree.body:
        if (
            isinstance(node, ast.If)
            and isinstance(node.test, ast.Compare)
            and isinstance(node.test.left, ast.Name)
            and node.test.left.id == "__name__"
        ):
            raise BundleError(f"{path.name}:{node.lineno}: a helper must not have a main block")


def _check_imports(path: Path, tree: ast.Module) -> None:
    for node in ast.walk(tree):
        module = None
        if isinstance(node, ast.ImportFrom):
            module = node.module or ""
        elif isinstance(node, ast.Import):
            module = next((a.name for a in node.names if a.name.split(".")[0] in OUR_PACKAGES), None)
        if module is not None and module.split(".")[0] in OUR_PACKAGES:
            line = getattr(node, "lineno", "?")
            raise BundleError(
                f"{path.name}:{line}: imports {module!r} outside "
                f"{STRIP_BEGIN!r}/{STRIP_END!r} markers: the node has no such package"
            )


def build_script(helpers: Sequence[Path], main: Path = MAIN) -> str:
    """Bundle `helpers` (in order) and `main` into one script; raises `BundleError`."""
    parts = [
        "#!/usr/bin/env python3",
        "# infertop probe (bundled); read-only",
        "from __future__ import annotations",
    ]
    owners: dict[str, str] = {}
    for path in [*helpers, main]:
        text = _strip(path)
        try:
            tree = ast.parse(text, filename=path.name)
        except SyntaxError as exc:
            raise BundleError(f"{path.name}:{exc.lineno}: {exc.msg}") from None
        _check_imports(path, tree)
        if path != main:
            _check_helper(path, tree)
        for name in _top_level_names(tree):
            if name in owners and not name.startswith("__"):
                raise BundleError(f"{path.name}: top-level name {name!r} also defined in {owners[name]}")
            owners[name] = path.name
        parts.append(f"# ---- {path.name}")
        parts.append(text)
    script = "\n".join(parts)
    try:
        compile(script, "infertop-probe", "exec")
    except SyntaxError as exc:
        raise BundleError(f"bundled probe:{exc.lineno}: {exc.msg}") from None
    return script


@functools.cache
def probe_script() -> str:
    """The bundled probe for this installation (built once per process)."""
    return build_script([PACKAGES / name for name in HELPERS])


# The fixed command run on the node. It reads "<byte count>\n", then that many bytes of
# script, from stdin; the script then reads its JSON config line and keeps stdin open,
# so the probe exits as soon as the session closes. Nothing from the layout is in it.
# The cwd is dropped from sys.path first so a stray json.py in $HOME cannot shadow the
# stdlib; -I is not used because it would also hide a user-site pynvml.
BOOTSTRAP = (
    "import sys;sys.path[:]=[p for p in sys.path if p not in ('','.')];"
    "r=sys.stdin.buffer;n=int(r.readline());g={'__name__':'__infertop_probe__'};"
    "exec(compile(r.read(n),'infertop-probe','exec'),g);sys.exit(g['run_from_stdin'](r))"
)


def bootstrap_payload(config_json: str) -> bytes:
    """What the bootstrap expects on stdin: length line, script, config line."""
    script = probe_script().encode("utf-8")
    return b"%d\n" % len(script) + script + config_json.encode("utf-8") + b"\n"
