"""The framework adapters over the remote SDK (`ctxbase.connect` to a real server on a
local port) give what they give over an embedded base, and an agent with a `write` key may
delete what it stored."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from autogen_core.memory import MemoryContent, MemoryMimeType
from langchain_core.messages import AIMessage, HumanMessage
from llama_index.core.base.llms.types import ChatMessage, MessageRole

import ctxbase
from ctxbase.errors import NotFoundError
from ctxbase.integrations.autogen_memory import CtxbaseMemory
from ctxbase.integrations.langchain import CtxbaseChatHistory
from ctxbase.integrations.langgraph_store import CtxbaseStore
from ctxbase.integrations.llamaindex import CtxbaseChatMemory, CtxbaseRetriever
from ctxbase.serve.errors import PermissionDeniedError
from ctxbase.serve.keys import create_key
from ctxbase.serve.sdk import Client
from ctxbase.serve.server import BackgroundServer
from ctxbase.serve.settings import ServerSettings
from ctxbase.store import open_store


@dataclass
class Served:
    url: str
    db: str

    def key(self, project: str, role: str) -> str:
        store = open_store(self.db)
        try:
            return create_key(store, projects=[project], role=role, name="adapters").key
        finally:
            store.close()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    db = str(tmp_path_factory.mktemp("remote") / "serve.db")
    settings = {"db": db, "port": 0, "embedder": "hash", "rate_limit_per_s": 0}
    server = BackgroundServer(ServerSettings.model_validate(settings)).start()
    try:
        yield Served(server.url, db)
    finally:
        server.stop()


@pytest.fixture(scope="module")
def client(served: Served) -> Iterator[Client]:
    project = f"rem-{uuid.uuid4().hex[:8]}"
    key = served.key(project, "admin")
    with ctxbase.connect(served.url, api_key=key, project=project) as remote:
        yield remote


@pytest.mark.asyncio
async def test_autogen_memory_over_the_sdk(client: Client) -> None:
    memory = CtxbaseMemory(client, session_id="ag-remote")
    await memory.add(MemoryContent(content={"budget": 50000}, mime_type=MemoryMimeType.JSON))
    await memory.add(MemoryContent(content="deploys freeze on Friday", mime_type="text/plain"))
    hits = (await memory.query("budget", mode="keyword")).results
    assert hits[0].content == {"budget": 50000} and hits[0].mime_type == "application/json"
    await memory.clear()
    assert client.last_events("ag-remote", 10) == []
    assert (await memory.query("deploys freeze", mode="keyword")).results == []


def test_llamaindex_over_the_sdk(client: Client, tmp_path: Path) -> None:
    memory = CtxbaseChatMemory(cb=client, session_id="li-remote", k=1, search_mode="keyword")
    memory.put(ChatMessage(role=MessageRole.USER, content="the orders cache key is order:{id}"))
    memory.put(ChatMessage(role=MessageRole.ASSISTANT, content="noted"))
    assert [m.content for m in memory.get_all()] == ["the orders cache key is order:{id}", "noted"]
    node = CtxbaseRetriever(client, k=1, search_mode="keyword").retrieve("orders cache key")[0]
    assert node.node.get_content() == "the orders cache key is order:{id}"
    assert node.node.metadata["session_id"] == "li-remote"
    memory.reset()
    assert memory.get_all() == []


def test_a_read_key_reads_items_with_a_ttl(served: Served) -> None:
    """Reading refreshes an item's expiry, which writes: a key that may only read gets the
    item all the same (its expiry stays), over get and search."""
    project = f"ro-{uuid.uuid4().hex[:8]}"
    with (
        ctxbase.connect(served.url, api_key=served.key(project, "write"), project=project) as w,
        ctxbase.connect(served.url, api_key=served.key(project, "read"), project=project) as r,
    ):
        CtxbaseStore(w).put(("roles",), "t", {"v": 1}, ttl=10)
        before = CtxbaseStore(w)._load(("roles",), "t")
        reader = CtxbaseStore(r)
        got = reader.get(("roles",), "t")
        assert got is not None and got.value == {"v": 1}
        assert [i.key for i in reader.search(("roles",))] == ["t"]
        after = CtxbaseStore(w)._load(("roles",), "t")
        assert before is not None and after is not None
        assert after.expires_at == before.expires_at  # not refreshed by the read key
        with pytest.raises(PermissionDeniedError):
            reader.put(("roles",), "u", {"v": 2})
        # a project the key may not see is an error for every operation, not an empty
        # store (get answered None and delete passed, while search and put raised)
        elsewhere = CtxbaseStore(w, project=f"{project}-other")
        for call in (
            lambda: elsewhere.get(("roles",), "t"),
            lambda: elsewhere.delete(("roles",), "t"),
            lambda: elsewhere.search(("roles",)),
            lambda: elsewhere.put(("roles",), "t", {"v": 1}),
        ):
            with pytest.raises(NotFoundError, match="not visible to this key"):
                call()


def test_a_write_key_deletes_what_it_put(served: Served) -> None:
    project = f"wr-{uuid.uuid4().hex[:8]}"
    write = served.key(project, "write")
    with (
        ctxbase.connect(served.url, api_key=write, project=project, agent_id="agent-b") as b,
        ctxbase.connect(served.url, api_key=served.key(project, "admin"), project=project) as a,
    ):
        store = CtxbaseStore(b)
        ns = ("memories", "alice")
        store.put(ns, "k1", {"text": "Alice wants invoices in EUR"})
        store.put(ns, "k2", {"text": "Alice deploys on Tuesdays"})
        store.delete(ns, "k1")
        assert store.get(ns, "k1") is None
        assert [i.key for i in store.search(ns, query="invoices EUR")] == ["k2"]
        assert store._entity_id(ns, "k1") not in {
            c.item.owner_id for c in a.search("invoices EUR", preset="keyword").results
        }
        store.put(ns, "k1", {"text": "Alice wants invoices in CHF"})
        item = store.get(ns, "k1")
        assert item is not None and item.value == {"text": "Alice wants invoices in CHF"}
        # expired items go with a write key too
        short = CtxbaseStore(b, ttl={"default_ttl": 2.0 / 60})  # 2 s
        short.put(("ttl",), "k", {"text": "short lived"})
        assert a.search("short lived", preset="keyword").results
        time.sleep(2.2)
        # expired: out of other agents' searches and assemblies before any sweep
        assert short.get(("ttl",), "k") is None
        assert a.search("short lived", preset="keyword").results == []
        ctx = a.assemble_context(agent_role="coder", user_intent="short lived")
        gone = short._entity_id(("ttl",), "k")
        assert gone not in json.dumps(ctx.messages)
        assert gone in {d["id"] for d in a.get_trace(ctx.context_id)["dropped"]}
        assert short.sweep_ttl() == 1
        # forgetting for good is asked for, and needs an admin key
        with pytest.raises(PermissionDeniedError, match="admin"):
            CtxbaseStore(b, hard_delete=True).delete(ns, "k2")
        # the forget tool over the SDK (as `ctxbase mcp --url` runs it) says what the tool
        # says embedded, not the REST endpoints to call
        from ctxbase.integrations.tools import ToolScope, handle_tool_call

        said = b.capture("user_message", session_id="tools", text="to be forgotten")
        b.flush()
        answer = handle_tool_call(ToolScope(b), "forget", {"event_ids": [said], "hard": True})
        error = json.loads(answer)["error"]
        assert error["code"] == "forbidden" and error["message"] == (
            "hard forget needs an admin key; this key is not one; "
            "forget without hard=true hides instead"
        )
        CtxbaseStore(a, hard_delete=True).delete(ns, "k2")
        assert store.get(ns, "k2") is None

        # LangChain: B's clear hides B's messages, A's stay in the shared session
        CtxbaseChatHistory(a, "shared", agent_id="agent-a").add_messages(
            [HumanMessage("A: our SLA is 99.95 percent")]
        )
        hb = CtxbaseChatHistory(b, "shared", agent_id="agent-b")
        hb.add_messages([HumanMessage("B: on-call is weekly"), AIMessage("noted")])
        hb.clear()
        assert [m.text for m in hb.messages] == ["A: our SLA is 99.95 percent"]
