"""Soft delete (hidden, restorable) and hard forget (no trace left in any table)."""

from __future__ import annotations

from pathlib import Path

import pytest
from core_helpers import count, find_traces, raw, table_counts

from ctxbase import ContextBase, NotFoundError, ValidationError
from ctxbase.retrieve.tokenize import fts_match_expression, query_terms

SECRET = "zqxvault7 the launch code is 0451"
SECRET_TERM = "zqxvault7"


def _keyword_hits(cb: ContextBase, text: str) -> set[str]:
    match = fts_match_expression(query_terms(text))
    assert match is not None
    return {h.item_id for h in cb.store.keyword_search(cb.project, match, None, 50)}


def _vector_ids(cb: ContextBase) -> set[str]:
    assert cb.embedder is not None
    return {
        row.item_id
        for batch in cb.store.iter_vectors(cb.project, cb.embedder.name)
        for row in batch
    }


def _vector_blob(db_path: Path, item_id: str) -> bytes:
    conn = raw(db_path)
    row = conn.execute("SELECT vec FROM item_vectors WHERE item_id=?", (item_id,)).fetchone()
    conn.close()
    assert row is not None, f"no vector for {item_id}"
    return bytes(row[0])


def _scenario(cb: ContextBase) -> dict[str, str]:
    """A session with a secret in the middle, an entity it refers to, and unrelated data.
    Each event has an idempotency key (its name), so a test can retry its capture."""
    ids: dict[str, str] = {}
    ids["before"] = cb.record(
        "user_message", session_id="s1", text="please store this", idempotency_key="before"
    ).id
    ids["entity"] = cb.upsert_entity("document", "vault.md", "where the vault lives").id
    ids["secret"] = cb.record(
        "assistant_message",
        session_id="s1",
        text=SECRET,
        parent_event_ids=[ids["before"]],
        refers_to=[ids["entity"]],
        data={"note": SECRET},
        idempotency_key="secret",
    ).id
    ids["after"] = cb.record(
        "tool_result",
        session_id="s1",
        text="stored",
        parent_event_ids=[ids["secret"]],
        idempotency_key="after",
    ).id
    ids["other"] = cb.record(
        "user_message", session_id="s2", text="unrelated weather chat", idempotency_key="other"
    ).id
    cb.upsert_relationship(ids["entity"], "MENTIONS", ids["secret"], source="human")
    assert cb.wait_for_embeddings(timeout=30)
    return ids


# -- soft delete ------------------------------------------------------------------------


def test_soft_delete_hides_an_event_from_every_read_and_restore_brings_it_back(
    db_path: Path, cbv: ContextBase
) -> None:
    ids = _scenario(cbv)
    secret = ids["secret"]
    assert secret in _keyword_hits(cbv, SECRET_TERM)
    assert secret in _vector_ids(cbv)
    assert cbv.soft_delete([secret]) == 1

    with pytest.raises(NotFoundError):
        cbv.get_event(secret)
    assert secret not in [e.id for e in cbv.last_events("s1", 10)]
    # the chain shows where the hidden cause was, by id only, and goes on beyond it
    chain = cbv.causal_chain(ids["after"])
    assert [e.id for e in chain] == [secret, ids["before"]]
    assert chain[0].marks == ["hidden"] and chain[0].active is False
    assert SECRET not in chain[0].model_dump_json()
    assert chain[0].text is None and chain[0].data is None and chain[0].refers_to == []
    # and so do the effects: the hidden one by id only, the one it caused beyond it
    down = cbv.effects(ids["before"])
    assert [(e.id, e.marks) for e in down] == [(secret, ["hidden"]), (ids["after"], [])]
    assert SECRET not in down[0].model_dump_json()
    for node in (ids["before"], ids["after"], ids["entity"]):
        assert secret not in {h.node_id for h in cbv.neighbourhood(node, 2)}
        assert all(secret not in (r.from_id, r.to_id) for r in cbv.relationships(node))
    assert cbv.relationships(secret) == []
    assert _keyword_hits(cbv, SECRET_TERM) == set()
    assert secret not in _vector_ids(cbv)
    assert cbv.store.get_items(cbv.project, [secret]) == []
    # still in the file, so it can come back
    assert count(db_path, "events", "event_id=?", (secret,)) == 1
    assert cbv.get_event(secret, include_inactive=True).active is False

    assert cbv.restore([secret]) == 1
    assert cbv.get_event(secret).text == SECRET
    assert secret in [e.id for e in cbv.last_events("s1", 10)]
    assert secret in [e.id for e in cbv.causal_chain(ids["after"])]
    assert secret in {h.node_id for h in cbv.neighbourhood(ids["entity"], 1)}
    assert secret in _keyword_hits(cbv, SECRET_TERM)
    assert secret in _vector_ids(cbv)


