"""The LangChain retriever under langchain-tests' standard retriever suite, plus the chat
message history, over a real ctxbase (SQLite, hash embedder)."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.retrievers import BaseRetriever
from langchain_tests.integration_tests import RetrieversIntegrationTests

from ctxbase import ContextBase
from ctxbase.errors import ConflictError, ValidationError
from ctxbase.integrations.langchain import CtxbaseChatHistory, CtxbaseRetriever

TEXTS = [
    "the orders query needs a Redis cache",
    "Redis cache hit rate is 0.2 after the change",
    "budget below fifty thousand for the cache cluster",
    "the tester found the cache key misses the user id",
    "订单查询加Redis缓存",
]


@pytest.fixture(scope="module")
def memory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ContextBase]:
    db = str(tmp_path_factory.mktemp("lc") / "lc.db")
    with ContextBase(db, project="lc", embedder="hash", background_embedding=False) as cb:
        for text in TEXTS:
            cb.record("user_message", session_id="s1", text=text)
        cb.anchor_document("# Cache\n\nThe orders query caches in Redis for 60 s.", path="c.md")
        yield cb


@pytest.mark.asyncio  # the suite's async test; the sync ones run as they are
class TestCtxbaseRetrieverStandard(RetrieversIntegrationTests):
    """langchain-tests' own suite: k in the constructor and in invoke, sync and async."""

    @pytest.fixture(autouse=True)
    def _memory(self, memory: ContextBase) -> None:
        self.cb = memory

    @property
    def retriever_constructor(self) -> type[BaseRetriever]:
        return CtxbaseRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"cb": self.cb}

    @property
    def retriever_query_example(self) -> str:
        return "Redis cache"


class TestAssembleRetrieverStandard(TestCtxbaseRetrieverStandard):
    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"cb": self.cb, "mode": "assemble", "agent_role": "coder"}


def test_search_documents_carry_ids_and_scores(memory: ContextBase) -> None:
    docs = CtxbaseRetriever(cb=memory, k=2, search_mode="keyword").invoke("tester cache key")
    assert docs[0].page_content == TEXTS[3]
    assert docs[0].id and docs[0].id.startswith("ev_")
    assert docs[0].metadata["session_id"] == "s1" and docs[0].metadata["score"] > 0
    context = CtxbaseRetriever(cb=memory, mode="assemble", k=10).invoke("orders Redis cache")
    assert all(isinstance(d, Document) and d.metadata["context_id"] for d in context)
    assert {d.metadata["source"] for d in context} >= {"documents"}
    assert memory.get_trace(context[0].metadata["context_id"])  # the assembly is traced


def test_chat_history_round_trip(tmp_path: Path) -> None:
    with (
        warnings.catch_warnings(),
        ContextBase(str(tmp_path / "h.db"), project="h", embedder="hash") as cb,
    ):
        warnings.simplefilter("ignore", DeprecationWarning)
        history = CtxbaseChatHistory(cb, "chat", agent_id="coder", agent_role="coder")
        sent = [
            SystemMessage("you write SQL"),
            HumanMessage("上次那个SQL再跑一次"),
            AIMessage("", tool_calls=[{"name": "run_sql", "args": {"q": "SELECT 1"}, "id": "c1"}]),
            ToolMessage("1 row", tool_call_id="c1"),
            AIMessage("done: 1 row"),
        ]
        history.add_messages(sent[:2])
        history.add_messages(sent[2:])
        assert history.messages == sent
        # They are ctxbase events: typed, attributed, chained, searchable.
        events = cb.last_events("chat", 10)
        assert [e.type for e in events] == [
            "system",
            "user_message",
            "assistant_message",
            "tool_result",
            "assistant_message",
        ]
        assert [e.agent_id for e in events][1:3] == ["user", "coder"]
        assert [c.id for c in cb.causal_chain(events[-1].id)] == [e.id for e in events[-2::-1]]
        assert cb.search("SQL", preset="keyword").results
        # the tool-call-only message reads as its call, as capture_messages stores it; the
        # LangChain serialisation is not searchable text (it is in metadata)
        assert events[2].text == 'run_sql(q="SELECT 1")'
        for word in ("langchain_message", "additional_kwargs", "human"):
            assert not cb.search(word, preset="keyword").results, word
        # a message with nothing to read is kept (it round-trips) and found by no search
        history.add_messages([HumanMessage("")])
        assert history.messages[-1] == HumanMessage("")
        assert cb.last_events("chat", 1)[0].text is None
        assert not cb.search("content type data", preset="keyword").results
        # Another agent's event in the session reads back as a message too.
        cb.record("user_message", session_id="chat", text="and the cache?", agent_id="tester")
        assert history.messages[-1] == HumanMessage("and the cache?")
        history.clear()  # hides what this history recorded; the tester's message stays
        assert history.messages == [HumanMessage("and the cache?")]
        assert cb.last_events("chat", 1)[0].metadata.get("langchain_message") is None
        history.clear()  # clearing an empty history, or one never written, is no error
        CtxbaseChatHistory(cb, session_id="never-written").clear()


