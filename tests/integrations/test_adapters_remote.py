"""The AutoGen and LlamaIndex adapters over the remote SDK (`ctxbase.connect` to a real
server on a local port) give what they give over an embedded base."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from autogen_core.memory import MemoryContent, MemoryMimeType
from llama_index.core.base.llms.types import ChatMessage, MessageRole

import ctxbase
from ctxbase.integrations.autogen_memory import CtxbaseMemory
from ctxbase.integrations.llamaindex import CtxbaseChatMemory, CtxbaseRetriever
from ctxbase.serve.keys import create_key
from ctxbase.serve.sdk import Client
from ctxbase.serve.server import BackgroundServer
from ctxbase.serve.settings import ServerSettings
from ctxbase.store import open_store


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Client]:
    db = str(tmp_path_factory.mktemp("remote") / "serve.db")
    settings = {"db": db, "port": 0, "embedder": "hash", "rate_limit_per_s": 0}
    server = BackgroundServer(ServerSettings.model_validate(settings)).start()
    project = f"rem-{uuid.uuid4().hex[:8]}"
    store = open_store(db)
    try:
        key = create_key(store, projects=[project], role="admin", name="adapters").key
    finally:
        store.close()
    try:
        with ctxbase.connect(server.url, api_key=key, project=project) as remote:
            yield remote
    finally:
        server.stop()


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
