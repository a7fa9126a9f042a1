"""Passwords and tokens in URLs are never printed or stored; records are private
(issue 19, security item 4).

Real engines that are down or answer 500, at URLs that carry a password or a token in
one of the forms people use (userinfo, ?token=, ?access_token=, ?apikey=, ?key=,
?password=, ?secret=, ?auth…), read by the scrape source directly and by the real probe
over a real SSH connection. Each secret must be absent from `snapshot` text and JSON,
from the record's bytes (the SQLite file and its WAL, read raw while the session runs and
after), from `report`'s files and output, from the exporter's page and from layout errors.
The state directory is 0700 and the record and its -wal/-shm files are 0600.
"""

from __future__ import annotations

import contextlib
import sqlite3
import stat
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from infertop.cli.main import main
from infertop.monitor.state import state_dir
from tests.support.hostile_http import HttpServer, Reply, dead_port
from tests.support.infertop_cmd import finish, run_infertop, start_infertop
from tests.support.ssh_loopback import LoopbackSsh
from tests.support.waiting import until

# one distinct secret per form in which a URL carries one
SECRETS: dict[str, tuple[str, str]] = {
    # name: (URL template: {base} is http://127.0.0.1:PORT, the secret)
    "userinfo-password": ("http://admin:{s}@{hostport}/metrics", "Pw-userinfo-7f3a9c"),
    "query-token": ("http://{hostport}/metrics?token={s}", "Tk-query-token-41b2"),
    "query-access_token": ("http://{hostport}/metrics?x=1&access_token={s}", "Tk-access-9d0e3f"),
    "query-apikey": ("http://{hostport}/metrics?apikey={s}", "Tk-apikey-5c81aa"),
    "query-key": ("http://{hostport}/metrics?key={s}&job=vllm", "Tk-key-e22b07"),
    "query-password": ("http://{hostport}/metrics?Password={s}", "Pw-query-0a6d1e"),
    "query-secret": ("http://{hostport}/metrics?client_secret={s}", "Tk-secret-b6c4f2"),
    "query-auth": ("http://{hostport}/metrics?AUTH_TOKEN={s}", "Tk-auth-71e9d3"),
}
KINDS = list(SECRETS)


def secret_url(kind: str, hostport: str) -> str:
    template, secret = SECRETS[kind]
    return template.format(s=secret, hostport=hostport)


def assert_no_secret(kind: str, where: str, data: str | bytes) -> None:
    secret = SECRETS[kind][1]
    blob = data if isinstance(data, bytes) else data.encode("utf-8", "surrogateescape")
    assert secret.encode() not in blob, f"{kind}: the secret is in {where}"


# ----------------------------------------------------------------- the cluster under test


@pytest.fixture(scope="module")
def engines() -> Iterator[HttpServer]:
    """An engine that answers 500 (with the request's own URL in its body, as many do)."""
    with HttpServer({"/metrics": Reply(status=500, body="Internal Server Error")}) as server:
        yield server


@pytest.fixture(scope="module")
def loopback_ssh(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoopbackSsh]:
    server = LoopbackSsh(tmp_path_factory.mktemp("ssh")).start()
    try:
        yield server
    finally:
        server.stop()


def every_secret_url(hostport: str) -> str:
    """One URL carrying every form of secret at once (userinfo and each query form)."""
    query = "&".join(secret_url(kind, "h").split("?", 1)[1] for kind in KINDS if kind.startswith("query-"))
    return f"{secret_url('userinfo-password', hostport)}?{query}"


