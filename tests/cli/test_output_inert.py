"""Hostile text never reaches a terminal raw (issue 19, security item 2).

Real hostile parties, real commands: a node whose probe lies (over a real SSH connection),
an exporter and an engine that put terminal controls in label values, HELP text, reason
phrases and error bodies, and layouts and records that carry them. Whatever they send,
`infertop snapshot` (text and JSON), `record`, `report` and every error line print no raw
control character: each is shown visibly (``\\x1b``) by the one sanitiser,
`collectors.safe_text.inert_text`.

Each class of control is one test case (`pytest -m hostile` counts them); one run of the
real command per fixture serves all the cases of a class family.
"""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from infertop.cli.main import main
from infertop.collectors.safe_text import inert_text
from tests.support.hostile_http import HttpServer, Reply
from tests.support.infertop_cmd import run_infertop
from tests.support.ssh_loopback import LoopbackSsh

FIXTURES = Path(__file__).parent.parent / "fixtures" / "exposition"

# one entry per class of terminal control; the tag makes each findable in the output
HOSTILE: dict[str, str] = {
    "osc-title-bel": "\x1b]0;pwned\x07",
    "csi-clear-screen": "\x1b[2J\x1b[H",
    "c0-controls": "\x01\x05\x08\x0e\x1f",
    "del": "\x7f",
    "c1-csi": "\x9b2J",
    "c1-osc-st": "\x9d0;pwned\x9c",
    "bidi-override": "\u202eevil\u202c",
    "bidi-isolate": "\u2066x\u2069",
    "bidi-marks": "\u200e\u200f\u061c",
    "line-forgery": "\rok\nerror fake-node: forged",
}
CLASSES = list(HOSTILE)


def tagged(name: str) -> str:
    return f"<{name}>{HOSTILE[name]}</{name}>"


def raw_controls(text: str) -> list[str]:
    """Characters a terminal may obey or reorder: anything not printable but the newline."""
    return sorted({c for c in text if c != "\n" and not c.isprintable()})


def assert_inert(out: str, name: str) -> None:
    assert raw_controls(out) == []
    payload = HOSTILE[name]
    assert not any(c in out for c in payload if not c.isprintable() and c != "\n")
    assert not any(line.startswith("error fake-node") for line in out.splitlines())


# ----------------------------------------------------------------- a lying node over SSH

HOSTILE_PROBE = """\
#!{python}
# A hostile node: takes the bootstrap like the real probe, then streams readings whose
# notes and error carry terminal controls and bidi characters.
import json, sys, time
r = sys.stdin.buffer
n = int(r.readline()); r.read(n); r.readline()
notes = {notes!r}
for i in range(1000):
    reading = {{"v": 1, "t": time.time(), "gpus": [], "nics": [], "notes": notes}}
    if i >= 2:
        reading = {{"v": 1, "t": time.time(), "error": {error!r}}}
    sys.stdout.write(json.dumps(reading) + "\\n")
    sys.stdout.flush()
    time.sleep(0.25)
"""


def ssh_layout(ssh: LoopbackSsh, python: str, engine_url: str | None = None) -> str:
    engine = f'engine = {{ url = "{engine_url}", profile = "vllm" }}\n' if engine_url else ""
    return textwrap.dedent("""\
        [cluster]
        name = "hostile-ssh"
        interval_s = 0.5
        window_s = 1.0

        [pricing]
        gpu_hour_usd = 1.0

        """) + ssh.ssh_table(python) + textwrap.dedent(f"""
        [[nodes]]
        name = "node-01"
        role = "decode"
        gpus = 1
        ssh = "{ssh.target}"
        """) + engine


@pytest.fixture(scope="module")
def loopback_ssh(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoopbackSsh]:
    server = LoopbackSsh(tmp_path_factory.mktemp("ssh")).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def lying_node_outputs(
    loopback_ssh: LoopbackSsh, tmp_path_factory: pytest.TempPathFactory
) -> tuple[str, str]:
    """(text, JSON) of `infertop snapshot` on one node whose probe lies in every class."""
    work = tmp_path_factory.mktemp("lying")
    probe = work / "hostile-python"
    probe.write_text(HOSTILE_PROBE.format(
        python=sys.executable,
        notes=[tagged(name) for name in CLASSES],
        error="".join(tagged(name) for name in CLASSES),
    ))
    probe.chmod(0o755)
    layout = work / "layout.toml"
    layout.write_text(ssh_layout(loopback_ssh, str(probe)))
    text, as_json = run_infertop(
        ("snapshot", "--layout", str(layout), "--window", "2"),
        ("snapshot", "--layout", str(layout), "--window", "2", "--json"),
    )
    assert text.returncode == 0, text.stderr
    assert as_json.returncode == 0, as_json.stderr
    return text.stdout, as_json.stdout


