"""Tool calls in the assembled prompt: each where it was made, said once.

An assistant message with text and calls carries its calls in its history entry; a message
made only of calls already reads as them; memory leaves out what the history shows (the
call itself, the same call from another session, a bare name the history says), and the
trace says why."""

from __future__ import annotations

import json
from typing import Any

from ctxbase import ContextBase
from ctxbase.assemble.history_calls import fold_calls
from ctxbase.assemble.memory_candidate import label_day
from ctxbase.assemble.repeats import bare_name, said_in
from ctxbase.model import Event

SQL = "SELECT count(*) FROM shipments_eu WHERE region = 'EU' AND shipped_at > '2024-01-01'"
CALL = f'run_sql(sql="{SQL}")'


def _turns(text: str | None) -> list[dict[str, Any]]:
    arguments = json.dumps({"sql": SQL})
    return [
        {"role": "user", "content": "How many rows does the shipments_eu table have?"},
        {
            "role": "assistant",
            "content": text,
            "tool_calls": [
                {
                    "id": "c9",
                    "type": "function",
                    "function": {"name": "run_sql", "arguments": arguments},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c9", "content": "42"},
        {"role": "assistant", "content": "There are 42."},
    ]


def _capture(cb: ContextBase, session: str, text: str | None) -> dict[str, Event]:
    cb.capture_messages(_turns(text), session_id=session, sync=True)
    cb.flush()
    cb.wait_for_embeddings()
    events = cb.last_events(session, 10)
    call = next(e for e in events if e.type == "tool_invocation")
    (turn,) = [e for e in events if e.id in call.parent_event_ids]
    return {"tool_invocation": call, "call_turn": turn}


def _body(ctx: Any) -> str:
    return "\n".join(str(m["content"]) for m in ctx.messages)


def _dropped(ctx: Any, owner_id: str) -> list[dict[str, Any]]:
    return [d for d in ctx.trace["dropped"] if d["id"] == owner_id]


def test_a_turn_with_text_and_a_call_carries_the_call_once(cb: ContextBase) -> None:
    events = _capture(cb, "s", "Let me count them.")
    call, turn = events["tool_invocation"], events["call_turn"]
    ctx = cb.assemble_context(
        agent_role="coder",
        user_intent="why was the shipments_eu region count slow?",
        session_id="s",
    )
    assert _body(ctx).count(SQL) == 1
    contents = [m["content"] for m in ctx.messages]
    said = contents.index(f"Let me count them.\n{CALL}")
    assert ctx.messages[said]["role"] == "assistant"
    result = next(i for i, c in enumerate(contents) if c.endswith("\n42\n</quoted_data>"))
    assert ctx.messages[result]["role"] == "user"  # tool output, quoted as data
    assert said < result  # the call comes before its result
    # the search found the call; the memory layer left it out, saying why
    (drop,) = _dropped(ctx, call.id)
    assert drop["reason"] == "in history"
    assert drop["detail"] == f"a call of {turn.id}, in the history"
    history_ids = [i["id"] for i in ctx.trace["layers"]["history"]["items"]]
    assert call.id not in history_ids and turn.id in history_ids


def test_a_turn_made_of_calls_is_not_repeated(cb: ContextBase) -> None:
    events = _capture(cb, "s", None)
    ctx = cb.assemble_context(
        agent_role="coder",
        user_intent="why was the shipments_eu region count slow?",
        session_id="s",
    )
    assert _body(ctx).count(SQL) == 1
    assert {"role": "assistant", "content": CALL} in ctx.messages
    assert _dropped(ctx, events["tool_invocation"].id)[0]["reason"] == "in history"


def test_the_same_call_from_another_session_is_left_out(cb: ContextBase) -> None:
    old = _capture(cb, "old", None)
    new = _capture(cb, "new", "Let me count them.")
    intent = "why was the shipments_eu region count slow?"
    alone = cb.assemble_context(agent_role="coder", user_intent=intent)
    assert CALL in _body(alone)  # without a history the old call is memory
    ctx = cb.assemble_context(agent_role="coder", user_intent=intent, session_id="new")
    assert _body(ctx).count(SQL) == 1
    details = [
        d["detail"]
        for i in (old["tool_invocation"].id, old["call_turn"].id)
        for d in _dropped(ctx, i)
        if d["reason"] == "in history"
    ]
    # the new session's turn carries the call: the old copies say what it says
    assert details and all(new["call_turn"].id in d for d in details)


def test_a_bare_name_the_history_says_is_left_out(cb: ContextBase) -> None:
    _capture(cb, "s", "Let me count them.")
    mentions = [e for e in cb.list_entities(type="mention") if e.name == "shipments_eu"]
    assert mentions, "the table the call names is anchored as a mention"
    mention = mentions[0].id
    intent = "what do we know about shipments_eu?"
    ctx = cb.assemble_context(agent_role="coder", user_intent=intent, session_id="s")
    (drop,) = [d for d in _dropped(ctx, mention) if d["reason"] == "in history"]
    # the user's turn names the table first
    user = next(e for e in cb.last_events("s", 10) if e.type == "user_message")
    assert drop["detail"] == f"a bare name; {user.id} in the history says it"
    assert "table shipments_eu" not in _body(ctx)


def _event(i: str, type_: str, text: str | None, parents: list[str] | None = None) -> Event:
    return Event(
        id=i, project_id="p", session_id="s", type=type_, text=text, parent_event_ids=parents or []
    )


def test_fold_calls_places_each_call_once() -> None:
    events = [
        _event("u", "user_message", "count them"),
        _event("a", "assistant_message", "Let me count them."),
        _event("c1", "tool_invocation", 'run_sql(sql="SELECT 1")', ["a"]),
        _event("c2", "tool_invocation", 'run_sql(sql="SELECT 2")', ["a"]),
        _event("r", "tool_result", "1", ["c1"]),
        _event("b", "assistant_message", 'run_sql(sql="SELECT 3")'),
        _event("c3", "tool_invocation", 'run_sql(sql="SELECT 3")', ["b"]),
        _event("c4", "tool_invocation", "ls()", ["elsewhere"]),
        _event("c5", "tool_invocation", "rm()", ["gone"]),
        _event("c6", "tool_invocation", None),
    ]
    folded = fold_calls(events, {"gone": "retracted"})
    assert [e.id for e in folded.events] == ["u", "a", "r", "b", "c4"]
    assert folded.events[1].text == (
        'Let me count them.\nrun_sql(sql="SELECT 1")\nrun_sql(sql="SELECT 2")'
    )
    assert folded.events[3].text == 'run_sql(sql="SELECT 3")'  # already reads as its call
    assert events[1].text == "Let me count them."  # the stored event is untouched
    assert folded.held == {"c1": "a", "c2": "a", "c3": "b"}
    assert folded.gone == {"c5": "gone"}


def test_said_in_rules() -> None:
    said = "Let me count them, then compare the count with last week's report."
    history = {"h1": f"{said}\n{CALL}", "h2": "ok"}
    # all of it inside a longer entry; nearly all of an entry (whitespace and case aside)
    assert said_in(CALL, history, event=True) == ("h1", "holds")
    assert said_in(f"{said.upper()}  {CALL} more", history, event=True) == ("h1", "says")
    assert (
        said_in(f"{CALL} and then a whole other sentence of some length", history, event=True)
        is None
    )
    assert said_in("ok", history, event=True) is None  # too short to call a repeat
    # an entity stays unless it is a bare name the history says
    assert said_in(CALL, history, event=False, name="count") is None
    assert said_in("table shipments_eu", history, event=False, name="shipments_eu") == (
        "h1",
        "names",
    )
    assert said_in("table shipments", history, event=False, name="shipments") is None
    assert bare_name("orders_archive", "table orders_archive")
    assert not bare_name("orders_archive", "orders_archive holds the orders before 2023")
    assert not bare_name("id", "column id")


def test_another_agents_call_is_its_own_entry_in_history_and_memory(cb: ContextBase) -> None:
    """A call the coder made in answer to the planner's plan is the coder's: folding it into
    the planner's message would answer "who ran it?" with the planner."""

    def say(kind: str, agent: str, text: str, *parents: str) -> str:
        role = None if kind == "user_message" else agent
        return cb.capture(
            kind,
            session_id="s",
            agent_id=agent,
            agent_role=role,
            parent_event_ids=list(parents),
            text=text,
        )

    u = say("user_message", "alice", "the orders page is slow")
    plan = say("assistant_message", "planner", "Plan: find the slow orders SQL.", u)
    call = say("tool_invocation", "coder", "run_sql: DROP TABLE orders", plan)
    cb.flush()
    cb.wait_for_embeddings()
    events = cb.last_events("s", 10)
    folded = fold_calls(events)
    assert call not in folded.held
    assert [e.text for e in folded.events if e.id == plan] == ["Plan: find the slow orders SQL."]
    ctx = cb.assemble_context(
        agent_role="reviewer", user_intent="who ran the orders SQL?", session_id="s"
    )
    said = [m["content"] for m in ctx.messages if m["role"] == "assistant"]
    assert said == [
        "[planner] Plan: find the slow orders SQL.",
        "[coder] run_sql: DROP TABLE orders",
    ]
    # recalled without the session: the call is an item of its own, not a line of the plan
    recalled = cb.assemble_context(agent_role="reviewer", user_intent="who ran the orders SQL?")
    memory = "\n".join(
        m["content"] for m in recalled.messages if "Retrieved context" in m["content"]
    )
    assert (
        f"[tool call {call}, {label_day(cb.get_event(call).ts)}]\nrun_sql: DROP TABLE orders"
        in memory
    )
    assert "Plan: find the slow orders SQL.\nrun_sql" not in memory
    # the planner's own call still reads on its message's lines
    own = say("tool_invocation", "planner", "list_tables()", plan)
    cb.flush()
    assert fold_calls(cb.last_events("s", 10)).held == {own: plan}