def cluster_layout(engines: HttpServer, ssh: LoopbackSsh) -> str:
    """Per secret form: a node whose engine answers 500, and one whose engine and exporter
    are down (scrape, read from here); a node whose engine the probe reads over SSH (500)
    at a URL with every form of secret; and a probe node whose URL urllib cannot even
    parse (no port). Two probes only: each costs an SSH handshake and a Python start."""
    up, down = f"127.0.0.1:{engines.port}", f"127.0.0.1:{dead_port()}"
    nodes = []
    for kind in KINDS:
        nodes.append(f'[[nodes]]\nname = "{kind}-500"\nrole = "decode"\ngpus = 1\n'
                     f'engine = {{ url = "{secret_url(kind, up)}", profile = "vllm" }}\n')
        nodes.append(f'[[nodes]]\nname = "{kind}-down"\nrole = "decode"\ngpus = 1\n'
                     f'engine = {{ url = "{secret_url(kind, down)}", profile = "vllm" }}\n'
                     f'metrics = ["{secret_url(kind, down)}"]\n')
    nodes.append(f'[[nodes]]\nname = "every-secret-probe"\nrole = "decode"\ngpus = 1\nssh = "{ssh.target}"\n'
                 f'engine = {{ url = "{every_secret_url(up)}", profile = "vllm" }}\n')
    # urllib on the node: "nonnumeric port: '<password>@127.0.0.1'" (the password, unquoted)
    nodes.append(f'[[nodes]]\nname = "userinfo-password-noport"\nrole = "decode"\ngpus = 1\nssh = "{ssh.target}"\n'
                 f'engine = {{ url = "{secret_url("userinfo-password", "127.0.0.1")}" }}\n')
    head = textwrap.dedent("""\
        [cluster]
        name = "secrets"
        interval_s = 0.5
        window_s = 1.0

        [pricing]
        gpu_hour_usd = 1.0

        """)
    return head + ssh.ssh_table(sys.executable) + "\n" + "\n".join(nodes)


@pytest.fixture(scope="module")
def outputs(
    engines: HttpServer, loopback_ssh: LoopbackSsh, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, str | bytes]:
    """Everything the commands printed and wrote, by name; the record read raw while the
    session runs (its WAL holds the latest ticks) and after it ended."""
    work = tmp_path_factory.mktemp("secrets")
    layout = work / "layout.toml"
    layout.write_text(cluster_layout(engines, loopback_ssh))
    out: dict[str, str | bytes] = {}
    # all at once: each spends most of its time in a collection window (long enough for
    # nine probes to start over SSH on a loaded machine)
    text = start_infertop("snapshot", "--layout", str(layout), "--window", "3")
    as_json = start_infertop("snapshot", "--layout", str(layout), "--window", "3", "--json")
    record = start_infertop("record", "--layout", str(layout), "--duration", "3",
                            env={"INFERTOP_STATE_DIR": str(work / "state")})
    def wal_files() -> list[Path]:
        found = list((work / "state").glob("*.sqlite-wal"))
        return found if any(p.stat().st_size > 0 for p in found) else []

    wal = until(wal_files, 30, "a WAL while recording", every_s=0.1, ignore=(FileNotFoundError,))
    database = wal[0].with_name(wal[0].name.removesuffix("-wal"))

    def ticks() -> int:
        with contextlib.closing(sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=1)) as conn:
            return int(conn.execute("SELECT count(*) FROM ticks").fetchone()[0])

    # a few ticks (every 0.5 s), with the nodes' notes and errors, into the WAL
    until(lambda: ticks() >= 3, 30, "three ticks in the record", every_s=0.1, ignore=(sqlite3.Error,))
    out["record file (running)"] = wal[0].with_name(wal[0].name.removesuffix("-wal")).read_bytes()
    out["record WAL (running)"] = wal[0].read_bytes()
    for name, proc in (("snapshot text", text), ("snapshot json", as_json), ("record", record)):
        done = finish(proc)
        # a snapshot whose window passed before any SSH probe answered (a loaded machine:
        # every HTTP node here fails on purpose) reads no node and says so in one line,
        # exit 1; that line is checked for secrets like the rest
        unread = name.startswith("snapshot") and "no node could be read" in done.stderr
        assert done.returncode == 0 or (unread and done.returncode == 1), done.stderr
        out[name] = done.stdout + done.stderr
    files = sorted((work / "state").iterdir())
    for path in files:
        out[f"state file {path.name}"] = path.read_bytes()
    records = [p for p in files if ".sqlite" in p.name]  # the record, its -wal and -shm
    out["modes"] = "\n".join(f"{oct(stat.S_IMODE(p.stat().st_mode))} {p.name}" for p in [work / "state", *records])
    sqlite = next(p for p in files if p.suffix == ".sqlite")
    [report] = run_infertop(("report", str(sqlite), "--out", str(work / "report")))
    assert report.returncode == 0, report.stderr
    out["report output"] = report.stdout + report.stderr
    for path in (work / "report").iterdir():
        out[f"report {path.name}"] = path.read_bytes()
    out["exporter page"] = exporter_page(sqlite)
    return out


