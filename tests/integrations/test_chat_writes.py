"""The framework adapters keep what they are handed, on SQLite and PostgreSQL (hash
embedder): a message with nothing to read (a reply that is only a newline) is stored and
read back exactly, a batch the store refuses part of writes none of it, LlamaIndex's `set`
leaves the conversation as it was when the new one is refused, clearing reaches past the
last SESSION_LIMIT events, AutoGen's metadata keeps the caller's own keys and its text is
stored once, and argument errors name the argument as the caller wrote it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from autogen_core.memory import MemoryContent, MemoryMimeType
from langchain_core.messages import AIMessage, HumanMessage
from llama_index.core.base.llms.types import ChatMessage, MessageRole

from ctxbase import ContextBase
from ctxbase.errors import ValidationError
from ctxbase.integrations import chat_turns
from ctxbase.integrations.autogen_memory import CtxbaseMemory
from ctxbase.integrations.langchain import CtxbaseChatHistory, CtxbaseRetriever
from ctxbase.integrations.llamaindex import CtxbaseChatMemory
from ctxbase.integrations.tools import ToolScope, handle_tool_call


def _contents(history: CtxbaseChatHistory) -> list[tuple[str, Any]]:
    return [(m.type, m.content) for m in history.messages]


def test_a_blank_reply_is_kept_and_a_refused_batch_writes_nothing(
    cb: ContextBase, monkeypatch: pytest.MonkeyPatch
) -> None:
    history = CtxbaseChatHistory(cb, "lc", agent_id="bot")
    history.add_messages([HumanMessage("first"), AIMessage("\n"), HumanMessage("   ")])
    history.add_messages([AIMessage("third")])
    assert _contents(history) == [
        ("human", "first"),
        ("ai", "\n"),
        ("human", "   "),
        ("ai", "third"),
    ]
    # each follows the one before, the blank ones included
    events = cb.last_events("lc")
    assert [e.parent_event_ids for e in events[1:]] == [[e.id] for e in events[:-1]]
    # a message the store refuses (over the size limit) leaves none of the batch written
    monkeypatch.setattr(cb, "max_content_bytes", 64)  # as ContextBase(max_content_bytes=64)
    with pytest.raises(ValidationError) as err:
        history.add_messages([HumanMessage("fits"), AIMessage("x" * 100)])
    assert err.value.field == "messages[1].text"
    assert len(history.messages) == 4


def test_clear_reaches_past_the_last_session_limit_events(
    cb: ContextBase, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(chat_turns, "SESSION_LIMIT", 3)  # a read sees the last 3 events
    history = CtxbaseChatHistory(cb, "long", agent_id="bot")
    history.add_messages([HumanMessage(f"m{i}") for i in range(8)])
    other = CtxbaseChatHistory(cb, "long", agent_id="other")
    other.add_messages([AIMessage("another agent's reply")])
    history.clear()
    assert [e.text for e in cb.last_events("long", 100)] == ["another agent's reply"]


def test_llamaindex_set_is_all_or_nothing(cb: ContextBase, monkeypatch: pytest.MonkeyPatch) -> None:
    memory = CtxbaseChatMemory(cb=cb, session_id="li", agent_id="bot", k=0)
    old = [
        ChatMessage(role=MessageRole.USER, content="订单缓存多久？"),
        ChatMessage(role=MessageRole.ASSISTANT, content="60 秒"),
    ]
    memory.put_messages(old)
    with monkeypatch.context() as patch:
        patch.setattr(cb, "max_content_bytes", 64)  # as ContextBase(max_content_bytes=64)
        with pytest.raises(ValidationError, match=r"^messages\[1\]\.text"):
            memory.set([ChatMessage(role=MessageRole.USER, content="new"), _long_reply()])
    assert [m.content for m in memory.get_all()] == ["订单缓存多久？", "60 秒"]
    replacement = [
        ChatMessage(role=MessageRole.USER, content="replacement"),
        ChatMessage(role=MessageRole.ASSISTANT, content="  "),
    ]
    memory.set(replacement)
    assert [(m.role, m.content) for m in memory.get_all()] == [
        (MessageRole.USER, "replacement"),
        (MessageRole.ASSISTANT, "  "),
    ]
    assert [e.parent_event_ids for e in cb.last_events("li")] == [
        [],
        [cb.last_events("li")[0].id],
    ]


def _long_reply() -> ChatMessage:
    return ChatMessage(role=MessageRole.ASSISTANT, content="y" * 100)


def test_llamaindex_refuses_a_bad_session_id_when_made(cb: ContextBase) -> None:
    with pytest.raises(ValidationError) as err:
        CtxbaseChatMemory(cb=cb, session_id="对话")
    assert err.value.field == "session_id"


@pytest.mark.asyncio
async def test_autogen_keeps_the_callers_metadata_and_stores_text_once(cb: ContextBase) -> None:
    memory = CtxbaseMemory(cb, session_id="ag", agent_id="planner")
    metadata = {"type": "preference", "id": "pref-1", "source": "chat", "score": 99}
    await memory.add(
        MemoryContent(content="用户喜欢四川菜，不吃香菜", mime_type="text/plain", metadata=metadata)
    )
    hit = (await memory.query("四川菜")).results[0]
    assert {k: hit.metadata[k] for k in metadata} == metadata  # as added, not the hit's
    assert hit.metadata["session_id"] == "ag"  # the hit's fields beside them
    # text under the size limit is accepted: it is stored once, not twice
    await memory.add(MemoryContent(content="x" * 600_000, mime_type="text/plain"))
    stored = cb.last_events("ag")[-1]
    assert len(stored.text or "") == 600_000 and "x" * 100 not in json.dumps(stored.data)
    # a dict comes back equal, in its own key order
    value = {"zeta": 1, "alpha": {"b": 2, "a": [1, "二"]}}
    await memory.add(MemoryContent(content=value, mime_type=MemoryMimeType.JSON))
    found = (await memory.query("zeta alpha", mode="keyword")).results
    back = next(r.content for r in found if isinstance(r.content, dict))
    assert back == value and list(back) == ["zeta", "alpha"]
    with pytest.raises(ValidationError, match="not JSON") as err:
        await memory.add(MemoryContent(content={"when": {1, 2}}, mime_type=MemoryMimeType.JSON))
    assert err.value.field == "content"


@pytest.mark.asyncio
async def test_autogen_reads_what_earlier_versions_stored(cb: ContextBase) -> None:
    kept = {"mime_type": "application/json", "content": {"budget": 5}, "metadata": {"m": 1}}
    cb.record(
        "assistant_message",
        session_id="old",
        text='{"budget": 5}',
        data={"autogen_memory": kept, "autogen_memory_agent": "planner"},
        agent_id="planner",
    )
    memory = CtxbaseMemory(cb, session_id="old", agent_id="planner")
    hit = (await memory.query("budget", mode="keyword")).results[0]
    assert (hit.content, hit.mime_type, hit.metadata["m"]) == ({"budget": 5}, "application/json", 1)


@pytest.mark.asyncio
async def test_hit_counts_are_refused_as_k(cb: ContextBase) -> None:
    cb.record("user_message", session_id="s", text="redis cache")
    with pytest.raises(ValidationError) as err:
        CtxbaseRetriever(cb=cb).invoke("redis", k=100)
    assert err.value.field == "k" and "got 100" in str(err.value)
    with pytest.raises(ValidationError) as err:
        await CtxbaseMemory(cb).query("redis", k=0)
    assert err.value.field == "k"


def test_tool_errors_name_the_tools_arguments(cb: ContextBase) -> None:
    scope = ToolScope(cb)

    def call(name: str, args: dict[str, Any]) -> dict[str, Any]:
        return dict(json.loads(handle_tool_call(scope, name, args)))

    blank = call("forget", {"event_ids": [""]})["error"]
    assert (blank["field"], blank["fields"]) == ("event_ids[0]", ["event_ids[0]"])
    small = call("assemble_context", {"intent": "hello", "max_tokens": 1})["error"]
    assert (small["code"], small["field"], small["fields"]) == (
        "budget_too_small",
        "max_tokens",
        ["max_tokens"],
    )
    # a session hidden whole, hidden again: named unchanged, not an empty answer
    call("remember", {"text": "note two", "session_id": "s2"})
    assert call("forget", {"session_id": "s2"})["hidden"] == 1
    again = call("forget", {"session_id": "s2"})
    assert (again["hidden"], again["unchanged"], again["not_found"]) == (0, ["s2"], [])
