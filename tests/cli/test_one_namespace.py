"""The rooms are installed as `infertop.layouts`, `infertop.collectors`, `infertop.monitor` and
`infertop.tui` (infertop/<room> links to the top-level folder). From the repository root the
bare names would import too, as a second copy of every module (two `Snapshot` classes, two
registries); ruff's TID251 bans them in import statements, this catches the ones a string
names (`import_module`, `-m`, `resources.files`)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ROOMS = ("layouts", "collectors", "monitor", "tui")


def test_every_room_is_a_link_inside_infertop() -> None:
    for room in ROOMS:
        link = REPO / "infertop" / room
        assert link.is_symlink() and link.resolve() == (REPO / room).resolve(), link


def test_importing_every_module_loads_no_room_by_its_bare_name() -> None:
    # every module of the product (not __main__, which would run the CLI), then the panels a
    # viewer imports by name and the bundled probe, all in a fresh process run from the repo root
    code = (
        "import importlib, json, pkgutil, sys\n"
        "import infertop\n"
        "names = [m.name for m in pkgutil.walk_packages(infertop.__path__, 'infertop.')\n"
        "         if not m.name.endswith('__main__')]\n"
        "for name in names:\n"
        "    importlib.import_module(name)\n"
        "from infertop.tui.panels import overview_panels\n"
        "from infertop.collectors.probe.bundle import probe_script\n"
        "from infertop.layouts.loader import example_path\n"
        "overview_panels(); probe_script(); example_path('local').read_text()\n"
        f"bare = sorted(m for m in sys.modules if m.split('.')[0] in {list(ROOMS)!r})\n"
        "print(json.dumps({'modules': len(names), 'bare': bare}))\n"
    )
    done = subprocess.run([sys.executable, "-W", "ignore", "-c", code], capture_output=True, text=True,
                          cwd=REPO, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout.splitlines()[-1])
    assert found["bare"] == []
    # the control: the walk went through the links into every room
    assert found["modules"] > 100
