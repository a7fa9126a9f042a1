"""Where a layout's session files live: the state directory and the layout's key.

A module of its own, light on imports: a viewer finding the monitor's socket needs these
names and nothing of the record store (its ledger, SQLite, the snapshot codec).
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

from layouts.model import Layout

PRIVATE_DIR_MODE = 0o700


def state_dir() -> Path:
    """$INFERTOP_STATE_DIR, else $XDG_STATE_HOME/infertop, else ~/.local/state/infertop."""
    explicit = os.environ.get("INFERTOP_STATE_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_STATE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".local" / "state"
    return base / "infertop"


def layout_key(layout: Layout) -> str:
    """A file-name-safe name for a layout's session: its cluster name and where it lives."""
    identity = str(Path(layout.source_path).resolve()) if layout.source_path else "<built-in>"
    digest = hashlib.sha256(f"{identity}\0{layout.cluster.name}".encode()).hexdigest()[:10]
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", layout.cluster.name).strip("-.")[:40] or "cluster"
    return f"{slug}-{digest}"
