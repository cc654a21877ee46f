"""The LlamaIndex retriever and chat memory over a real ctxbase (SQLite and PostgreSQL, hash
embedder), directly and inside LlamaIndex's own query and chat engines driven by its
MockLLM (which answers with the prompt it was given, so the test reads what the model saw)."""

from __future__ import annotations

import pytest
from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.chat_engine import SimpleChatEngine
from llama_index.core.llms import MockLLM
from llama_index.core.memory import BaseMemory
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.schema import NodeWithScore

from ctxbase import ContextBase
from ctxbase.errors import ValidationError
from ctxbase.integrations.llamaindex import RECALL_HEADER, CtxbaseChatMemory, CtxbaseRetriever

CACHE_DOC = "# Orders cache\n\nThe orders query caches in Redis for 60 s; key order:{user_id}."
PREFERENCE = "Alice prefers PostgreSQL 18 for new services"


@pytest.fixture
def filled(cb: ContextBase) -> ContextBase:
    cb.record("user_message", session_id="s1", text=PREFERENCE, agent_id="alice")
    cb.record("tool_result", session_id="s1", text="the tester found the cache key misses the id")
    cb.anchor_document(CACHE_DOC, path="docs/cache.md")
    return cb


def test_retriever_gives_hits_as_scored_nodes(filled: ContextBase) -> None:
    nodes = CtxbaseRetriever(filled, k=2, search_mode="keyword").retrieve("tester cache key")
    assert len(nodes) == 2 and all(isinstance(n, NodeWithScore) for n in nodes)
    assert nodes[0].node.node_id.startswith("ev_")
    assert nodes[0].node.get_content() == "the tester found the cache key misses the id"
    assert nodes[0].node.metadata["session_id"] == "s1"
    assert nodes[0].score == nodes[0].node.metadata["score"] > (nodes[1].score or 0) > 0
    only_s2 = CtxbaseRetriever(filled, session_id="s2").retrieve("cache key")
    assert only_s2 == []


def test_retriever_of_an_assembled_context(filled: ContextBase) -> None:
    nodes = CtxbaseRetriever(filled, mode="assemble", k=10).retrieve("orders Redis cache key")
    sources = {n.node.metadata["source"] for n in nodes}
    assert "documents" in sources
    scores = [n.score or 0 for n in nodes]
    assert scores == sorted(scores, reverse=True)
    assert filled.get_trace(nodes[0].node.metadata["context_id"])  # the assembly is traced
    with pytest.raises(ValidationError, match="between 1 and 50"):
        CtxbaseRetriever(filled, k=0)


@pytest.mark.asyncio
async def test_retriever_async(filled: ContextBase) -> None:
    nodes = await CtxbaseRetriever(filled, k=1).aretrieve("which database does Alice prefer")
    assert nodes[0].node.get_content() == PREFERENCE


def test_query_engine_answers_from_ctxbase(filled: ContextBase) -> None:
    retriever = CtxbaseRetriever(filled, k=3)
    engine = RetrieverQueryEngine.from_args(retriever, llm=MockLLM())
    response = engine.query("what is the cache key of the orders query?")
    prompt = str(response)  # MockLLM answers with its prompt
    assert "key order:{user_id}" in prompt
    assert f"id: {response.source_nodes[0].node.node_id}" in prompt  # ids reach the model
    assert "score:" not in prompt and "kind:" not in prompt  # ranking details do not
    assert {n.node.node_id for n in response.source_nodes} == {
        n.node.node_id for n in retriever.retrieve("what is the cache key of the orders query?")
    }


def test_memory_round_trip_as_ctxbase_events(filled: ContextBase) -> None:
    memory = CtxbaseChatMemory.from_defaults(cb=filled, session_id="chat", agent_id="bot", k=0)
    assert isinstance(memory, BaseMemory)
    sent = [
        ChatMessage(role=MessageRole.SYSTEM, content="you write SQL"),
        ChatMessage(role=MessageRole.USER, content="上次那个SQL再跑一次"),
        ChatMessage(
            role=MessageRole.ASSISTANT,
            content="",
            additional_kwargs={"tool_calls": [{"id": "c1", "name": "run_sql"}]},
        ),
        ChatMessage(
            role=MessageRole.TOOL, content="1 row", additional_kwargs={"tool_call_id": "c1"}
        ),
        ChatMessage(role=MessageRole.ASSISTANT, content="done: 1 row"),
    ]
    memory.put_messages(sent[:2])
    for m in sent[2:]:
        memory.put(m)
    assert memory.get_all() == sent and memory.get() == sent
    events = filled.last_events("chat", 10)
    assert [e.type for e in events] == [
        "system",
        "user_message",
        "assistant_message",
        "tool_result",
        "assistant_message",
    ]
    assert [e.agent_id for e in events][1:3] == ["user", "bot"]
    assert [c.id for c in filled.causal_chain(events[-1].id)] == [e.id for e in events[-2::-1]]
    # the LlamaIndex form is metadata, not searchable text: the tool-call-only message is
    # found by no search for the words of its serialisation
    assert events[2].text is None and events[2].metadata["llama_index_message"]
    for word in ("llama_index_message", "additional_kwargs", "blocks"):
        assert not filled.search(word, preset="keyword").results, word
    # Another agent's message in the session reads back too; the window keeps the last ones.
    filled.record("user_message", session_id="chat", text="and the cache?", agent_id="tester")
    assert memory.get_all()[-1] == ChatMessage(role=MessageRole.USER, content="and the cache?")
    short = CtxbaseChatMemory(cb=filled, session_id="chat", history_messages=2, k=0)
    assert [m.content for m in short.get()] == ["done: 1 row", "and the cache?"]
    # A window that would start with a tool result whose call is outside it starts after it.
    cut = CtxbaseChatMemory(cb=filled, session_id="chat", history_messages=3, k=0)
    assert [m.content for m in cut.get()] == ["done: 1 row", "and the cache?"]


