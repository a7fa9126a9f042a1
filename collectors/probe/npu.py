"""Huawei Ascend NPUs on the node, through `npu-smi info` (and `hccn_tool` for RoCE links).

Standard library only: bundled into the SSH probe (collectors/probe/bundle.py) and
imported by it when run from the package. Used when a node has no npu-exporter to scrape.

`npu-smi info` prints a box-drawn table whose columns differ between driver releases and
products (910A, 910B, Atlas A3 with two chips per NPU, 310P with a Device column), so
the parser reads the column names from the two header rows and matches each data cell to
them; a cell whose values do not line up with its header gives None for its fields, and
a table it cannot read at all gives no NPUs — never an exception.

Commands run with a fixed argv (`npu-smi info`; `hccn_tool -i <int> -link -g`), never
through a shell, each with a timeout. `npu-smi` takes a few hundred ms, so a reading is
reused for `min_period_s`.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from typing import Any

NPU_SMI_PATHS = (
    "/usr/local/sbin/npu-smi",
    "/usr/local/bin/npu-smi",
    "/usr/local/Ascend/driver/tools/npu-smi",
)
HCCN_TOOL_PATHS = ("/usr/local/Ascend/driver/tools/hccn_tool", "/usr/local/bin/hccn_tool")
NPU_DEVICE_NODE = "/dev/davinci_manager"
NPU_MIB = 1024 * 1024  # npu-smi's "MB" are MiB
_NPU_BUS_ID = re.compile(r"^[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]$")
_NPU_MISSING = ("", "-", "na", "n/a", "--")


def npu_tool(names, paths):
    """The first executable among PATH lookups of `names` and the fixed `paths`, or None."""
    for name in names:
        found = shutil.which(name)
        if found:
            return found
    for path in paths:
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def _npu_cells(line: str):
    """`| a | b | c |` → ["a", "b", "c"]; None for border lines and non-table text."""
    text = line.strip()
    if not text.startswith("|") or not text.endswith("|") or len(text) < 2:
        return None
    return [c.strip() for c in text[1:-1].split("|")]


def _npu_tokens(cell: str) -> list:
    """Whitespace-separated values; `a / b`, `a/ b`, `a /b` become one token `a/b`."""
    return re.sub(r"\s*/\s*", "/", cell).split()


def _npu_number(token):
    if token is None or token.strip().lower() in _NPU_MISSING:
        return None
    try:
        value = float(token)
    except ValueError:
        return None
    return value if value == value and abs(value) != float("inf") else None


def _npu_pair(token):
    """`used/total` → (used, total) as numbers, or (None, None)."""
    if token is None or "/" not in token:
        return None, None
    used, _, total_ = token.partition("/")
    return _npu_number(used), _npu_number(total_)


def _npu_labelled(labels: list, cell: str) -> dict:
    """Match a data cell's values to its header labels; nothing when they do not line up."""
    tokens = _npu_tokens(cell)
    if len(tokens) != len(labels):
        return {}
    return dict(zip(labels, tokens))  # noqa: B905 - lengths checked; 3.6+ on nodes


def parse_npu_smi_info(text: str) -> list:
    """`npu-smi info` text → accelerator dicts (GpuSample fields, kind "npu"). Never raises."""
    try:
        return _parse_npu_smi_info(text)
    except Exception:  # a layout we do not know: no figures rather than a broken probe
        return []


def _parse_npu_smi_info(text: str) -> list:
    head1 = head2 = None  # header cells split into labels: [[labels of cell 0], …]
    chips = []
    pending = None  # the first row of an NPU/chip pair
    for line in text.splitlines():
        cells = _npu_cells(line)
        if cells is None or len(cells) < 3:
            continue
        labels = [c.split() for c in cells]
        if labels[0][:2] == ["NPU", "Name"]:
            head1, pending = labels, None
            continue
        if labels[0][:1] == ["Chip"] and head1 is not None:
            head2 = labels
            continue
        if any("Process" in c for c in cells):
            break  # the process table follows: not ours
        if head1 is None or head2 is None or len(cells) != len(head1):
            continue
        first = cells[0].split()
        if len(cells) > 1 and _NPU_BUS_ID.match(cells[1]):
            if pending is not None:
                chips.append(_npu_chip(head1, head2, pending, cells))
            pending = None
        elif first and first[0].isascii() and first[0].isdigit():
            pending = cells
    return _npu_index(chips)


def _npu_int(cells: list, i: int):
    """cells[i] as a whole number, or None (isascii: str.isdigit() takes '²', int() does not)."""
    text = cells[i] if i < len(cells) else ""
    return int(text) if text.isascii() and text.isdigit() else None


