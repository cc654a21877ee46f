"""Hard forget leaves nothing behind: capture a unique marker, search it, assemble contexts
that use it (in its own session and in another one), forget, then look for the marker and
the forgotten ids in the raw SQLite file (after checkpoint + VACUUM) or in every column of
every PostgreSQL table. Traces of other sessions are redacted, not deleted."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from ctxbase import ContextBase, NotFoundError
from ctxbase.store.sqlite import SQLiteStore
from ctxbase.store.trace_redaction import REDACTED
from residue import postgres_copies, sqlite_file_copies, sqlite_file_copies_where


def _marker() -> tuple[str, str, str]:
    """A distinctive ASCII name (only letters: the name rule keeps it whole), its keyword
    term, and a distinctive Chinese phrase, unique per test (PostgreSQL is shared)."""
    # ends in "qz", which no stemming rule touches: the keyword term is the name lowercased
    # (a random ending such as "...ge" was stemmed, and the term then missed)
    letters = "".join(chr(ord("a") + int(c, 16)) for c in uuid.uuid4().hex[:10]) + "qz"
    zh = "机密" + "".join(chr(0x4E00 + int(c, 16) * 97 + 11) for c in uuid.uuid4().hex[:4])
    return f"Zqx{letters}", f"zqx{letters}", zh + "火烈鸟协议"


def copies(cb: ContextBase, needles: list[str], pg_url: str | None) -> dict[str, Any]:
    """Needle -> copies found (SQLite: bytes in the file; PostgreSQL: columns holding it)."""
    if isinstance(cb.store, SQLiteStore):
        counts = sqlite_file_copies(cb.store.path, needles)
        out: dict[str, Any] = {str(n): c for n, c in counts.items() if c}
        if out:
            out["tables"] = sqlite_file_copies_where(cb.store.path, needles)
        return out
    assert pg_url is not None
    found: dict[str, Any] = {}
    for table, column, needle in postgres_copies(pg_url, needles, project_id=cb.project):
        found.setdefault(needle, []).append(f"{table}.{column}")
    return found


def _pg(backend: str, request: pytest.FixtureRequest) -> str | None:
    return str(request.getfixturevalue("pg_url")) if backend == "postgres" else None


def _scenario(cb: ContextBase, marker: str, zh: str) -> dict[str, Any]:
    """Session s-gone holds the marker (in messages, a task title, extracted facts); session
    s-keep only asks about it. Both assemble contexts that pull the marker in."""
    m = cb.context_manager()
    gone = m.create_session(session_id="s-gone")
    task = m.switch_task(gone, f"plan the {marker} launch")
    e1 = m.add_message(gone, "user", f"my name is {marker}. 预算控制在5万以内, 代号{zh}")
    e2 = m.add_message(gone, "assistant", f"noted, {marker}: the {zh} budget stays low")
    keep = m.create_session(session_id="s-keep")
    k1 = m.add_message(keep, "user", "which budget limit did we agree on? 预算是多少")
    assert cb.wait_for_embeddings(timeout=30)
    hits = {c.item.owner_id for c in cb.search(marker.lower()).results}
    assert {e1, e2} <= hits
    own = cb.assemble_context(agent_role="coder", user_intent=f"{marker} 预算", session_id=gone)
    other = cb.assemble_context(
        agent_role="coder", user_intent="预算 budget 火烈鸟协议", session_id=keep
    )
    used = set(other.included_ids) | {c["id"] for c in other.trace["candidates"]}
    assert used & {e1, e2}, "the other session's context must use a forgotten event"
    return {"e1": e1, "e2": e2, "k1": k1, "task": task, "own": own, "other": other}


def test_forget_a_session_leaves_no_copy_anywhere(
    cb: ContextBase, backend: str, request: pytest.FixtureRequest
) -> None:
    pg_url = _pg(backend, request)
    marker, term, zh = _marker()
    s = _scenario(cb, marker, zh)
    needles = [marker, term, zh, s["e1"], s["e2"], s["task"]]
    before = copies(cb, needles, pg_url)
    assert {marker, term, zh, s["e1"]} <= set(before)  # the scan does see them

    report = cb.forget(session_id="s-gone")

    assert report.removed["events"] == 2
    assert report.removed["traces"] == 1  # the session's own assembly
    assert report.redacted["traces"] == 1  # the other session's assembly
    assert report.removed["tasks"] == 1
    # the task's extracted facts (name, budget) and their history
    assert report.removed["state"] >= 2 and report.removed["state_history"] >= 2
    with pytest.raises(NotFoundError):
        cb.get_trace(s["own"].context_id)
    kept = cb.get_trace(s["other"].context_id)
    text = json.dumps(kept, ensure_ascii=False)
    for needle in needles:
        assert needle not in text
    assert REDACTED in text
    # the rest of the other trace is still there and usable
    assert kept["session_id"] == "s-keep" and kept["layers"]["history"]["items"]
    assert s["k1"] in text
    assert cb.store.get_state(cb.project, "task", s["task"]) == []
    assert copies(cb, needles, pg_url) == {}


def test_forget_events_redacts_the_traces_that_used_them(
    cb: ContextBase, backend: str, request: pytest.FixtureRequest
) -> None:
    pg_url = _pg(backend, request)
    marker, _term, zh = _marker()
    s = _scenario(cb, marker, zh)
    e1_text = cb.get_event(s["e1"]).text
    assert e1_text is not None
    # an assembly whose intent is the message itself (capture, then assemble for it)
    echo = cb.assemble_context(agent_role="coder", user_intent=e1_text, session_id="s-keep")

    report = cb.forget(event_ids=[s["e1"], s["e2"]])

    assert report.removed["events"] == 2
    assert report.redacted["traces"] == 3
    # facts extracted from the message go with it (their causes quote it)
    assert report.removed["state"] >= 2
    for ctx in (s["own"], s["other"], echo):
        text = json.dumps(cb.get_trace(ctx.context_id), ensure_ascii=False)
        assert s["e1"] not in text and s["e2"] not in text and zh not in text
    assert cb.get_trace(echo.context_id)["intent"] == REDACTED
    # the task title still names the marker (it is the task's, not the messages'): only
    # the message ids, texts and what came from them must be gone
    needles = [zh, s["e1"], s["e2"], f"my name is {marker}"]
    assert copies(cb, needles, pg_url) == {}


def test_forget_an_entity_and_what_was_anchored_from_a_forgotten_message(
    cb: ContextBase, backend: str, request: pytest.FixtureRequest
) -> None:
    pg_url = _pg(backend, request)
    marker, term, _zh = _marker()
    code = f"def {term}_rate(limit):\n    return limit * 7  # {marker}\n"
    ev = cb.record("assistant_message", session_id="s1", text=f"here:\n```python\n{code}```")
    anchored = cb.anchor_message(ev.id)
    assert anchored.entity_ids
    assert cb.wait_for_embeddings(timeout=30)
    cb.record("user_message", session_id="s2", text="what does the rate helper return?")
    # (an intent typed in another session is that session's input: it names no marker here)
    ctx = cb.assemble_context(agent_role="coder", user_intent="rate limit", session_id="s2")
    assert set(ctx.included_ids) & ({ev.id} | set(anchored.entity_ids))

    report = cb.forget(event_ids=[ev.id])

    # the snippet entities were copies of the message's code
    assert report.removed["entities"] == len(anchored.entity_ids)
    assert report.redacted["traces"] == 1
    needles = [marker, term, ev.id, *anchored.entity_ids]
    assert copies(cb, needles, pg_url) == {}


def test_forget_the_whole_project_leaves_no_copy(
    cb: ContextBase, backend: str, request: pytest.FixtureRequest
) -> None:
    pg_url = _pg(backend, request)
    marker, term, zh = _marker()
    s = _scenario(cb, marker, zh)
    report = cb.forget(whole_project=True)
    assert report.removed["traces"] == 2
    needles = [marker, term, zh, s["e1"], s["e2"], s["k1"], s["task"]]
    assert copies(cb, needles, pg_url) == {}


def test_sqlite_forget_leaves_no_bytes_behind_without_a_vacuum(tmp_path: Path) -> None:
    """Deleted cells and freed pages are zeroed even where SQLite was built without secure
    delete by default, and the forget empties the WAL: straight after it, with the base
    still open, neither file holds a copy."""
    path = tmp_path / "secure.db"
    cb = ContextBase(str(path), project="p", embedder="hash", background_embedding=False)
    try:
        cb.store._conn().execute("PRAGMA secure_delete = OFF")  # the thread forget runs in
        marker, term, zh = _marker()
        s = _scenario(cb, marker, zh)
        cb.forget(session_id="s-gone")
        assert cb.store._conn().execute("PRAGMA secure_delete").fetchone()[0] == 0
        files = [Path(f"{path}{x}") for x in ("", "-wal")]
        data = b"".join(f.read_bytes() for f in files if f.exists())
        for needle in (marker, term, zh, s["e1"], s["e2"]):
            assert data.count(needle.encode()) == 0, needle
    finally:
        cb.close()


def _entries(value: Any) -> list[dict[str, Any]]:
    """Every dict in a trace, nested ones included."""
    if isinstance(value, dict):
        return [value, *(e for v in value.values() for e in _entries(v))]
    if isinstance(value, list):
        return [e for v in value for e in _entries(v)]
    return []


def test_a_redacted_entry_keeps_no_reason_naming_the_words_it_shared(cb: ContextBase) -> None:
    gone = cb.record("user_message", session_id="s1", text="The refund column is refund_cents.")
    cb.record("user_message", session_id="s1", text="Lunch is at noon on Fridays.")
    assert cb.wait_for_embeddings(timeout=30)
    ctx = cb.assemble_context(
        agent_role="coder", user_intent="which refund column", session_id="s2"
    )
    before = [e for e in _entries(ctx.trace) if e.get("id") == gone.id and e.get("reasons")]
    assert any("'refund'" in r for e in before for r in e["reasons"]), before  # it did say

    cb.forget(event_ids=[gone.id])
    about = [e for e in _entries(cb.get_trace(ctx.context_id)) if e.get("id") == REDACTED]
    assert about
    for entry in about:
        assert all(r == REDACTED for r in entry.get("reasons", [])), entry
        assert REDACTED not in entry.get("strategies", [])  # strategy names stay readable
    assert any(entry.get("strategies") for entry in about)
