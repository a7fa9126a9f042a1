"""A tick's snapshot is written as JSON once, for the session record and the viewers'
channel alike (monitor.snapshot.snapshot_json): the same text, the same bytes object."""

from __future__ import annotations

import threading
import zlib

from infertop.collectors.sample import EngineSample, NodeSample
from infertop.layouts import parse_layout
from infertop.monitor.channel.protocol import encode_snapshot as channel_json
from infertop.monitor.monitor import Monitor
from infertop.monitor.record.codec import decode_snapshot
from infertop.monitor.record.codec import encode_snapshot as record_blob
from infertop.monitor.snapshot import Snapshot, snapshot_json

LAYOUT = """
[cluster]
name = "json-once"

[[nodes]]
name = "decode-01"
role = "decode"
gpus = 8
"""


def snapshots(count: int) -> list[Snapshot]:
    monitor = Monitor(parse_layout(LAYOUT), sources=[], clock=lambda: 1_000.0)
    out = []
    for i in range(count):
        monitor.fleet.ingest(NodeSample(node="decode-01", source="test", taken_at=990.0 + i,
                                     engine=EngineSample(generation_tokens_total=100.0 * i, requests_running=i)))
        out.append(monitor.tick(990.0 + i))
    return out


def test_the_record_and_the_channel_share_one_text() -> None:
    first, second = snapshots(2)
    text = channel_json(second)
    assert snapshot_json(second) is text  # written once, not again
    assert zlib.decompress(record_blob(second)) == text
    assert decode_snapshot(record_blob(second)) == second
    # a new frame gets its own text; an older one is written again, the same
    assert snapshot_json(first) != text
    assert snapshot_json(first) == first.model_dump_json(by_alias=True, exclude_defaults=True).encode()


def test_two_threads_asking_at_once_get_the_same_text() -> None:
    (snapshot,) = snapshots(1)
    got: list[bytes] = []
    start = threading.Barrier(4)

    def ask() -> None:
        start.wait()
        got.append(snapshot_json(snapshot))

    threads = [threading.Thread(target=ask) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 4 and all(g is got[0] for g in got)
