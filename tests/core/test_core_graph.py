"""The event graph (NEXT, CAUSED_BY, REFERS_TO), its queries, message-list hooks, relations."""

from __future__ import annotations

import itertools
import time
from pathlib import Path
from typing import Any

import pytest
from core_helpers import count, raw

from ctxbase import ContextBase, NotFoundError


def _edges(cb: ContextBase, type_: str) -> set[tuple[str, str]]:
    return {(r.from_id, r.to_id) for r in cb.relationships(types=[type_])}


def _run(cb: ContextBase, session: str = "s") -> dict[str, str]:
    """user -> assistant -> tool call -> tool result -> assistant, plus a side thought."""
    ids: dict[str, str] = {}
    ids["u"] = cb.record("user_message", session_id=session, text="why is the build red").id
    ids["a1"] = cb.record(
        "assistant_message", session_id=session, text="let me run it", parent_event_ids=[ids["u"]]
    ).id
    ids["call"] = cb.record(
        "tool_invocation", session_id=session, text="make test", parent_event_ids=[ids["a1"]]
    ).id
    ids["res"] = cb.record(
        "tool_result", session_id=session, text="1 failed", parent_event_ids=[ids["call"]]
    ).id
    ids["a2"] = cb.record(
        "assistant_message", session_id=session, text="test_x fails", parent_event_ids=[ids["res"]]
    ).id
    ids["side"] = cb.record(
        "internal_thought", session_id=session, text="unrelated", parent_event_ids=[ids["u"]]
    ).id
    return ids


def test_next_edges_follow_session_order_and_stay_in_their_session(cb: ContextBase) -> None:
    ids = _run(cb, "s")
    other = _run(cb, "t")
    order = ["u", "a1", "call", "res", "a2", "side"]
    expected = {(ids[a], ids[b]) for a, b in itertools.pairwise(order)}
    expected |= {(other[a], other[b]) for a, b in itertools.pairwise(order)}
    assert _edges(cb, "NEXT") == expected
    assert [e.seq for e in cb.last_events("s", 100)] == [1, 2, 3, 4, 5, 6]
    assert [e.id for e in cb.last_events("t", 100)] == [other[k] for k in order]


def test_caused_by_edges_come_from_parent_ids(cb: ContextBase) -> None:
    ids = _run(cb)
    assert _edges(cb, "CAUSED_BY") == {
        (ids["a1"], ids["u"]),
        (ids["call"], ids["a1"]),
        (ids["res"], ids["call"]),
        (ids["a2"], ids["res"]),
        (ids["side"], ids["u"]),
    }
    rel = cb.relationships(ids["a1"], direction="out", types=["CAUSED_BY"])[0]
    assert rel.source == "auto:capture"
    assert rel.confidence == 1.0


def test_refers_to_edges(cb: ContextBase) -> None:
    doc = cb.upsert_entity("document", "design.md", "the design")
    ev = cb.record("assistant_message", session_id="s", text="see the design", refers_to=[doc.id])
    assert cb.get_event(ev.id).refers_to == [doc.id]
    assert _edges(cb, "REFERS_TO") == {(ev.id, doc.id)}
    hits = cb.neighbourhood(doc.id, 1)
    assert [h.node_id for h in hits] == [ev.id]
    assert hits[0].via is not None and hits[0].via.type == "REFERS_TO"


def test_upstream_chain_and_downstream_effects(cb: ContextBase) -> None:
    ids = _run(cb)
    chain = cb.causal_chain(ids["a2"])
    assert [e.id for e in chain] == [ids["res"], ids["call"], ids["a1"], ids["u"]]
    effects = cb.effects(ids["u"])
    assert [e.id for e in effects[:2]] in (
        [ids["a1"], ids["side"]],
        [ids["side"], ids["a1"]],
    )
    assert [e.id for e in effects[2:]] == [ids["call"], ids["res"], ids["a2"]]
    assert cb.effects(ids["a2"]) == []
    assert cb.causal_chain(ids["u"]) == []
    with pytest.raises(NotFoundError):
        cb.causal_chain("ev_nothing_here")


def test_k_hop_neighbourhood(cb: ContextBase) -> None:
    ids = _run(cb)
    one = {h.node_id: h.hops for h in cb.neighbourhood(ids["call"], 1)}
    assert one == {ids["a1"]: 1, ids["res"]: 1}
    two = {h.node_id: h.hops for h in cb.neighbourhood(ids["call"], 2)}
    assert two == {ids["a1"]: 1, ids["res"]: 1, ids["u"]: 2, ids["a2"]: 2}
    caused_only = {h.node_id for h in cb.neighbourhood(ids["u"], 1, types=["CAUSED_BY"])}
    assert caused_only == {ids["a1"], ids["side"]}
    next_only = {h.node_id for h in cb.neighbourhood(ids["u"], 1, types=["NEXT"])}
    assert next_only == {ids["a1"]}
    assert cb.neighbourhood(ids["call"], 0) == []


