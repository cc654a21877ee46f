"""Schema 8 on both backends: a store written before tool-call turns read as their calls
(such a turn stored with no text and the data {"tool_calls": n}, its search text that JSON)
gets, on opening, the turn's text rendered from its calls, its keyword terms and the context
terms of the item after it rewritten, and its vector dropped for the embedding worker; its
calls, stored in the old rendering, get capture's current one the same way. A
hidden turn is left as it was, the step runs once, and a store without such turns skips it."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from contract_helpers import fresh_database

from ctxbase import ContextBase
from ctxbase.capture.tool_calls import TEXT_FROM, TOOL_CALLS
from ctxbase.retrieve.embed.registry import get_embedder
from ctxbase.retrieve.keyword_index import KeywordIndex
from ctxbase.retrieve.tokenize import fts_match_expression, query_terms
from ctxbase.store.base import SCHEMA_VERSION, TOOL_CALL_TEXTS, Store

BACKENDS = ("sqlite", "postgres")
SQL = "SELECT customer_id\nFROM orders_2024 WHERE status = 'paid'"
ARGS = json.dumps({"sql": SQL})
SHOWN = f'run_sql(sql="{SQL}")'


def _store_query(store: Store, query: str) -> list[str]:
    match = fts_match_expression(query_terms(query), "or")
    assert match is not None
    return [h.item_id for h in store.keyword_search("p", match, None, 10)]


def _old_turn(cb: ContextBase, session: str, call_id: str) -> tuple[str, str, str]:
    """A question, then a tool-call turn and its call as such a turn was once stored."""
    ask = cb.record("user_message", session_id=session, text="totals per customer?")
    turn = cb.record(
        "assistant_message",
        session_id=session,
        agent_id="assistant",
        data={"tool_calls": 1},
        parent_event_ids=[ask.id],
    )
    call = cb.record(
        "tool_invocation",
        session_id=session,
        agent_id="assistant",
        text=f"run_sql({ARGS})",
        data={"tool": "run_sql", "arguments": ARGS, "call_id": call_id},
        parent_event_ids=[turn.id],
    )
    cb.record(
        "tool_result",
        session_id=session,
        agent_id="tool",
        agent_role="tool",
        text="c1\nc2",
        metadata={"call_id": call_id},
        parent_event_ids=[call.id],
    )
    return ask.id, turn.id, call.id


def _history(call_id: str) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "totals per customer?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": call_id, "function": {"name": "run_sql", "arguments": ARGS}}],
        },
        {"role": "tool", "tool_call_id": call_id, "content": "c1\nc2"},
    ]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_version_7_store_gets_its_tool_call_turns_texts(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    model = get_embedder("hash").name
    with fresh_database(backend, tmp_path, request) as (open_store, run):
        opened: Callable[..., ContextBase] = lambda **kw: ContextBase(  # noqa: E731
            open_store(), project="p", **kw
        )
        with opened(embedder="hash") as cb:
            _ask, turn, call = _old_turn(cb, "s", "call_1")
            _, hidden, _ = _old_turn(cb, "h", "call_2")
            cb.soft_delete([hidden])
            cb.flush()
            worker = cb.embedding_worker
            assert worker is not None
            worker.drain()
            assert cb.store.pending_among("p", model, [turn]) == set()
            (old,) = cb.store.get_items("p", [turn])
            assert old.text == '{"tool_calls": 1}'
            assert _store_query(cb.store, "tool_calls") != []
            assert cb.store.pending_upgrades() == frozenset()
        run("UPDATE meta SET value='7' WHERE key='schema_version'")

        with opened(embedder=None) as cb:
            assert cb.store.schema_version() == SCHEMA_VERSION >= 8
            assert cb.store.pending_upgrades() == frozenset()  # done on opening
            event = cb.get_event(turn)
            assert event.text == SHOWN and event.data == {"tool_calls": 1}
            assert event.metadata[TEXT_FROM] == TOOL_CALLS
            (item,) = cb.store.get_items("p", [turn])
            assert item.text == SHOWN
            assert "orders_2024" in item.terms.split() and "tool_calls" not in item.terms
            # the call after it is indexed with the turn's new words, not the JSON
            (after,) = cb.store.get_items("p", [call])
            assert "orders_2024" in after.context_terms.split()
            assert "tool_calls" not in after.context_terms
            # their vectors are gone: the embedding worker computes them again
            assert cb.store.pending_among("p", model, [turn, call]) == {turn, call}
            # keyword search finds the SQL, by the store's query and the in-memory index
            assert turn in _store_query(cb.store, "orders_2024")
            index = KeywordIndex(cb.store)
            assert turn in {i for i, _ in index.search("p", query_terms("orders_2024"), 10)}
            assert _store_query(cb.store, "tool_calls") == []
            found = cb.search("orders_2024 paid")
            # its call, stored as `run_sql({"sql": ...})`, reads as capture renders it now:
            # the search shows that form (the turn, saying the same, is its near-duplicate)
            # and never the old one, which kept the turn out before
            invocation = cb.get_event(call)
            assert invocation.text == SHOWN and invocation.metadata[TEXT_FROM] == TOOL_CALLS
            assert cb.store.get_items("p", [call])[0].text == SHOWN
            hits = {c.item.owner_id: c.item.text for c in found.results}
            assert hits[call] == SHOWN
            mine = [c for c in found.considered if c.item.session_id == "s"]
            assert not [c for c in mine if c.item.text.startswith("run_sql({")]
            assert (turn, f"near-duplicate of {call}") in {
                (c.item.owner_id, c.dropped) for c in mine
            }
            result = cb.store.list_events("p", "s", types=["tool_result"])[0].id
            (answer,) = cb.store.get_items("p", [result])
            assert '"sql"' not in answer.context_terms
            assert "orders_2024" in answer.context_terms.split()
            # a hidden turn is left as it was
            assert cb.store.get_events("p", [hidden], include_inactive=True)[0].text is None
            # the history sent again still aligns with what is stored: nothing new
            before = len(cb.last_events("s", 100))
            cb.capture_messages(_history("call_1"), session_id="s", sync=True)
            assert len(cb.last_events("s", 100)) == before

        # opening again changes nothing; the step is not pending
        with opened(embedder=None) as cb:
            assert cb.store.pending_upgrades() == frozenset()
            assert cb.store.get_items("p", [turn])[0].terms == item.terms


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_step_is_pending_only_when_a_turn_may_need_it(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """A version 7 store without data-only assistant messages records nothing; the store's
    own reads of the step: what is pending, the turns without text, and a retext that
    leaves alone an event given a text meanwhile."""
    with fresh_database(backend, tmp_path, request) as (open_store, run):
        store = open_store()
        try:
            store.ensure_project("p")
        finally:
            store.close()
        run("UPDATE meta SET value='7' WHERE key='schema_version'")
        store = open_store()
        try:
            assert store.schema_version() == SCHEMA_VERSION
            assert store.pending_upgrades() == frozenset()
        finally:
            store.close()
        with ContextBase(open_store(), project="p", embedder=None) as cb:
            _, turn, _ = _old_turn(cb, "s", "call_1")
            cb.record("assistant_message", session_id="s", text="plain words")
            store = cb.store
            assert [e.id for e in store.textless_events("assistant_message", None, 10)] == [turn]
            assert store.textless_events("assistant_message", ("p", turn), 10) == []
        run("UPDATE meta SET value='7' WHERE key='schema_version'")
        store = open_store()  # the store alone: the step is recorded, not done
        try:
            assert store.pending_upgrades() == frozenset({TOOL_CALL_TEXTS})
            store.finish_upgrade(TOOL_CALL_TEXTS)
            assert store.pending_upgrades() == frozenset()
        finally:
            store.close()
