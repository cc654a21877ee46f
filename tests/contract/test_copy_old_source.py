"""A copy reads its source and never upgrades it (store/read_source.py), and a store that is
upgraded on opening says so once (a WARNING on `ctxbase.store`, shown on stderr).

An older SQLite backup is read through an upgraded temporary copy, the file left byte for
byte as it was (the release that wrote it can still open it); an older PostgreSQL source is
refused with what to do."""

from __future__ import annotations

import hashlib
import logging
import os
import sqlite3
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

from ctxbase.cli import main
from ctxbase.errors import StorageError
from ctxbase.store import open_store
from ctxbase.store.base import SCHEMA_VERSION
from ctxbase.store.read_source import open_for_reading, sqlite_schema_version
from ctxbase.store.sqlite import SQLiteStore

OLD = 7


def _run(capsys: Any, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def _old_backup(capsys: Any, path: Path, project: str) -> str:
    """A SQLite file at schema 7 holding two messages of `project`, closed (no WAL left)."""
    base = ("--db", str(path), "--project", project, "--embedder", "none", "-q")
    for text in ("the walrus code is 42", "and the ledger is zqxpay"):
        assert _run(capsys, *base, "capture", "--session", "s1", "--text", text)[0] == 0
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(OLD),))
    conn.close()
    for suffix in ("-wal", "-shm"):
        assert not os.path.exists(f"{path}{suffix}")
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_an_older_backup_is_read_and_left_as_it_was(
    tmp_path: Path, capsys: Any, caplog: pytest.LogCaptureFixture, project_id: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    bak, new = tmp_path / "bak.db", tmp_path / "new.db"
    digest = _old_backup(capsys, bak, project_id)
    caplog.set_level(logging.WARNING, logger="ctxbase.store")

    code, out, err = _run(capsys, "--project", project_id, "migrate-data",
                          "--from", str(bak), "--to", str(new))  # fmt: skip
    assert code == 0 and "differs" not in out, (out, err)
    rows = {line.split()[0]: line.split() for line in out.splitlines() if " source " in line}
    assert rows["events"][1:6] == ["source", "2", "written", "2", "destination"]
    assert hashlib.sha256(bak.read_bytes()).hexdigest() == digest  # not written at all
    assert sqlite_schema_version(str(bak)) == OLD
    assert sorted(os.listdir(tmp_path)) == ["bak.db", "new.db", "scratch"]  # no WAL beside
    assert os.listdir(scratch) == []  # the temporary copy is removed
    messages = [r.getMessage() for r in caplog.records if r.name == "ctxbase.store"]
    assert messages == [
        f"{bak} is at schema {OLD}: reading an upgraded temporary copy of it "
        f"(schema {SCHEMA_VERSION}); the file itself is left as it is"
    ]
    copy = SQLiteStore(str(new))
    try:
        assert copy.schema_version() == SCHEMA_VERSION
        texts = {e.text for e in copy.list_events(project_id, "s1")}
        assert texts == {"the walrus code is 42", "and the ledger is zqxpay"}
    finally:
        copy.close()


def test_quiet_leaves_the_warnings_out_and_the_errors_in(
    tmp_path: Path, capsys: Any, project_id: str
) -> None:
    # -q: no temporary-copy line (nor any WARNING) on stderr; an error is still said
    bak = tmp_path / "bak.db"
    _old_backup(capsys, bak, project_id)
    src = str(Path(__file__).resolve().parents[2] / "src")
    env = {**os.environ, "PYTHONPATH": src}

    def copy(project: str, to: str, *argv: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "ctxbase", "--project", project, "migrate-data"]
        command += ["--from", str(bak), "--to", str(tmp_path / to), *argv]
        return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)

    loud = copy(project_id, "loud.db")
    assert loud.returncode == 0, loud.stderr
    assert "reading an upgraded temporary copy" in loud.stderr
    quiet = copy(project_id, "quiet.db", "-q")
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stderr == ""
    assert " source " in quiet.stdout  # the report is still printed
    # a project the file does not hold: found after the temporary copy is read
    missing = copy("nope", "none.db", "-q")
    assert missing.returncode != 0 and missing.stderr.startswith("error: "), missing.stderr
    assert "temporary copy" not in missing.stderr
    assert sqlite_schema_version(str(bak)) == OLD


