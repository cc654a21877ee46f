"""The AutoGen memory over a real ctxbase (SQLite and PostgreSQL, hash embedder): add and
query keep what was added, update_context fills a real ChatCompletionContext, an
AssistantAgent (with a scripted model client) sees the recalled memory, and clear only
hides this memory's own events."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from typing import Any

import pytest
from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.messages import MemoryQueryEvent
from autogen_core import CancellationToken
from autogen_core.memory import Memory, MemoryContent, MemoryMimeType
from autogen_core.model_context import UnboundedChatCompletionContext
from autogen_core.models import (
    ChatCompletionClient,
    CreateResult,
    LLMMessage,
    ModelCapabilities,
    ModelInfo,
    RequestUsage,
    SystemMessage,
    UserMessage,
)

from ctxbase import ContextBase
from ctxbase.errors import ValidationError
from ctxbase.integrations.autogen_memory import HEADER, CtxbaseMemory

pytestmark = pytest.mark.asyncio

PREFERENCE = "The user prefers PostgreSQL 18 for new services"
BUDGET = {"budget": 50000, "currency": "EUR"}
RUNBOOK = "# Deploys\n\nDeploys freeze on **Friday** at noon."


async def _filled(cb: ContextBase, **options: Any) -> CtxbaseMemory:
    memory = CtxbaseMemory(cb, session_id="ag", agent_id="planner", **options)
    await memory.add(
        MemoryContent(content=PREFERENCE, mime_type=MemoryMimeType.TEXT, metadata={"from": "chat"})
    )
    await memory.add(MemoryContent(content=BUDGET, mime_type=MemoryMimeType.JSON))
    await memory.add(MemoryContent(content=RUNBOOK, mime_type=MemoryMimeType.MARKDOWN))
    return memory


async def test_query_gives_back_what_was_added(cb: ContextBase) -> None:
    memory = await _filled(cb)
    assert isinstance(memory, Memory)
    best = (await memory.query("which database does the user prefer", k=1)).results
    assert len(best) == 1 and best[0].content == PREFERENCE
    assert best[0].mime_type == "text/plain" and best[0].metadata is not None
    assert best[0].metadata["from"] == "chat"  # the caller's metadata, plus the hit's fields
    assert best[0].metadata["id"].startswith("ev_") and best[0].metadata["score"] > 0
    budget = (await memory.query("budget currency", mode="keyword")).results
    assert budget[0].content == BUDGET and budget[0].mime_type == "application/json"
    runbook = await memory.query(MemoryContent(content="deploys freeze", mime_type="text/plain"))
    assert runbook.results[0].content == RUNBOOK
    assert runbook.results[0].mime_type == "text/markdown"
    # They are ctxbase events of the memory's session, written by its agent.
    events = cb.last_events("ag", 10)
    assert [e.agent_id for e in events] == ["planner"] * 3
    assert events[1].text == '{"budget": 50000, "currency": "EUR"}'


async def test_query_finds_what_other_agents_stored(cb: ContextBase) -> None:
    memory = await _filled(cb)
    cb.record("tool_result", session_id="ops", text="the billing queue lag is 40 s", agent_id="ops")
    hits = (await memory.query("billing queue lag", k=2, mode="keyword")).results
    assert hits[0].content == "the billing queue lag is 40 s"
    assert hits[0].mime_type == "text/plain" and hits[0].metadata is not None
    assert hits[0].metadata["session_id"] == "ops" and hits[0].metadata["agent_id"] == "ops"
    only_ag = (await memory.query("billing queue lag", session_id="ag", mode="keyword")).results
    assert all(m.metadata and m.metadata["session_id"] == "ag" for m in only_ag)
    assert (await memory.query("   ")).results == []


async def test_update_context_adds_the_recalled_memory(cb: ContextBase) -> None:
    memory = await _filled(cb, search_mode="keyword")
    context = UnboundedChatCompletionContext()
    assert (await memory.update_context(context)).memories.results == []  # nothing to ask
    question = UserMessage(content="Which database for the billing service?", source="user")
    await context.add_message(question)
    result = await memory.update_context(context)
    messages = await context.get_messages()
    assert messages[0] == question and len(messages) == 2
    assert isinstance(messages[1], SystemMessage)
    assert messages[1].content.startswith(HEADER) and f"1. {PREFERENCE}" in messages[1].content
    assert result.memories.results[0].content == PREFERENCE
    # Nothing recalled: the context is left as it was.
    await context.add_message(UserMessage(content="zzz qqq", source="user"))
    assert (await memory.update_context(context)).memories.results == []
    assert len(await context.get_messages()) == 3


async def test_update_context_from_an_assembly(cb: ContextBase) -> None:
    memory = await _filled(cb, recall="assemble", agent_role="planner")
    cb.anchor_document("# Billing\n\nThe billing service runs on PostgreSQL.", path="billing.md")
    context = UnboundedChatCompletionContext()
    await context.add_message(UserMessage(content="database of the billing service", source="u"))
    result = await memory.update_context(context)
    added = (await context.get_messages())[-1]
    assert isinstance(added, SystemMessage) and PREFERENCE in added.content
    assert "You are the" not in added.content  # the agent keeps its own system message
    assert "runs on PostgreSQL" in added.content
    assert HEADER not in added.content  # one heading: the assembled section's own
    metadata = [m.metadata or {} for m in result.memories.results]
    assert {"documents", "events"} <= {m["source"] for m in metadata}
    assert cb.get_trace(metadata[0]["context_id"])  # the assembly is traced


async def test_refuses_what_is_not_text(cb: ContextBase) -> None:
    memory = CtxbaseMemory(cb)
    for content in (
        MemoryContent(content=b"\x89PNG", mime_type=MemoryMimeType.BINARY),
        MemoryContent(content="x", mime_type=MemoryMimeType.IMAGE),
    ):
        with pytest.raises(ValidationError, match="ctxbase stores text") as err:
            await memory.add(content)
        assert err.value.field == "mime_type"
    with pytest.raises(ValidationError, match="not valid JSON"):
        await memory.add(MemoryContent(content="{budget: 5", mime_type=MemoryMimeType.JSON))
    with pytest.raises(ValidationError, match="not UTF-8"):
        await memory.add(MemoryContent(content=b"\xff\xfe", mime_type=MemoryMimeType.TEXT))
    await memory.add(MemoryContent(content="über".encode(), mime_type=MemoryMimeType.TEXT))
    assert [e.text for e in cb.last_events("autogen-memory", 5)] == ["über"]


async def test_clear_hides_only_this_memorys_events(cb: ContextBase) -> None:
    memory = await _filled(cb)
    other = cb.record("user_message", session_id="ag", text="PostgreSQL 18 is fine", agent_id="u")
    await memory.clear()
    assert [e.id for e in cb.last_events("ag", 10)] == [other.id]
    hits = (await memory.query("PostgreSQL 18", mode="keyword")).results
    assert [h.metadata and h.metadata["id"] for h in hits] == [other.id]
    hidden = [e.id for e in cb.store.list_events(cb.project, "ag", include_inactive=True)]
    assert cb.restore([i for i in hidden if i != other.id]) == 3  # nothing was deleted
    assert len(cb.last_events("ag", 10)) == 4
    await memory.close()  # leaves the base open
    await CtxbaseMemory(cb, session_id="never-used").clear()
    assert cb.last_events("ag", 1)


async def test_clear_leaves_another_agents_memory_on_the_same_session(cb: ContextBase) -> None:
    planner = await _filled(cb)
    coder = CtxbaseMemory(cb, session_id="ag", agent_id="coder")
    await coder.add(MemoryContent(content="coder: PostgreSQL 18 driver", mime_type="text/plain"))
    await planner.clear()
    kept = cb.last_events("ag", 10)
    assert [e.text for e in kept] == ["coder: PostgreSQL 18 driver"]
    hits = (await coder.query("PostgreSQL 18", mode="keyword")).results
    assert [h.content for h in hits] == ["coder: PostgreSQL 18 driver"]
    # an event added before memories named themselves: matched by the agent that recorded it
    old = cb.record(
        "assistant_message",
        session_id="ag",
        text="old planner note",
        agent_id="planner",
        data={"autogen_memory": {"mime_type": "text/plain", "content": "old planner note"}},
    )
    await planner.clear()
    assert [e.id for e in cb.last_events("ag", 10)] == [kept[0].id]
    assert cb.get_event(old.id, include_inactive=True).active is False
    await coder.clear()
    assert cb.last_events("ag", 10) == []


class _ScriptedClient(ChatCompletionClient):
    """A model client that answers from the last system message it was sent, and keeps
    what it was sent: the model side of an AssistantAgent, without a model."""

    def __init__(self) -> None:
        self.sent: list[Sequence[LLMMessage]] = []

    async def create(self, messages: Sequence[LLMMessage], **kwargs: Any) -> CreateResult:
        self.sent.append(list(messages))
        memory = [m.content for m in messages if isinstance(m, SystemMessage)][-1]
        answer = "Use " + memory.split("prefers ")[1].split(" for")[0]
        usage = RequestUsage(prompt_tokens=0, completion_tokens=0)
        return CreateResult(finish_reason="stop", content=answer, usage=usage, cached=False)

    def create_stream(  # type: ignore[override]
        self, messages: Sequence[LLMMessage], **kwargs: Any
    ) -> AsyncGenerator[str | CreateResult, None]:
        raise NotImplementedError

    async def close(self) -> None:
        return None

    def actual_usage(self) -> RequestUsage:
        return RequestUsage(prompt_tokens=0, completion_tokens=0)

    def total_usage(self) -> RequestUsage:
        return self.actual_usage()

    def count_tokens(self, messages: Sequence[LLMMessage], **kwargs: Any) -> int:
        return 0

    def remaining_tokens(self, messages: Sequence[LLMMessage], **kwargs: Any) -> int:
        return 100_000

    @property
    def capabilities(self) -> ModelCapabilities:  # type: ignore[override]
        return {"vision": False, "function_calling": False, "json_output": False}

    @property
    def model_info(self) -> ModelInfo:
        return {
            "vision": False,
            "function_calling": False,
            "json_output": False,
            "family": "unknown",
            "structured_output": False,
        }


async def test_an_assistant_agent_answers_from_ctxbase(cb: ContextBase) -> None:
    memory = await _filled(cb)
    client = _ScriptedClient()
    agent = AssistantAgent("planner", model_client=client, memory=[memory])
    result = await agent.run(
        task="Which database for the billing service?", cancellation_token=CancellationToken()
    )
    assert result.messages[-1].to_text() == "Use PostgreSQL 18"
    recalled = [m for m in result.messages if isinstance(m, MemoryQueryEvent)]
    assert recalled and recalled[0].content[0].content == PREFERENCE
    assert any(HEADER in str(m.content) for m in client.sent[0])


async def test_bad_options_are_refused_when_built(cb: ContextBase) -> None:
    memory = CtxbaseMemory(cb, name="mem")
    assert memory.name == "mem" and memory.project == cb.project
    with pytest.raises(ValidationError, match="search or assemble"):
        CtxbaseMemory(cb, recall="everything")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="between 1 and 50"):
        CtxbaseMemory(cb, k=0)
