"""`infertop records`: the state directory's session records listed, old ones pruned, a
record being written never touched (issue 18: "recordings pile up")."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

from infertop.layouts import parse_layout
from infertop.monitor.monitor import Monitor
from infertop.monitor.record.catalog import is_being_written, list_records
from infertop.monitor.record.store import Recorder
from tests.support.infertop_cmd import run_infertop, start_infertop
from tests.support.waiting import until

DAY_S = 86_400.0


def _layout_text(name: str, interval_s: float = 1.0) -> str:
    # a node on a port nothing listens on: the record still ticks (the node is in error)
    return (
        f'[cluster]\nname = "{name}"\ninterval_s = {interval_s}\n'
        '[[nodes]]\nname = "decode-01"\nrole = "decode"\ngpus = 8\n'
        'metrics = ["http://127.0.0.1:9/metrics"]\n'
    )


def _old_record(path: Path, name: str, age_s: float) -> None:
    """A real record whose session ended `age_s` ago: ticks and files that old."""
    then = time.time() - age_s
    layout = parse_layout(_layout_text(name), str(path.with_suffix(".toml")))
    recorder = Recorder.open(layout, path, now=then - 60)
    monitor = Monitor(layout, recorder=recorder)
    for t in range(3):
        monitor.tick(now=then - 2 + t)
    recorder.close()
    for companion in path.parent.glob(path.name + "*"):
        os.utime(companion, (then, then))


def _wait_writing(record: Path, proc: subprocess.Popen[str], timeout_s: float = 30.0) -> None:
    until(lambda: record.exists() and is_being_written(record), timeout_s, "the recording to take its lock",
          every_s=0.1, gave_up=lambda: proc.poll() is not None,
          detail=lambda: proc.communicate() if proc.poll() is not None else "")


def test_list_and_prune_keep_the_live_record(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    _old_record(state / "old.sqlite", "old-trial", 10 * DAY_S)
    _old_record(state / "recent.sqlite", "recent-trial", 2 * 3600)
    live_layout = tmp_path / "live.toml"
    live_layout.write_text(_layout_text("live-trial", interval_s=60))  # one tick, then quiet
    live = start_infertop("record", "--layout", str(live_layout), "--record", str(state / "live.sqlite"),
                          "-q", env={"INFERTOP_STATE_DIR": str(state)})
    try:
        _wait_writing(state / "live.sqlite", live)
        env = {"INFERTOP_STATE_DIR": str(state)}
        (listing,) = run_infertop(["records", "--json"], env=env)
        assert listing.returncode == 0, listing.stderr
        got = {Path(r["path"]).name: r for r in json.loads(listing.stdout)}
        assert set(got) == {"old.sqlite", "recent.sqlite", "live.sqlite"}
        assert got["old.sqlite"]["cluster"] == "old-trial" and got["old.sqlite"]["ticks"] == 3
        assert got["live.sqlite"]["writing"] is True and got["old.sqlite"]["writing"] is False
        assert got["old.sqlite"]["last_tick_at"] < time.time() - 9 * DAY_S

        (table,) = run_infertop(["records"], env=env)
        assert table.stdout.splitlines()[0].split()[:2] == ["RECORD", "CLUSTER"]
        assert "recording" in next(line for line in table.stdout.splitlines() if line.startswith("live.sqlite"))

        (dry,) = run_infertop(["records", "--prune", "1d", "--dry-run"], env=env)
        assert dry.returncode == 0 and "would delete" in dry.stderr and (state / "old.sqlite").exists()

        # once every record is idle for over 1 s, only the live record's lock keeps it
        until(lambda: all(time.time() - r.last_activity > 1.2 for r in list_records(state)), 30,
              "every record idle for over 1 s", every_s=0.1)
        (pruned,) = run_infertop(["records", "--prune", "1s"], env=env)
        assert pruned.returncode == 0, pruned.stderr
        left = sorted(p.name for p in state.iterdir())
        assert "old.sqlite" not in left and "recent.sqlite" not in left and "old.sqlite.lock" not in left
        assert "live.sqlite" in left
        assert "2 record(s) deleted, 1 kept" in pruned.stderr
    finally:
        live.terminate()
        live.communicate(timeout=30)
    assert live.returncode == 0


def test_bad_age_is_refused() -> None:
    (run,) = run_infertop(["records", "--prune", "soon"])
    assert run.returncode == 2 and "is not an age" in run.stderr and "Traceback" not in run.stderr
