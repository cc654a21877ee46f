"""Tool calls inside message lists (OpenAI `tool_calls` and Anthropic content parts): an
assistant turn made only of tool calls reads as the calls and is found by their arguments,
each call is a tool_invocation its result hangs from, and a message with nothing in it is
neither a search hit nor an empty block of an assembled context. Assistant turns are the
agent's the base was opened for."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import pytest

from ctxbase import ContextBase
from ctxbase.capture.alignment import event_signature, planned_signature
from ctxbase.capture.hooks import plan_message_events
from ctxbase.errors import ValidationError
from ctxbase.model import Event

Opener = Callable[..., ContextBase]
Msg = dict[str, Any]

SQL = "SELECT customer_id, SUM(amount)\nFROM orders_2024 WHERE status = '已付款'\nGROUP BY 1"


def _openai_turns() -> list[Msg]:
    call = {"name": "run_sql", "arguments": json.dumps({"sql": SQL, "limit": 10})}
    return [
        {"role": "user", "content": "上个月每个客户的付款总额？"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "call_1", "type": "function", "function": call}],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "c1 | 300\nc2 | 120"},
        {"role": "assistant", "content": "客户 c1 付了 300，c2 付了 120。"},
        {"role": "assistant", "content": ""},  # an empty turn: no text, no calls
        {"role": "user", "content": "好的"},
    ]


def _by_type(cb: ContextBase, session: str) -> dict[str, list[Event]]:
    out: dict[str, list[Event]] = {}
    for e in cb.last_events(session, 100):
        out.setdefault(e.type, []).append(e)
    return out


def _empty_blocks(text: str) -> list[str]:
    """Source labels with nothing under them (the next line is another label, or none)."""
    return re.findall(r"^\[[a-z ]+ ev_[0-9a-f]+\][^\n]*\s*(?=^\[|\Z)", text, flags=re.M)


def test_a_tool_call_turn_reads_as_its_calls_and_is_found_by_them(open_base: Opener) -> None:
    cb = open_base(embedder="hash", agent_id="coder")
    ids = cb.capture_messages(_openai_turns(), session_id="s", sync=True)
    assert len(ids) == 7  # one event per message, plus the invocation
    events = _by_type(cb, "s")
    call_turn, answer, empty = events["assistant_message"]
    shown = f'run_sql(sql="{SQL}", limit=10)'
    assert call_turn.text == shown
    assert call_turn.data == {"tool_calls": 1}
    (invocation,) = events["tool_invocation"]
    assert invocation.text == shown
    assert invocation.data["call_id"] == "call_1"
    assert invocation.parent_event_ids == [call_turn.id]
    (result,) = events["tool_result"]
    assert result.parent_event_ids == [invocation.id]
    assert answer.parent_event_ids == [result.id]
    assert empty.text is None and empty.data is None

    # a word of the SQL after a line break, and one in Chinese, find the call
    for query in ("orders_2024", "GROUP BY", "已付款"):
        found = [c.item.owner_id for c in cb.search(query).results]
        assert call_turn.id in found or invocation.id in found, query
    # the call turn and the invocation say the same: search keeps one of them
    found = [c.item.owner_id for c in cb.search("orders_2024 customer_id").results]
    assert len({call_turn.id, invocation.id} & set(found)) == 1
    # the empty turn matches nothing, even a search of everything
    everything = cb.search("run_sql orders 客户 付款 好的 tool_calls", top_k=50)
    assert empty.id not in [c.item.owner_id for c in everything.results]

    # sent again whole, the list adds nothing
    assert cb.capture_messages(_openai_turns(), session_id="s", sync=True) == ids
    assert len(cb.last_events("s", 100)) == 7


def test_the_assistant_turns_are_the_bases_agent(open_base: Opener, tmp_path: Any) -> None:
    cb = open_base(embedder="hash", agent_id="coder")
    cb.capture_messages(_openai_turns(), session_id="s", sync=True)
    agents = {(e.type, e.agent_id) for e in cb.last_events("s", 100)}
    assert agents == {
        ("user_message", "user"),
        ("assistant_message", "coder"),
        ("tool_invocation", "coder"),
        ("tool_result", "tool"),
    }
    # named per call, the assistant is that one; a message's own name wins
    cb.capture_messages(
        [
            {"role": "assistant", "content": "relayed"},
            {"role": "assistant", "content": "mine", "name": "bot"},
        ],
        session_id="t",
        assistant_id="planner",
        sync=True,
    )
    assert [e.agent_id for e in cb.last_events("t", 10)] == ["planner", "bot"]
    plain = open_base(tmp_path / "plain.db")
    plain.capture_messages([{"role": "assistant", "content": "hi"}], session_id="s", sync=True)
    assert plain.last_events("s", 1)[0].agent_id == "assistant"


def test_anthropic_content_parts_become_calls_and_results(open_base: Opener) -> None:
    cb = open_base(embedder="hash", agent_id="coder")
    history: list[Msg] = [
        {"role": "user", "content": [{"type": "text", "text": "How many rows in orders_2024?"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "toolu_1", "name": "run_sql", "input": {"sql": SQL}},
                {"type": "tool_use", "id": "toolu_2", "name": "ls", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "42"},
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_2",
                    "content": [{"type": "text", "text": "permission denied"}],
                    "is_error": True,
                },
                {"type": "text", "text": "and the failing one?"},
            ],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "42 rows; ls was denied."}]},
    ]
    ids = cb.capture_messages(history, session_id="a", sync=True)
    events = cb.last_events("a", 100)
    assert [e.type for e in events] == [
        "user_message",
        "assistant_message",
        "tool_invocation",
        "tool_invocation",
        "tool_result",
        "tool_result",
        "user_message",
        "assistant_message",
    ]
    ask, turn, sql, ls, rows, denied, follow_up, answer = events
    assert ask.text == "How many rows in orders_2024?"
    assert turn.text == f'run_sql(sql="{SQL}")\nls()' and turn.agent_id == "coder"
    assert sql.text == f'run_sql(sql="{SQL}")' and sql.data["arguments"] == {"sql": SQL}
    assert rows.text == "42" and rows.parent_event_ids == [sql.id]
    assert denied.text == "permission denied" and denied.parent_event_ids == [ls.id]
    assert denied.metadata["error"] is True and "error" not in rows.metadata
    assert rows.agent_id == "tool" and follow_up.agent_id == "user"
    assert follow_up.text == "and the failing one?" and follow_up.parent_event_ids == [denied.id]
    assert sorted(answer.parent_event_ids) == sorted([rows.id, denied.id])
    # a result answering a call of an earlier list finds it; the whole list again adds nothing
    assert cb.capture_messages(history, session_id="a", sync=True) == ids
    more = cb.capture_messages(
        [
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t3", "name": "ls"}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t3"}]},
        ],
        session_id="a",
        sync=True,
    )
    assert len(more) == 3 and cb.get_event(more[1]).text == "ls()"
    assert cb.get_event(more[2]).parent_event_ids == [more[1]]


def test_sessions_stored_before_the_rendering_still_align() -> None:
    """The events a tool-call turn and an empty turn were stored as before their text was
    rendered compare equal to the planned ones, so a history re-sent adds nothing."""
    planned = plan_message_events(_openai_turns())
    turn, invocation, empty = planned[1], planned[2], planned[5]
    args = json.dumps({"sql": SQL, "limit": 10})
    old = [
        Event(id="ev_1", project_id="p", session_id="s", type="assistant_message",
              data={"tool_calls": 1}),
        Event(id="ev_2", project_id="p", session_id="s", type="tool_invocation",
              text=f"run_sql({args})",
              data={"tool": "run_sql", "arguments": args, "call_id": "call_1"}),
        Event(id="ev_3", project_id="p", session_id="s", type="assistant_message",
              data={"tool_calls": 0}),
    ]  # fmt: skip
    assert [event_signature(e) for e in old] == [
        planned_signature(p) for p in (turn, invocation, empty)
    ]
    # the rendered text is not what is compared: another call is another message
    other = plan_message_events(
        [
            {
                "role": "assistant",
                "tool_calls": [
                    {"id": "call_1", "function": {"name": "run_sql", "arguments": "{}"}}
                ],
            }
        ]
    )
    assert planned_signature(other[1]) != planned_signature(invocation)


def test_an_empty_message_is_never_an_empty_block(open_base: Opener) -> None:
    cb = open_base(embedder="hash", agent_id="coder")
    cb.capture_messages(_openai_turns(), session_id="s", sync=True)
    # an event of data only (as a tool-call turn was once stored) is found by its data
    bare = cb.record("assistant_message", session_id="s", data={"tool_calls": 1}).id
    assert bare in [c.item.owner_id for c in cb.search("tool_calls").results]
    for intent in ("上次那个SQL", "tool_calls", "orders_2024 的查询"):
        ctx = cb.assemble_context(
            agent_role="coder", user_intent=intent, session_id="s", debug=True
        )
        text = "\n".join(str(m["content"]) for m in ctx.messages)
        assert _empty_blocks(text) == [], intent
        assert bare not in text
    # from another session it would be a memory item: left out, saying why
    ctx = cb.assemble_context(agent_role="coder", user_intent="tool_calls", session_id="s2")
    text = "\n".join(str(m["content"]) for m in ctx.messages)
    assert _empty_blocks(text) == [] and bare not in text
    dropped = {(d["id"], d.get("detail")) for d in ctx.trace.get("dropped", [])}
    assert (bare, "empty text") in dropped


def test_deprecated_function_calls_are_tool_calls(open_base: Opener) -> None:
    """OpenAI's `function_call` / role "function" shape: the call is a tool_invocation the
    assistant turn reads as, and a function message answers the latest unanswered call of
    its name, in the same list or an earlier one."""
    cb = open_base(embedder="hash", agent_id="coder")

    def call(name: str, args: dict[str, Any]) -> Msg:
        return {
            "role": "assistant",
            "content": None,
            "function_call": {"name": name, "arguments": json.dumps(args)},
        }

    history: list[Msg] = [
        {"role": "user", "content": "Totals per customer from orders_2024?"},
        call("run_sql", {"sql": SQL}),
        call("run_sql", {"sql": "SELECT 1"}),  # a second call before the first is answered
        {"role": "function", "name": "run_sql", "content": "1"},
        {"role": "function", "name": "run_sql", "content": "c1 | 300"},
        {"role": "assistant", "content": "c1 paid 300."},
    ]
    ids = cb.capture_messages(history, session_id="f", sync=True)
    events = cb.last_events("f", 100)
    assert [e.type for e in events] == [
        "user_message",
        "assistant_message",
        "tool_invocation",
        "assistant_message",
        "tool_invocation",
        "tool_result",
        "tool_result",
        "assistant_message",
    ]
    _ask, turn, first, _turn2, second, one, totals, answer = events
    assert turn.text == first.text == f'run_sql(sql="{SQL}")'
    assert first.data == {"tool": "run_sql", "arguments": json.dumps({"sql": SQL}),
                          "call_id": "function:run_sql"}  # fmt: skip
    assert first.parent_event_ids == [turn.id]
    # the latest unanswered call first: "1" answers SELECT 1, then the totals the first call
    assert one.text == "1" and one.parent_event_ids == [second.id]
    assert totals.parent_event_ids == [first.id] and totals.agent_id == "run_sql"
    assert sorted(answer.parent_event_ids) == sorted([one.id, totals.id])
    found = [c.item.owner_id for c in cb.search("orders_2024 GROUP BY").results]
    assert turn.id in found or first.id in found
    # the whole history again adds nothing; a result sent after its call's list finds it
    assert cb.capture_messages(history, session_id="f", sync=True) == ids
    later = cb.capture_messages([call("ls", {"path": "/tmp"})], session_id="f", sync=True)
    (result_id,) = cb.capture_messages(
        [{"role": "function", "name": "ls", "content": "a.txt"}], session_id="f", sync=True
    )
    assert cb.get_event(result_id).parent_event_ids == [later[1]]
    # a function message names its function; one answering no call is refused
    for bad, field in (
        ({"role": "function", "content": "x"}, "messages[0].name"),
        ({"role": "function", "name": "nope"}, "messages[0].name"),
        ({"role": "assistant", "function_call": "run_sql"}, "messages[0].function_call"),
    ):
        with pytest.raises(ValidationError) as caught:
            cb.capture_messages([bad], session_id="g", sync=True)
        assert caught.value.field == field, bad