def exporter_page(record: Path) -> str:
    """The exporter's /metrics text for the last recorded snapshot."""
    from prometheus_client import CollectorRegistry, generate_latest

    from infertop.monitor.exporter import SnapshotCollector
    from infertop.monitor.record.recording import Recording

    rec = Recording.load(record)
    try:
        snapshot = rec.snapshot(rec.ticks[-1].id)
    finally:
        rec.close()
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SnapshotCollector(lambda: snapshot))
    return generate_latest(registry).decode()


@pytest.mark.hostile
@pytest.mark.parametrize("kind", KINDS)
def test_no_secret_is_printed_or_stored(outputs: dict[str, str | bytes], kind: str) -> None:
    for where, data in outputs.items():
        assert_no_secret(kind, where, data)
    # the nodes did fail, and said where: the URL is shown, its secret masked
    text = outputs["snapshot text"]
    assert isinstance(text, str)
    assert f"error {kind}-500: HTTP 500 from http://" in text
    assert f"error {kind}-down: cannot connect to http://" in text
    assert "note every-secret-probe: engine http://***@" in text  # the probe's own fetch error
    assert "***" in text


@pytest.mark.hostile
def test_the_probe_redacts_an_error_that_quotes_the_password_without_its_url(
    outputs: dict[str, str | bytes],
) -> None:
    text = outputs["snapshot text"]
    assert isinstance(text, str)
    line = next(ln for ln in text.splitlines() if ln.startswith("note userinfo-password-noport: engine "))
    assert "nonnumeric port" in line and "***@127.0.0.1" in line
    assert_no_secret("userinfo-password", "the probe's note", line)


def test_state_directory_is_0700_and_record_files_0600(outputs: dict[str, str | bytes]) -> None:
    modes = outputs["modes"]
    assert isinstance(modes, str)
    lines = modes.splitlines()
    assert lines[0] == "0o700 state"
    assert lines[1:] and all(line.startswith("0o600 ") for line in lines[1:]), modes


# ----------------------------------------------------------------- layout errors


@pytest.mark.hostile
@pytest.mark.parametrize("kind", KINDS)
def test_layout_errors_never_echo_a_secret(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    # a URL the layout rejects (a bad port) is quoted in the error: never its secret
    bad = secret_url(kind, "127.0.0.1:99999")
    for table in (f'[[nodes]]\nname = "a"\nmetrics = ["{bad}"]\n', f'[prometheus]\nurl = "{bad}"\n'):
        layout = tmp_path / "layout.toml"
        layout.write_text(table)
        assert main(["snapshot", "--layout", str(layout)]) == 2
        err = capsys.readouterr().err
        assert "malformed URL" in err and "***" in err
        assert_no_secret(kind, "the layout error", err)


# ----------------------------------------------------------------- an existing state dir


def test_a_state_dir_open_to_other_users_is_reported(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    loose = state_dir()
    loose.mkdir(parents=True)
    loose.chmod(0o755)  # as an older infertop (or a umask of 022) left it
    layout = tmp_path / "layout.toml"
    layout.write_text('[cluster]\nname = "loose"\ninterval_s = 0.2\n\n[[nodes]]\nname = "a"\n')
    assert main(["record", "--layout", str(layout), "--duration", "0.5", "-q"]) == 0
    assert f"{loose} is open to other users" in caplog.text and "chmod 700" in caplog.text
    records = [p for p in loose.iterdir() if ".sqlite" in p.name]
    assert records and all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in records)


def test_an_older_open_record_is_made_private_when_resumed(tmp_path: Path) -> None:
    layout = tmp_path / "layout.toml"
    layout.write_text('[cluster]\nname = "older"\ninterval_s = 0.2\n\n[[nodes]]\nname = "a"\n')
    record = tmp_path / "older.sqlite"
    assert main(["record", "--layout", str(layout), "--record", str(record), "--duration", "0.5", "-q"]) == 0
    with sqlite3.connect(record) as conn:  # as a crash leaves it: not ended, so it resumes
        conn.execute("DELETE FROM meta WHERE key = 'ended_at'")
    record.chmod(0o644)  # as infertop before records were private made it
    assert main(["record", "--layout", str(layout), "--record", str(record), "--duration", "0.5", "-q"]) == 0
    assert stat.S_IMODE(record.stat().st_mode) == 0o600