def test_soft_delete_of_an_entity(cbv: ContextBase) -> None:
    ids = _scenario(cbv)
    ent = ids["entity"]
    assert cbv.soft_delete([ent]) == 1
    with pytest.raises(NotFoundError):
        cbv.get_entity(ent)
    assert ent not in {e.id for e in cbv.list_entities()}
    assert ent not in {h.node_id for h in cbv.neighbourhood(ids["secret"], 1)}
    assert ent not in _vector_ids(cbv)
    assert _keyword_hits(cbv, "vault.md lives") & {ent} == set()
    assert cbv.restore([ent]) == 1
    assert cbv.get_entity(ent).name == "vault.md"
    assert ent in {h.node_id for h in cbv.neighbourhood(ids["secret"], 1)}


def test_soft_delete_of_a_still_queued_event(cb: ContextBase) -> None:
    eid = cb.capture("user_message", session_id="s", text="just captured")
    assert eid is not None
    assert cb.soft_delete([eid]) == 1  # flushes first, so the queued event is covered
    assert cb.last_events("s") == []


# -- hard forget ------------------------------------------------------------------------


def _assert_no_trace(db_path: Path, needles: list[str | bytes]) -> None:
    assert find_traces(db_path, needles) == []


def test_forget_an_event_leaves_no_trace_in_any_table(db_path: Path, cbv: ContextBase) -> None:
    ids = _scenario(cbv)
    secret = ids["secret"]
    blob = _vector_blob(db_path, secret)
    needles: list[str | bytes] = [secret, SECRET_TERM, "launch code", blob]
    # the needles are really there before, in the tables the scan is meant to cover
    tables_before = {t for t, _ in find_traces(db_path, needles)}
    assert {
        "events",
        "items",
        "item_vectors",
        "relations",
        "item_fts_content",
        "item_fts_data",
    } <= tables_before
    counts_before = table_counts(db_path)

    report = cbv.forget(event_ids=[secret])

    _assert_no_trace(db_path, needles)
    assert report.removed["events"] == 1
    assert report.removed["items"] == 1
    assert report.removed["item_fts"] == 1
    assert report.removed["item_vectors"] == 1
    # CAUSED_BY to before, from after, REFERS_TO the entity, NEXT in and out, MENTIONS
    assert report.removed["relations"] == 6
    after = table_counts(db_path)
    assert counts_before["events"] - after["events"] == 1
    assert counts_before["relations"] - after["relations"] == 6
    # everything else is intact
    assert cbv.get_event(ids["before"]).text == "please store this"
    assert cbv.get_event(ids["after"]).parent_event_ids == []
    assert ids["other"] in _keyword_hits(cbv, "weather")
    assert ids["before"] in _vector_ids(cbv)
    assert cbv.get_entity(ids["entity"]).name == "vault.md"
    # the session keeps growing from its new tail
    nxt = cbv.record("user_message", session_id="s1", text="next one")
    assert cbv.neighbourhood(nxt.id, 1, types=["NEXT"])[0].node_id == ids["after"]


def test_forgotten_event_is_not_brought_back_by_a_stale_retry(
    db_path: Path, cbv: ContextBase
) -> None:
    ids = _scenario(cbv)
    cbv.forget(event_ids=[ids["secret"]])
    again = cbv.capture(
        "assistant_message",
        session_id="s1",
        text=SECRET,
        parent_event_ids=[ids["before"]],
        refers_to=[ids["entity"]],
        data={"note": SECRET},
        idempotency_key="secret",
    )
    assert again == ids["secret"]  # the retry names the same capture
    cbv.flush()
    cbv.record_events(
        [
            cbv.get_event(ids["before"]).model_copy(
                update={"id": ids["secret"], "text": SECRET, "parent_event_ids": []}
            )
        ]
    )
    assert cbv.wait_for_embeddings(timeout=30)
    _assert_no_trace(db_path, [ids["secret"], SECRET_TERM])
    with pytest.raises(NotFoundError):
        cbv.get_event(ids["secret"], include_inactive=True)