def test_memory_recalls_the_rest_of_the_project(filled: ContextBase) -> None:
    memory = CtxbaseChatMemory(cb=filled, session_id="chat", k=2, search_mode="keyword")
    assert memory.get() == []  # nothing said, nothing asked
    memory.put(ChatMessage(role=MessageRole.USER, content="which database does Alice prefer?"))
    first, *history = memory.get()
    assert first.role == MessageRole.SYSTEM and first.content is not None
    assert first.content.startswith(RECALL_HEADER) and PREFERENCE in first.content
    assert [m.content for m in history] == ["which database does Alice prefer?"]
    # An explicit input is what is looked for; hits already in the history are not repeated.
    recalled = memory.get(input="tester cache key")[0].content or ""
    assert "the tester found the cache key misses the id" in recalled
    assert "which database" not in recalled
    memory.put(ChatMessage(role=MessageRole.USER, content="zzz qqq"))
    assert memory.get()[0].role == MessageRole.USER  # nothing recalled: history only


def test_memory_reset_and_set_hide_only_its_own_messages(filled: ContextBase) -> None:
    memory = CtxbaseChatMemory(cb=filled, session_id="chat", k=0)
    memory.put(ChatMessage(role=MessageRole.USER, content="first"))
    other = filled.record("tool_result", session_id="chat", text="a tool ran", agent_id="x")
    memory.set([ChatMessage(role=MessageRole.USER, content="second")])
    assert [m.content for m in memory.get_all()] == ["second"]
    assert other.id in [e.id for e in filled.last_events("chat", 10)]
    memory.reset()
    assert memory.get_all() == [] and [e.id for e in filled.last_events("chat", 10)] == [other.id]
    hidden = filled.store.list_events(filled.project, "chat", include_inactive=True)
    assert filled.restore([e.id for e in hidden if not e.active]) == 2  # nothing was deleted
    assert [m.content for m in memory.get_all()] == ["first", "second"]
    CtxbaseChatMemory(cb=filled, session_id="never-used").reset()


def test_memory_reset_and_set_leave_another_agents_messages(filled: ContextBase) -> None:
    a = CtxbaseChatMemory(cb=filled, session_id="shared", agent_id="agent-a", k=0)
    b = CtxbaseChatMemory(cb=filled, session_id="shared", agent_id="agent-b", k=0)
    b.put_messages(
        [
            ChatMessage(role=MessageRole.USER, content="B asks: which region?"),
            ChatMessage(role=MessageRole.ASSISTANT, content="B: eu-west-1"),
        ]
    )
    a.put_messages(
        [
            ChatMessage(role=MessageRole.USER, content="A asks: which budget?"),
            ChatMessage(role=MessageRole.ASSISTANT, content="A: 50k"),
        ]
    )
    a.set([ChatMessage(role=MessageRole.USER, content="A again")])
    # B's user and assistant turns survive A's set; A's own (its user turn too) are hidden
    b_texts = ["B asks: which region?", "B: eu-west-1"]
    assert [m.content for m in b.get_all()] == [*b_texts, "A again"]
    a.reset()
    assert [m.content for m in b.get_all()] == b_texts
    assert [m.content for m in a.get_all()] == b_texts
    assert not filled.search("which budget 50k", preset="keyword").results
    b.reset()  # and B's reset leaves nothing of B, touching nothing else
    assert b.get_all() == []
    hidden = filled.store.list_events(filled.project, "shared", include_inactive=True)
    assert filled.restore([e.id for e in hidden[:2]]) == 2  # hidden, not deleted
    assert [m.content for m in a.get_all()] == b_texts
    # a message recorded before memories named themselves: the agent's own turn goes
    filled.record(
        "assistant_message",
        session_id="shared",
        agent_id="agent-a",
        data={"llama_index_message": {"role": "assistant", "blocks": [], "content": "old A"}},
        text="old A",
    )
    assert [m.content for m in b.get_all()] == [*b_texts, "old A"]
    a.reset()
    assert [m.content for m in b.get_all()] == b_texts


def test_chat_engine_keeps_its_conversation_in_ctxbase(filled: ContextBase) -> None:
    memory = CtxbaseChatMemory(cb=filled, session_id="support", agent_id="bot", k=1)
    engine = SimpleChatEngine.from_defaults(llm=MockLLM(), memory=memory)
    answer = str(engine.chat("which database does Alice prefer?"))
    assert RECALL_HEADER in answer and PREFERENCE in answer  # what the model was given
    events = filled.last_events("support", 10)
    assert [(e.type, e.agent_id) for e in events] == [
        ("user_message", "user"),
        ("assistant_message", "bot"),
    ]
    hits = filled.search("Alice prefer database", preset="keyword").results
    assert events[0].id in {h.item.owner_id for h in hits}  # other agents find the question