def test_last_n_events(cb: ContextBase) -> None:
    ids = _run(cb)
    assert [e.id for e in cb.last_events("s", 2)] == [ids["a2"], ids["side"]]
    assert len(cb.last_events("s", 100)) == 6
    assert cb.last_events("s", 0) == []
    with pytest.raises(NotFoundError):  # no such session, as its timeline says
        cb.last_events("no-such-session", 5)


def test_events_of_another_project_are_invisible(cb: ContextBase) -> None:
    ids = _run(cb)
    with pytest.raises(NotFoundError):
        cb.get_event(ids["u"], project="other")
    with pytest.raises(NotFoundError):
        cb.last_events("s", 10, project="other")
    with pytest.raises(NotFoundError):
        cb.neighbourhood(ids["u"], 2, project="other")


# -- OpenAI-style message lists ------------------------------------------------------------

CONVERSATION: list[dict[str, Any]] = [
    {"role": "system", "content": "You are a build assistant."},
    {"role": "user", "content": "Why is CI red?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "run_tests", "arguments": '{"path": "tests"}'},
            },
            {
                "id": "call_2",
                "type": "function",
                "function": {"name": "git_log", "arguments": {"n": 3}},
            },
        ],
    },
    {"role": "tool", "tool_call_id": "call_2", "content": "abc123 fix"},
    {"role": "tool", "tool_call_id": "call_1", "content": "1 failed: test_budget"},
    {"role": "assistant", "content": "test_budget fails since abc123."},
]


def test_message_list_becomes_events_with_the_right_parents(cb: ContextBase) -> None:
    ids = cb.capture_messages(CONVERSATION, session_id="s", assistant_role="coder")
    cb.flush()
    events = cb.last_events("s", 100)
    assert [e.id for e in events] == ids
    by_type = [e.type for e in events]
    assert by_type == [
        "system",
        "user_message",
        "assistant_message",
        "tool_invocation",
        "tool_invocation",
        "tool_result",
        "tool_result",
        "assistant_message",
    ]
    sys_, user, asst, inv1, inv2, res2, res1, final = events
    assert user.parent_event_ids == [sys_.id]
    assert user.agent_role == "user"
    assert asst.parent_event_ids == [user.id]
    assert asst.agent_role == "coder"
    assert inv1.parent_event_ids == [asst.id]
    assert inv2.parent_event_ids == [asst.id]
    assert inv1.data["call_id"] == "call_1"
    assert inv2.data == {"tool": "git_log", "arguments": {"n": 3}, "call_id": "call_2"}
    assert res2.parent_event_ids == [inv2.id]  # matched by call id, not by position
    assert res1.parent_event_ids == [inv1.id]
    assert res1.metadata["call_id"] == "call_1"
    assert sorted(final.parent_event_ids) == sorted([res1.id, res2.id])
    assert [e.id for e in cb.causal_chain(final.id)][:2] in (
        [res1.id, res2.id],
        [res2.id, res1.id],
    )
    assert user.id in {e.id for e in cb.causal_chain(final.id)}


def test_capturing_a_growing_list_adds_only_the_new_messages(
    db_path: Path, cb: ContextBase
) -> None:
    first = cb.capture_messages(CONVERSATION[:2], session_id="s")
    cb.flush()
    assert count(db_path, "events") == 2
    second = cb.capture_messages(CONVERSATION[:2], session_id="s")  # a retried hook
    cb.flush()
    assert second == first
    assert count(db_path, "events") == 2
    full = cb.capture_messages(CONVERSATION, session_id="s")
    cb.flush()
    assert full[:2] == first
    assert count(db_path, "events") == len(full) == 8
    longer = [*CONVERSATION, {"role": "user", "content": "fix it"}]
    more = cb.capture_messages(longer, session_id="s", sync=True)
    assert more[:8] == full
    assert count(db_path, "events") == 9
    assert cb.get_event(more[-1]).parent_event_ids == [full[-1]]
    # NEXT still follows the conversation: nothing was re-inserted out of order
    assert [e.id for e in cb.last_events("s", 100)] == more
    assert count(db_path, "relations", "type='NEXT'") == 8


def test_repeated_identical_messages_are_kept_apart(db_path: Path, cb: ContextBase) -> None:
    messages = [
        {"role": "user", "content": "continue"},
        {"role": "user", "content": "continue"},
        {"role": "assistant", "content": "ok"},
        {"role": "system", "content": "reminder"},
        {"role": "user", "content": "continue"},
        {"role": "system", "content": "reminder"},
    ]
    ids = cb.capture_messages(messages, session_id="s")
    cb.flush()
    assert len(set(ids)) == len(messages)
    assert count(db_path, "events") == len(messages)
    assert cb.capture_messages(messages, session_id="s") == ids
    cb.flush()
    assert count(db_path, "events") == len(messages)


