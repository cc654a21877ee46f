"""A copy carries its source's pending upgrade steps: an older backup (schema 7) holding
tool-call turns stored with no text, copied by `migrate-data` into a new database of either
backend, gives those turns their calls' text (`run_sql(sql=...)`) when a base first opens
the destination, as opening the backup itself would."""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

from ctxbase import ContextBase
from ctxbase.capture.tool_calls import TEXT_FROM, TOOL_CALLS
from ctxbase.cli import main
from ctxbase.store import open_store
from ctxbase.store.base import TOOL_CALL_TEXTS
from ctxbase.store.sqlite import SQLiteStore

SQL = "SELECT customer_id FROM orders_2024 WHERE status = 'paid'"
ARGS = json.dumps({"sql": SQL})
SHOWN = f'run_sql(sql="{SQL}")'


def _old_backup(path: Path, project: str) -> tuple[str, str]:
    """A SQLite file at schema 7 with a tool-call turn and its call as such a turn was once
    stored (no text, the data {"tool_calls": 1}; the call as `run_sql({...})`)."""
    with ContextBase(SQLiteStore(str(path)), project=project, embedder=None) as cb:
        ask = cb.record("user_message", session_id="s", text="totals per customer?")
        turn = cb.record(
            "assistant_message", session_id="s", data={"tool_calls": 1}, parent_event_ids=[ask.id]
        )
        call = cb.record(
            "tool_invocation",
            session_id="s",
            text=f"run_sql({ARGS})",
            data={"tool": "run_sql", "arguments": ARGS, "call_id": "call_1"},
            parent_event_ids=[turn.id],
        )
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE meta SET value='7' WHERE key='schema_version'")
    conn.close()
    return turn.id, call.id


@pytest.fixture(params=["sqlite", "postgres"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A new destination database of each backend."""
    if request.param == "sqlite":
        yield str(tmp_path / "new.db")
        return
    import psycopg

    pg_url = request.getfixturevalue("pg_url")
    name = f"copy_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")  # type: ignore[arg-type]  # a test's literal
    try:
        yield urlunsplit(urlsplit(pg_url)._replace(path=f"/{name}"))
    finally:
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")  # type: ignore[arg-type]


def test_a_copy_of_an_older_backup_gives_its_tool_call_turns_their_text(
    tmp_path: Path, capsys: Any, project_id: str, target: str
) -> None:
    bak = tmp_path / "bak.db"
    turn, call = _old_backup(bak, project_id)
    code = main(["--project", project_id, "-q", "migrate-data", "--from", str(bak), "--to", target])
    out = capsys.readouterr()
    assert code == 0 and "differs" not in out.out, (out.out, out.err)
    store = open_store(target)  # the store alone: the step is recorded, not done
    try:
        assert store.pending_upgrades() == frozenset({TOOL_CALL_TEXTS})
        (copied,) = store.get_events(project_id, [turn])
        assert copied.text is None and copied.data == {"tool_calls": 1}
    finally:
        store.close()
    with ContextBase(open_store(target), project=project_id, embedder=None) as cb:
        assert cb.store.pending_upgrades() == frozenset()  # done on opening
        event = cb.get_event(turn)
        assert event.text == SHOWN and event.metadata[TEXT_FROM] == TOOL_CALLS
        assert cb.get_event(call).text == SHOWN
        (item,) = cb.store.get_items(project_id, [turn])
        assert "orders_2024" in item.terms.split() and "tool_calls" not in item.terms


def test_a_copy_of_a_current_store_marks_no_step(
    tmp_path: Path, capsys: Any, project_id: str
) -> None:
    src, new = tmp_path / "src.db", tmp_path / "new.db"
    with ContextBase(SQLiteStore(str(src)), project=project_id, embedder=None) as cb:
        cb.record("user_message", session_id="s", text="hello")
    code = main(
        ["--project", project_id, "-q", "migrate-data", "--from", str(src), "--to", str(new)]
    )
    assert code == 0, capsys.readouterr()
    store = SQLiteStore(str(new))
    try:
        assert store.pending_upgrades() == frozenset()
    finally:
        store.close()