@pytest.mark.hostile
@pytest.mark.parametrize("name", CLASSES)
def test_snapshot_text_shows_a_lying_nodes_notes_and_error_inert(
    lying_node_outputs: tuple[str, str], name: str
) -> None:
    text, _ = lying_node_outputs
    assert_inert(text, name)
    # the text arrived, visibly: each control written out, in the notes and in the error
    shown = inert_text(tagged(name), 1000)
    notes = [line for line in text.splitlines() if line.startswith("note node-01:")]
    errors = [line for line in text.splitlines() if line.startswith("error node-01:")]
    assert any(shown in line for line in notes), text
    assert len(errors) == 1 and f"<{name}>" in errors[0], text


@pytest.mark.hostile
@pytest.mark.parametrize("name", CLASSES)
def test_snapshot_json_stays_valid_and_inert(lying_node_outputs: tuple[str, str], name: str) -> None:
    _, out = lying_node_outputs
    assert_inert(out, name)
    doc = json.loads(out)  # JSON escapes every control: valid, and the data is intact
    node = doc["nodes"][0]
    assert tagged(name) in node["notes"] or any(f"<{name}>" in n for n in node["notes"])


# ----------------------------------------------------------------- hostile exporters


def prom_label(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def exporter_pages(name: str) -> dict[str, Reply]:
    """One node's pages for one class: node_exporter whose bond name, dcgm whose GPU model
    and HELP text, an engine whose HELP text, and an endpoint whose reason phrase and body
    are hostile."""
    label = prom_label(tagged(name))
    help_text = tagged(name).replace("\\", "\\\\").replace("\n", "\\n")
    node = (FIXTURES / "node_exporter.txt").read_text() + (
        f'node_bonding_slaves{{master="{label}"}} 2\n'
        f'node_bonding_active{{master="{label}"}} 1\n'
    )
    dcgm = f"# HELP dcgm_hostile {help_text}\n" + (FIXTURES / "dcgm.txt").read_text().replace(
        'modelName="NVIDIA H200"', f'modelName="{label}"'
    )
    engine = f"# HELP vllm:hostile {help_text}\n" + (FIXTURES / "vllm_v1.txt").read_text()
    latin1 = "".join(c for c in HOSTILE[name] if ord(c) < 256 and c not in "\r\n")
    return {
        f"/{name}/node/metrics": Reply(body=node),
        f"/{name}/dcgm/metrics": Reply(body=dcgm),
        f"/{name}/engine/metrics": Reply(body=engine),
        f"/{name}/error/metrics": Reply(status=500, reason=f"Internal {latin1}", body=tagged(name)),
    }


def exporter_node(server: HttpServer, name: str) -> str:
    urls = [server.url(f"/{name}/{page}/metrics") for page in ("node", "dcgm", "error")]
    return textwrap.dedent(f"""
        [[nodes]]
        name = "{name}"
        role = "decode"
        gpus = 1
        metrics = {json.dumps(urls)}
        engine = {{ url = "{server.url(f'/{name}/engine/metrics')}", profile = "vllm" }}
        """)


@pytest.fixture(scope="module")
def exporter_outputs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """(text, JSON) of `infertop snapshot` on one node per class, each read from its
    own hostile exporters and engine."""
    work = tmp_path_factory.mktemp("exporters")
    routes = {path: reply for name in CLASSES for path, reply in exporter_pages(name).items()}
    with HttpServer(routes) as server:
        layout = work / "layout.toml"
        layout.write_text(textwrap.dedent("""\
            [cluster]
            name = "hostile-exporters"
            interval_s = 0.5
            window_s = 1.0

            [pricing]
            gpu_hour_usd = 1.0
            """) + "".join(exporter_node(server, name) for name in CLASSES))
        text, as_json = run_infertop(
            ("snapshot", "--layout", str(layout), "--window", "1"),
            ("snapshot", "--layout", str(layout), "--window", "1", "--json"),
        )
    assert text.returncode == 0, text.stderr
    assert as_json.returncode == 0, as_json.stderr
    yield text.stdout, as_json.stdout


@pytest.mark.hostile
@pytest.mark.parametrize("name", CLASSES)
def test_hostile_exporter_text_is_inert_in_text_and_json(
    exporter_outputs: tuple[str, str], name: str
) -> None:
    text, out = exporter_outputs
    assert_inert(text, name)
    assert_inert(out, name)
    shown = inert_text(tagged(name), 1000)
    # the bond note and the GPU model arrive, each control written out visibly
    assert any(line.startswith(f"note {name}: {shown}") for line in text.splitlines()), text
    node = next(n for n in json.loads(out)["nodes"] if n["name"] == name)
    assert any(n.startswith(shown) for n in node["notes"])
    assert {g["name"] for g in node["gpus"]} == {shown}


# ----------------------------------------------------------------- CLI error lines


@pytest.mark.hostile
@pytest.mark.parametrize("name", CLASSES)
def test_layout_errors_print_layout_strings_inert(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    # an unknown key is echoed as the error's field name; TOML spells controls as \\u escapes
    key = json.dumps(tagged(name))  # a quoted TOML key with JSON-compatible escapes
    layout = tmp_path / "layout.toml"
    layout.write_text(f'[cluster]\nname = "x"\n{key} = 1\n')
    assert main(["snapshot", "--layout", str(layout)]) == 2
    err = capsys.readouterr().err
    assert_inert(err, name)
    assert err.count("\n") == 1 and f"<{name}>" in err  # one line, the key shown visibly


# ----------------------------------------------------------------- record, report, replay

HOSTILE_NAME = "".join(tagged(name) for name in CLASSES)


@pytest.fixture(scope="module")
def recorded(loopback_ssh: LoopbackSsh, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A real `record` of the lying node, in a cluster and a file named with every class,
    then a real `report` of it: everything each printed or wrote, by name."""
    work = tmp_path_factory.mktemp("recorded")
    probe = work / "hostile-python"
    probe.write_text(HOSTILE_PROBE.format(
        python=sys.executable, notes=[tagged(name) for name in CLASSES], error=HOSTILE_NAME,
    ))
    probe.chmod(0o755)
    layout = work / "layout.toml"
    text = ssh_layout(loopback_ssh, str(probe)).replace('name = "hostile-ssh"', f"name = {json.dumps(HOSTILE_NAME)}")
    layout.write_text(text)
    record = work / ("rec-" + "".join(HOSTILE.values()) + ".sqlite")
    [rec] = run_infertop(("record", "--layout", str(layout), "--record", str(record), "--duration", "2"))
    assert rec.returncode == 0, rec.stderr
    out = work / "report"
    [rep] = run_infertop(("report", str(record), "--out", str(out)))
    assert rep.returncode == 0, rep.stderr
    files = {p.name: p.read_text(encoding="utf-8", errors="surrogateescape") for p in out.iterdir()}
    return {"record stdout": rec.stdout, "record stderr": rec.stderr, "report stdout": rep.stdout,
            "report stderr": rep.stderr, **files, "path": str(record)}


@pytest.mark.hostile
@pytest.mark.parametrize("name", CLASSES)
def test_record_and_report_print_and_write_inert_text(recorded: dict[str, str], name: str) -> None:
    for what, text in recorded.items():
        if what != "path":
            assert raw_controls(text) == [], what
            assert_inert(text, name)
    assert f"recording to {inert_text(recorded['path'], 1000)}" in recorded["record stderr"]
    assert recorded["record stdout"].count("phase") >= 1  # the tick lines were printed
    assert f"# Session report: {inert_text(HOSTILE_NAME, 500)}" in recorded["report.md"]
    assert f"&lt;{name}&gt;" in recorded["spend.svg"]  # the title, XML-escaped


@pytest.mark.hostile
async def test_replay_shows_the_recorded_hostile_text_inert(recorded: dict[str, str]) -> None:
    from infertop.monitor.record.replay import ReplayFeed
    from infertop.tui.node_screen import NodeScreen
    from infertop.tui.replay_app import ReplayApp
    from tests.support.tui_helpers import screen_text, wait_for

    feed = ReplayFeed.open(Path(recorded["path"]), speed=1000.0)
    app = ReplayApp(feed)
    async with app.run_test(size=(200, 60)) as pilot:
        table = app.overview.table
        await wait_for(pilot, lambda: "node-01" in table.shown_keys)
        table.move_cursor(row=table.row_index("node-01"))
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, NodeScreen))
        await pilot.pause()
        text = screen_text(app)
    assert raw_controls(text) == []
    assert "<osc-title-bel>\\x1b]0;pwned\\x07" in text and "\\u202eevil" in text