def test_an_older_backup_copied_into_itself_is_refused_untouched(
    tmp_path: Path, capsys: Any, project_id: str
) -> None:
    bak = tmp_path / "bak.db"
    digest = _old_backup(capsys, bak, project_id)
    os.symlink(bak, tmp_path / "link.db")
    for target in (str(bak), str(tmp_path / "link.db")):
        code, _, err = _run(capsys, "--project", project_id, "-q", "migrate-data",
                            "--from", str(bak), "--to", target)  # fmt: skip
        assert code == 2 and "is the --from database itself" in err
    assert hashlib.sha256(bak.read_bytes()).hexdigest() == digest


def test_a_store_upgraded_on_opening_says_so_once(
    tmp_path: Path, capsys: Any, caplog: pytest.LogCaptureFixture, project_id: str
) -> None:
    db = tmp_path / "old.db"
    _old_backup(capsys, db, project_id)
    caplog.set_level(logging.WARNING, logger="ctxbase.store")
    SQLiteStore(str(db)).close()
    SQLiteStore(str(db)).close()  # current now: nothing to say
    SQLiteStore(str(tmp_path / "new.db")).close()  # a new database is no upgrade
    messages = [r.getMessage() for r in caplog.records if r.name == "ctxbase.store"]
    assert messages == [
        f"upgraded {db} from schema {OLD} to {SCHEMA_VERSION}; older versions of ctxbase "
        "cannot open it"
    ]
    assert sqlite_schema_version(str(db)) == SCHEMA_VERSION


def test_the_upgrade_line_is_on_stderr_of_any_command(
    tmp_path: Path, capsys: Any, project_id: str
) -> None:
    db = tmp_path / "old.db"
    _old_backup(capsys, db, project_id)
    src = str(Path(__file__).resolve().parents[2] / "src")
    env = {**os.environ, "PYTHONPATH": src}
    argv = [sys.executable, "-m", "ctxbase", "--db", str(db), "--project", project_id, "status"]
    first = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert first.returncode == 0, first.stderr
    line = f"upgraded {db} from schema {OLD} to {SCHEMA_VERSION}; older versions of ctxbase"
    assert line in first.stderr and line not in first.stdout
    again = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0 and "upgraded" not in again.stderr


def test_an_older_postgresql_source_is_refused_not_upgraded(
    pg_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture, project_id: str
) -> None:
    import psycopg

    from ctxbase.store.postgres import PostgresStore

    name = f"old_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")  # type: ignore[arg-type]  # a test's literal
    parts = urlsplit(pg_url)
    url = urlunsplit(parts._replace(path=f"/{name}"))
    try:
        PostgresStore(url, max_size=1).close()
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("UPDATE meta SET value=%s WHERE key='schema_version'", (str(OLD),))
        refused = pytest.raises(StorageError, match=f"the source database is at schema {OLD}")
        with refused as exc, open_for_reading(url, open_store):
            pass
        assert "Upgrade it first" in str(exc.value) and url not in str(exc.value)
        with psycopg.connect(url, autocommit=True) as conn:
            row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        assert row is not None and row[0] == str(OLD)
        # opened as a store (not as a copy's source), it is upgraded, and says so
        caplog.set_level(logging.WARNING, logger="ctxbase.store")
        PostgresStore(url, max_size=1).close()
        messages = [r.getMessage() for r in caplog.records if r.name == "ctxbase.store"]
        (message,) = messages  # names the database, never the URL
        assert message.startswith(f"upgraded PostgreSQL database {name!r} on ")
        assert message.endswith(
            f" from schema {OLD} to {SCHEMA_VERSION}; older versions of ctxbase cannot open it"
        )
        assert url not in message and (parts.password or "\0") not in message
        with open_for_reading(url, open_store) as store:  # current now: read as it is
            assert store.schema_version() == SCHEMA_VERSION
    finally:
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name}")  # type: ignore[arg-type]