def test_forget_a_session(db_path: Path, cbv: ContextBase) -> None:
    ids = _scenario(cbv)
    session_events = [ids["before"], ids["secret"], ids["after"]]
    report = cbv.forget(session_id="s1")
    _assert_no_trace(db_path, [*session_events, SECRET_TERM, "please store this"])
    assert count(db_path, "sessions", "session_id='s1'") == 0
    assert report.removed["events"] == 3
    assert report.removed["sessions"] == 1
    with pytest.raises(NotFoundError):  # the session is gone with its events
        cbv.last_events("s1")
    assert [e.id for e in cbv.last_events("s2")] == [ids["other"]]
    assert cbv.get_entity(ids["entity"]).name == "vault.md"
    # a stale retry of any of its events stays out
    cbv.capture("user_message", session_id="s1", text="please store this", idempotency_key="before")
    cbv.flush()
    assert count(db_path, "events", "session_id='s1'") == 0
    # a new capture of the same text is a new event
    new = cbv.record("user_message", session_id="s1", text="please store this")
    assert new.id != ids["before"] and new.seq == 1
    assert [e.id for e in cbv.last_events("s1")] == [new.id]


def test_forget_an_entity(db_path: Path, cbv: ContextBase) -> None:
    ids = _scenario(cbv)
    ent = ids["entity"]
    blob = _vector_blob(db_path, ent)
    report = cbv.forget(entity_ids=[ent])
    _assert_no_trace(db_path, [ent, "where the vault lives", blob])
    assert report.removed["entities"] == 1
    assert report.removed["relations"] == 2  # REFERS_TO and MENTIONS
    assert cbv.get_event(ids["secret"]).refers_to == []
    with pytest.raises(NotFoundError):
        cbv.get_entity(ent)


def test_forget_the_whole_project(db_path: Path, open_base: object, cbv: ContextBase) -> None:
    ids = _scenario(cbv)
    keep = cbv.record(
        "user_message", session_id="s1", text="zqxkeepme in project two", project="two"
    )
    assert cbv.wait_for_embeddings(timeout=30)
    report = cbv.forget(whole_project=True)
    needles: list[str | bytes] = [*ids.values(), SECRET_TERM, "weather", "vault.md"]
    _assert_no_trace(db_path, needles)
    assert report.removed["events"] == 4
    assert report.removed["entities"] == 1
    assert report.total > 10
    conn = raw(db_path)
    for table in ("events", "entities", "relations", "items", "item_vectors", "sessions"):
        n = conn.execute(f"SELECT count(*) FROM {table} WHERE project_id='p'").fetchone()[0]
        assert n == 0, table
    conn.close()
    # the other project is untouched
    assert cbv.get_event(keep.id, project="two").text == "zqxkeepme in project two"
    assert count(db_path, "item_fts") == count(db_path, "items")
    # a stale retry after forgetting the project stays out too
    cbv.capture(
        "user_message", session_id="s2", text="unrelated weather chat", idempotency_key="other"
    )
    cbv.flush()
    assert count(db_path, "events", "project_id='p'") == 0
    # new captures are stored again
    assert cbv.record("user_message", session_id="s2", text="unrelated weather chat").seq == 1


def test_forget_needs_a_target(cb: ContextBase) -> None:
    with pytest.raises(ValidationError) as exc:
        cb.forget()
    assert exc.value.field == "forget"


def test_forget_flushes_queued_events_first(db_path: Path, cb: ContextBase) -> None:
    eid = cb.capture("user_message", session_id="s", text="zqxqueued secret")
    assert eid is not None
    report = cb.forget(event_ids=[eid])
    assert report.removed["events"] == 1
    cb.flush()
    _assert_no_trace(db_path, [eid, "zqxqueued"])


def test_a_hard_forget_in_the_middle_of_a_chain_cuts_it(cb: ContextBase) -> None:
    # README's forget section says so: the forgotten event's edges go with it
    ask = cb.record("user_message", session_id="s", text="why is the orders query slow?")
    plan = cb.record("assistant_message", session_id="s", text="plan", parent_event_ids=[ask.id])
    call = cb.record("tool_invocation", session_id="s", text="run_sql", parent_event_ids=[plan.id])
    result = cb.record("tool_result", session_id="s", text="1 row", parent_event_ids=[call.id])
    assert [e.id for e in cb.causal_chain(result.id)] == [call.id, plan.id, ask.id]
    cb.forget(event_ids=[call.id])
    assert cb.causal_chain(result.id) == []
    assert [e.id for e in cb.causal_chain(plan.id)] == [ask.id]
    assert [e.id for e in cb.effects(ask.id)] == [plan.id]
