"""Soft-deleted rows are forgotten after a retention (purge_soft_deleted), the in-memory
caches are dropped by a forget, and the CLI shows the whole report."""

from __future__ import annotations

import json
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from test_forget_residue import copies

from ctxbase import ContextBase, NotFoundError, ValidationError
from ctxbase.cli import main
from ctxbase.retrieve import indexing
from residue import sqlite_file_copies


def _pg(backend: str, request: pytest.FixtureRequest) -> str | None:
    return str(request.getfixturevalue("pg_url")) if backend == "postgres" else None


def test_purge_forgets_what_was_soft_deleted_longer_ago(
    cb: ContextBase, backend: str, request: pytest.FixtureRequest
) -> None:
    old = cb.record("user_message", session_id="s1", text="zqxoldpurge the old secret")
    new = cb.record("user_message", session_id="s1", text="zqxnewpurge the newer secret")
    back = cb.record("user_message", session_id="s1", text="zqxrestored comes back")
    ent = cb.upsert_entity("document", "zqxpurgedoc.md", "zqxpurgedoc body")
    assert cb.wait_for_embeddings(timeout=30)
    ctx = cb.assemble_context(agent_role="coder", user_intent="secret", session_id="s1")
    assert cb.soft_delete([old.id, back.id, ent.id]) == 3
    assert cb.restore([back.id]) == 1
    # margins a loaded machine keeps: old is 3 s hidden, new well under 1.5 s at the purge
    time.sleep(3.0)
    assert cb.soft_delete([old.id]) == 0  # a repeat does not restart the retention
    assert cb.soft_delete([new.id]) == 1
    assert cb.purge_soft_deleted(3600).total == 0  # nothing is that old

    report = cb.purge_soft_deleted(timedelta(seconds=1.5))

    assert report.removed["events"] == 1 and report.removed["entities"] == 1
    with pytest.raises(NotFoundError):
        cb.get_event(old.id, include_inactive=True)
    assert cb.get_event(new.id, include_inactive=True).active is False
    assert cb.get_event(back.id).active is True
    assert old.id not in json.dumps(cb.get_trace(ctx.context_id))
    needles = ["zqxoldpurge", "zqxpurgedoc", old.id, ent.id]
    assert copies(cb, needles, _pg(backend, request)) == {}
    # the rest of the retention runs out later
    assert cb.purge_soft_deleted(0).removed["events"] == 1
    assert cb.get_event(back.id).text == "zqxrestored comes back"


def test_purge_needs_a_valid_retention(cb: ContextBase) -> None:
    for bad in (-1, "soon", float("nan")):
        with pytest.raises(ValidationError) as exc:
            cb.purge_soft_deleted(bad)  # type: ignore[arg-type]
        assert exc.value.field == "older_than"
    assert cb.purge_soft_deleted("30d").total == 0


def test_forget_drops_the_in_memory_copies(tmp_path: Path) -> None:
    cb = ContextBase(str(tmp_path / "c.db"), project="p", embedder="hash",
                     background_embedding=False)  # fmt: skip
    try:
        text = "zqxcached the cached secret text"
        ev = cb.record("user_message", session_id="s1", text=text)
        assert cb.wait_for_embeddings(timeout=30)
        cb.search("zqxcached secret")
        assert "zqxcached secret" in cb.searcher._query_vectors
        assert any(ev.id in loaded.rows.ids for loaded in cb.searcher.vectors._cache.values())
        assert indexing._analysed.cache_info().currsize > 0  # the text's analysis

        report = cb.forget(event_ids=[ev.id])

        assert report.caches["query_vectors"] >= 1
        assert report.caches["vector_index"] >= 1
        assert report.caches["text_analysis"] >= 1
        assert cb.searcher._query_vectors == {}
        assert not cb.searcher.vectors._cache
        assert indexing._analysed.cache_info().currsize == 0
    finally:
        cb.close()


def test_cli_forget_prints_the_whole_report(tmp_path: Path, capsys: Any) -> None:
    db = str(tmp_path / "cli.db")
    base = ["--db", db, "--project", "p", "--embedder", "none"]
    assert main([*base, "capture", "--session", "s1", "--text", "zqxcli secret"]) == 0
    capsys.readouterr()
    assert main([*base, "forget", "--session", "s1"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["removed"]["events"] == 1
    assert set(out) == {
        "removed", "redacted", "caches", "total", "not_found", "already_forgotten",
        "sources_forgotten", "sources_still_visible", "same_text_still_visible", "repos",
    }  # fmt: skip
    assert out["not_found"] == []
    assert main([*base, "forget", "--soft-deleted-older-than", "30d", "--all-projects"]) == 0
    assert json.loads(capsys.readouterr().out)["total"] == 0
    assert main([*base, "forget", "--soft-deleted-older-than", "soon"]) == 2
    assert (
        "error: --soft-deleted-older-than: must be a duration such as 3600, 12h or 30d "
        "(got 'soon')" in capsys.readouterr().err
    )
    assert main([*base, "forget", "--session", "s1", "--all-projects"]) == 2
    assert sqlite_file_copies(db, ["zqxcli"]) == {"zqxcli": 0}


def test_retention_restarts_for_a_row_that_came_back_without_restore(cb: ContextBase) -> None:
    ent = cb.upsert_entity("document", "spec.md", "first version")
    assert cb.soft_delete([ent.id]) == 1
    time.sleep(0.6)
    # re-ingested: the upsert brings it back (active) without restore()
    again = cb.upsert_entity("document", "spec.md", "second version")
    assert again.id == ent.id and cb.get_entity(ent.id).active
    assert cb.soft_delete([ent.id]) == 1
    assert cb.purge_soft_deleted(0.4).total == 0  # hidden again only just now
    (kept,) = cb.store.get_entities(cb.project, [ent.id], include_inactive=True)
    assert kept.text == "second version"