def test_multipart_content_and_names(cb: ContextBase) -> None:
    ids = cb.capture_messages(
        [
            {
                "role": "user",
                "name": "alice_bot",
                "content": [
                    {"type": "text", "text": "part one"},
                    {"type": "image_url"},
                    "part two",
                ],
            }
        ],
        session_id="s",
    )
    cb.flush()
    ev = cb.get_event(ids[0])
    assert ev.text == "part one\npart two"
    assert ev.agent_id == "alice_bot"


# -- relations --------------------------------------------------------------------------


def test_upserting_the_same_relation_updates_it(db_path: Path, cb: ContextBase) -> None:
    a = cb.upsert_entity("code", "budget.py").id
    b = cb.upsert_entity("requirement", "budget under 50k").id
    r1 = cb.upsert_relationship(a, "IMPLEMENTS", b, source="auto:anchor", confidence=0.6)
    time.sleep(0.01)
    r2 = cb.create_edge(
        a, "IMPLEMENTS", b, source="gpt-4o", confidence=0.9, properties={"why": "reviewed"}
    )
    assert r1.id == r2.id
    # one open edge; the earlier assertion is kept closed beside it
    assert count(db_path, "relations", "type='IMPLEMENTS' AND valid_to IS NULL") == 1
    [kept] = [r for r in cb.relationships(a, types=["IMPLEMENTS"], include_closed=True)
              if r.id != r1.id]  # fmt: skip
    assert (kept.id, kept.confidence, kept.source) == (f"{r1.id}@1", 0.6, "auto:anchor")
    [stored] = cb.relationships(a, types=["IMPLEMENTS"])
    assert stored.confidence == 0.9
    assert stored.source == "gpt-4o"
    assert stored.properties == {"why": "reviewed"}
    assert stored.created_at == r1.created_at  # first creation time is kept
    assert stored.valid_to is None
    # another type or direction is another relation
    cb.upsert_relationship(b, "IMPLEMENTS", a, source="human")
    assert count(db_path, "relations", "type='IMPLEMENTS' AND valid_to IS NULL") == 2


def test_a_superseded_relation_is_closed_not_erased(db_path: Path, cb: ContextBase) -> None:
    a = cb.upsert_entity("code", "a.py").id
    b = cb.upsert_entity("code", "b.py").id
    rel = cb.upsert_relationship(a, "CALLS", b, source="human")
    before = time.time()
    assert cb.close_relationship(rel.id) is True
    assert cb.close_relationship(rel.id) is False  # already closed
    with pytest.raises(NotFoundError, match="relation 'rel_typo' not found"):
        cb.close_relationship("rel_typo")  # a mistyped id is not "already closed"
    assert cb.relationships(a, types=["CALLS"]) == []
    [closed] = cb.relationships(a, types=["CALLS"], include_closed=True)
    assert closed.valid_to is not None and closed.valid_to >= before
    assert closed.valid_from <= closed.valid_to
    conn = raw(db_path)
    assert conn.execute("SELECT count(*) FROM relations WHERE type='CALLS'").fetchone()[0] == 1
    conn.close()
    assert cb.neighbourhood(a, 1, types=["CALLS"]) == []
    # asserting it again opens it again, still one row
    cb.upsert_relationship(a, "CALLS", b, source="human")
    assert [r.valid_to for r in cb.relationships(a, types=["CALLS"])] == [None]
    assert count(db_path, "relations", "type='CALLS'") == 1


def test_relation_directions(cb: ContextBase) -> None:
    a = cb.upsert_entity("code", "a.py").id
    b = cb.upsert_entity("code", "b.py").id
    c = cb.upsert_entity("code", "c.py").id
    cb.upsert_relationship(a, "CALLS", b, source="human")
    cb.upsert_relationship(c, "CALLS", a, source="human")
    assert {r.to_id for r in cb.relationships(a, direction="out")} == {b}
    assert {r.from_id for r in cb.relationships(a, direction="in")} == {c}
    assert len(cb.relationships(a)) == 2
    assert cb.relationships(a, types=["OTHER"]) == []


def test_a_tool_result_follows_its_call_however_many_messages_came_between(
    cb: ContextBase,
) -> None:
    call = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call_9", "type": "function", "function": {"name": "build", "arguments": "{}"}}
        ],
    }
    cb.capture_messages([{"role": "user", "content": "build it"}, call], session_id="s")
    for i in range(40):  # other turns while the long call runs
        cb.capture_messages([{"role": "user", "content": f"status {i}?"}], session_id="s")
    cb.flush()  # stored, no longer queued: the tail read is the store's
    ids = cb.capture_messages(
        [{"role": "tool", "tool_call_id": "call_9", "content": "build ok"}], session_id="s"
    )
    cb.flush()
    invocation = next(e for e in cb.last_events("s", 100) if e.type == "tool_invocation")
    assert invocation.data["call_id"] == "call_9"
    assert cb.get_event(ids[0]).parent_event_ids == [invocation.id]
