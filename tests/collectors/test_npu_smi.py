"""`npu-smi info` parsing (recorded outputs) and the reader's subprocess path."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infertop.collectors.probe.npu import NpuSmiReader, parse_hccn_link, parse_npu_smi_info
from infertop.collectors.probe.schema import sample_from_reading

FIXTURES = Path(__file__).parent.parent / "fixtures" / "npu"
MIB = 1024 * 1024


def parsed(name: str) -> list[dict]:
    return parse_npu_smi_info((FIXTURES / f"npu_smi_{name}.txt").read_text())


def test_910b_table() -> None:
    npus = parsed("910b")
    assert [n["index"] for n in npus] == [0, 1, 2, 3]
    first = npus[0]
    assert first == {
        "index": 0, "kind": "npu", "name": "910B3", "power_w": 96.5, "temp_c": 43.0, "util_pct": 78.0,
        "healthy": True, "error": None, "mem_used_bytes": 52164 * MIB, "mem_total_bytes": 65536 * MIB,
    }
    assert npus[2]["healthy"] is False and npus[2]["error"] == "health: Warning"
    assert npus[3]["power_w"] is None  # "NA" is unknown, not 0


def test_910a_old_layout_without_hugepages() -> None:
    npus = parsed("910a")
    assert [n["util_pct"] for n in npus] == [0.0, 12.0]
    assert npus[1]["mem_used_bytes"] == 1024 * MIB  # HBM, not the DDR "Memory-Usage"
    assert npus[1]["mem_total_bytes"] == 32768 * MIB


def test_a3_two_chips_per_npu_indexed_by_phy_id() -> None:
    npus = parsed("a3")
    assert [n["index"] for n in npus] == [0, 1, 2, 3]
    assert npus[1]["power_w"] is None  # the second chip of a card prints "-"
    assert npus[3]["healthy"] is False and npus[3]["error"] == "health: Critical"
    assert npus[2]["util_pct"] == 55.0


def test_310p_uses_device_ids_and_ddr_memory() -> None:
    npus = parsed("310p")
    assert [n["index"] for n in npus] == [0, 1]  # Device column, not NPU ids 8 and 9
    assert npus[0]["mem_total_bytes"] == 21527 * MIB


@pytest.mark.parametrize("name", ["910b", "910a", "a3", "310p"])
def test_parsed_rows_are_valid_samples(name: str) -> None:
    sample = sample_from_reading("n", "ssh", {"gpus": parsed(name), "nics": []}, 1.0)
    assert sample.error is None
    assert sample.gpus and all(g.kind == "npu" for g in sample.gpus)


def test_renamed_column_gives_none_for_its_field_only() -> None:
    text = (FIXTURES / "npu_smi_910b.txt").read_text().replace("AICore(%)", "AI-Core(%)  ")
    npus = parse_npu_smi_info(text)
    assert len(npus) == 4
    assert all(n["util_pct"] is None for n in npus)
    assert npus[0]["mem_total_bytes"] == 65536 * MIB


def test_misaligned_cell_gives_none_not_wrong_values() -> None:
    text = (FIXTURES / "npu_smi_910b.txt").read_text().replace("96.5        43", "96.5")
    first = parse_npu_smi_info(text)[0]
    assert first["power_w"] is None and first["temp_c"] is None
    assert first["util_pct"] == 78.0


@pytest.mark.parametrize("text", ["", "npu-smi: command not found", "dcmi module initialize failed. ret is -8005\n"])
def test_not_a_table(text: str) -> None:
    assert parse_npu_smi_info(text) == []


def test_hccn_link() -> None:
    assert parse_hccn_link("link status: UP\n") == "up"
    assert parse_hccn_link("link status: DOWN") == "down"
    assert parse_hccn_link("Command execute failed!") is None


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=2000))
def test_garbage_never_raises(text: str) -> None:
    assert isinstance(parse_npu_smi_info(text), list)


@settings(max_examples=200, deadline=None)
@given(
    name=st.sampled_from(["910b", "910a", "a3", "310p"]),
    cuts=st.lists(st.integers(min_value=0, max_value=4000), max_size=6),
    junk=st.text(max_size=12),
)
def test_mangled_tables_never_raise(name: str, cuts: list[int], junk: str) -> None:
    text = (FIXTURES / f"npu_smi_{name}.txt").read_text()
    for cut in cuts:
        cut = min(cut, len(text))
        text = text[:cut] + junk + text[cut + len(junk):]
    for npu in parse_npu_smi_info(text):
        sample = sample_from_reading("n", "ssh", {"gpus": [npu]}, 1.0)
        assert sample.error is None, sample.error


def _tool(path: Path, body: str) -> str:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_reader_runs_fixed_argv_and_caches(tmp_path: Path) -> None:
    calls = tmp_path / "calls"
    smi = _tool(tmp_path / "npu-smi", f'echo "$@" >> {calls}\ncat {FIXTURES / "npu_smi_910b.txt"}\n')
    hccn = _tool(
        tmp_path / "hccn_tool",
        f'echo "$@" >> {calls}\nif [ "$2" = 2 ]; then echo "link status: DOWN"; else echo "link status: UP"; fi\n',
    )
    reader = NpuSmiReader(smi, hccn, min_period_s=3600)
    npus = reader.read()
    assert len(npus) == 4
    ports = reader.read_ports()
    assert [(p["name"], p["state"], p["accelerator_index"]) for p in ports] == [
        ("npu0-roce", "up", 0), ("npu1-roce", "up", 1), ("npu2-roce", "down", 2), ("npu3-roce", "up", 3),
    ]
    assert all(p["kind"] == "npu-roce" for p in ports)
    reader.read()  # within min_period_s: the cached reading, no second run
    assert calls.read_text().splitlines() == ["info"] + [f"-i {i} -link -g" for i in range(4)]


def test_reader_survives_a_hanging_or_failing_tool(tmp_path: Path) -> None:
    hang = _tool(tmp_path / "npu-smi", "exec sleep 30\n")
    reader = NpuSmiReader(hang, None, min_period_s=0, timeout_s=0.5)
    assert reader.read() == []
    assert reader.note == "npu-smi failed: TimeoutExpired"
    missing = NpuSmiReader(os.path.join(tmp_path, "nope"), None, min_period_s=0)
    assert missing.read() == []
    assert missing.note is not None and "FileNotFoundError" in missing.note