def test_chat_history_clear_leaves_other_agents_messages(tmp_path: Path) -> None:
    with ContextBase(str(tmp_path / "s.db"), project="s", embedder="hash") as cb:
        a = CtxbaseChatHistory(cb, "shared", agent_id="agent-a")
        b = CtxbaseChatHistory(cb, "shared", agent_id="agent-b")
        b.add_messages([HumanMessage("B asks: which region?"), AIMessage("B: eu-west-1")])
        a.add_messages([HumanMessage("A asks: which budget?"), AIMessage("A: 50k")])
        before = cb.last_events("shared", 10)
        a.clear()
        # B's user and assistant messages survive; A's (its user turn too) are hidden
        assert [m.text for m in b.messages] == ["B asks: which region?", "B: eu-west-1"]
        assert [m.text for m in a.messages] == ["B asks: which region?", "B: eu-west-1"]
        assert not cb.search("which budget 50k", preset="keyword").results
        # hidden, not forgotten: restore brings A's messages back, in their place
        assert cb.restore([e.id for e in before[2:]]) == 2
        assert [m.text for m in b.messages] == [
            "B asks: which region?",
            "B: eu-west-1",
            "A asks: which budget?",
            "A: 50k",
        ]
        # an event recorded before histories named themselves: the agent's own turn goes
        cb.record(
            "assistant_message",
            session_id="shared",
            agent_id="agent-a",
            data={"langchain_message": {"type": "ai", "data": {"content": "old A"}}},
        )
        a.clear()
        assert [m.text for m in b.messages] == ["B asks: which region?", "B: eu-west-1"]


def test_chat_history_keeps_repeated_messages_and_refuses_an_archive(tmp_path: Path) -> None:
    # LangChain hands add_messages only the new messages: each is stored, even a repeat.
    with ContextBase(str(tmp_path / "r.db"), project="r", embedder="hash") as cb:
        history = CtxbaseChatHistory(cb, "chat")
        for m in (AIMessage("Drop orders_tmp?"), HumanMessage("yes")) * 2:
            history.add_messages([m])
        assert [m.text for m in history.messages] == ["Drop orders_tmp?", "yes"] * 2
        cb.archive_session("chat")
        with pytest.raises(ConflictError, match="archived"):
            history.add_messages([HumanMessage("yes")])
        assert len(history.messages) == 4


def test_chat_history_refuses_a_bad_session_id_before_any_read(tmp_path: Path) -> None:
    with ContextBase(str(tmp_path / "b.db"), project="b", embedder="hash") as cb:
        with pytest.raises(ValidationError) as err:
            CtxbaseChatHistory(cb, "第一天 的 会话\n")  # a read answered [] before
        assert err.value.field == "session_id"