def _npu_chip(head1: list, head2: list, row1: list, row2: list) -> dict:
    first = row1[0].split()
    values: dict[str, Any] = {}
    for labels, row in ((head1, row1), (head2, row2)):
        for i in range(1, len(row)):
            if i < len(labels):
                values.update(_npu_labelled(labels[i], row[i]))
    chip_cell = row2[0].split()
    health = row1[1].strip() if len(row1) > 1 else ""
    chip: dict[str, Any] = {
        "npu": int(first[0]),
        "name": " ".join(first[1:])[:64] or None,
        "chip": _npu_int(chip_cell, 0),
        # Phy-ID (Atlas A3) or Device (310P): the chip's own number, when printed
        "device": _npu_int(chip_cell, 1),
        "kind": "npu",
        "power_w": _npu_number(values.get("Power(W)")),
        "temp_c": _npu_number(values.get("Temp(C)")),
        "util_pct": _npu_number(values.get("AICore(%)")),
        "healthy": (health == "OK") if health else None,
        "error": ("health: " + health[:40]) if health and health != "OK" else None,
    }
    # HBM where the chip has it (910*), else the DDR "Memory-Usage" (310P)
    for label in ("HBM-Usage(MB)", "Memory-Usage(MB)"):
        used, total_ = _npu_pair(values.get(label))
        if total_:
            chip["mem_used_bytes"] = int(used * NPU_MIB) if used is not None else None
            chip["mem_total_bytes"] = int(total_ * NPU_MIB)
            break
    return chip


def _npu_index(chips: list) -> list:
    """A stable accelerator index: the printed chip number, else the NPU id, else order."""
    devices = [c["device"] for c in chips]
    npus = [c["npu"] for c in chips]
    if all(d is not None for d in devices) and len(set(devices)) == len(devices):
        indexes = devices
    elif len(set(npus)) == len(npus):
        indexes = npus
    else:
        indexes = list(range(len(chips)))
    out = []
    for chip, index in zip(chips, indexes):  # noqa: B905 - same length; 3.6+ on nodes
        chip = dict(chip)
        for key in ("npu", "chip", "device"):
            chip.pop(key, None)
        chip["index"] = index
        out.append(chip)
    return out


_HCCN_LINK = re.compile(r"link status\s*:\s*(\w+)", re.IGNORECASE)


def parse_hccn_link(text: str):
    """`hccn_tool -i N -link -g` → "up" / "down" / None."""
    m = _HCCN_LINK.search(text or "")
    if m is None:
        return None
    state = m.group(1).lower()
    return state if state in ("up", "down") else None


class NpuSmiReader:
    """Reads NPUs through `npu-smi info`; RoCE link state through `hccn_tool` if present."""

    def __init__(self, npu_smi: str, hccn_tool=None, min_period_s: float = 2.0, timeout_s: float = 5.0):
        self.npu_smi = npu_smi
        self.hccn_tool = hccn_tool
        self.min_period_s = min_period_s
        self.timeout_s = timeout_s
        self._at: float | None = None
        self._npus: list = []
        self._ports: list = []
        self.note: str | None = None

    def _run(self, argv) -> str:
        done = subprocess.run(
            argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=self.timeout_s, check=False
        )
        return done.stdout.decode("utf-8", "replace")[:1_000_000]

    def _refresh(self) -> None:
        try:
            self._npus = parse_npu_smi_info(self._run([self.npu_smi, "info"]))
            self.note = None if self._npus else "npu-smi info: no NPU rows recognised"
        except (OSError, subprocess.SubprocessError) as exc:
            self._npus = []
            self.note = "npu-smi failed: " + type(exc).__name__
        ports = []
        if self.hccn_tool is not None:
            for npu in self._npus:
                index = int(npu["index"])
                try:
                    state = parse_hccn_link(self._run([self.hccn_tool, "-i", str(index), "-link", "-g"]))
                except (OSError, subprocess.SubprocessError):
                    state = None
                name = f"npu{index}-roce"
                ports.append({"name": name, "kind": "npu-roce", "state": state, "accelerator_index": index})
        self._ports = ports

    def read(self) -> list:
        now = time.monotonic()
        if self._at is None or now - self._at >= self.min_period_s:
            self._refresh()
            self._at = now
        return [dict(n) for n in self._npus]

    def read_ports(self) -> list:
        """The NPUs' own RoCE ports as NIC dicts (kind "npu-roce"); [] without hccn_tool."""
        return [dict(p) for p in self._ports]

    def close(self) -> None:
        pass


def open_npus():
    """(reader, note): an `npu-smi` reader on an Ascend node, else (None, None)."""
    path = npu_tool(("npu-smi",), NPU_SMI_PATHS)
    if path is None:
        if os.path.exists(NPU_DEVICE_NODE):
            return None, "Ascend device present but npu-smi not found: no NPU figures"
        return None, None
    return NpuSmiReader(path, npu_tool(("hccn_tool",), HCCN_TOOL_PATHS)), None
