"""`ctxbase mcp` as a subprocess, driven over stdio by the official MCP client."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

from ctxbase import ContextBase
from ctxbase.integrations.tools import openai_tools

SRC = str(Path(__file__).resolve().parents[2] / "src")


def payload(result: Any) -> Any:
    return json.loads(result.content[0].text)


def test_every_tool_over_stdio(tmp_path: Path) -> None:
    db = str(tmp_path / "mcp.db")
    env = {**os.environ, "PYTHONPATH": SRC}
    params = StdioServerParameters(
        command=sys.executable,
        args=[
            "-m",
            "ctxbase",
            "--db",
            db,
            "--embedder",
            "hash",
            "--project",
            "shop",
            "mcp",
            "--agent",
            "coder",
            "--agent-role",
            "coder",
        ],
        env=env,
    )
    seen: dict[str, Any] = {}

    async def run() -> None:
        async with (
            stdio_client(params) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            tools = (await session.list_tools()).tools
            seen["tools"] = {t.name: t for t in tools}

            async def call(name: str, args: dict[str, Any]) -> Any:
                return await session.call_tool(name, args)

            seen["first"] = await call(
                "remember", {"text": "订单查询加Redis缓存, budget below 50k", "session_id": "s1"}
            )
            first = payload(seen["first"])["event_id"]
            seen["second"] = await call(
                "remember",
                {
                    "text": "cache added, hit rate 0.2",
                    "session_id": "s1",
                    "parent_event_ids": [first],
                },
            )
            seen["fact"] = await call(
                "remember", {"text": "50000", "fact_key": "budget", "session_id": "s1"}
            )
            seen["search"] = await call("search_memory", {"query": "Redis缓存", "top_k": 3})
            floor = {"query": "Redis缓存", "top_k": 3, "min_similarity": 0.3}
            seen["floored"] = await call("search_memory", floor)
            seen["assemble"] = await call(
                "assemble_context", {"intent": "why is the cache slow", "session_id": "s1"}
            )
            context_id = payload(seen["assemble"])["context_id"]
            seen["trace"] = await call("get_trace", {"context_id": context_id})
            seen["sessions"] = await call("list_sessions", {})
            seen["forget"] = await call("forget", {"event_ids": [first]})
            seen["after_forget"] = await call("search_memory", {"query": "Redis缓存"})
            seen["forget_nope"] = await call("forget", {"session_id": "nope"})
            seen["forget_some"] = await call("forget", {"event_ids": [first], "session_id": "nope"})
            # Bad calls come back as tool errors naming the argument; the server lives on.
            seen["bad_type"] = await call("search_memory", {"query": 42})
            seen["bad_floor"] = await call("search_memory", {"query": "x", "min_similarity": 2})
            seen["missing"] = await call("get_trace", {})
            seen["extra"] = await call("list_sessions", {"project": "another"})
            seen["unknown_trace"] = await call("get_trace", {"context_id": "ctx_nope"})
            seen["unknown_tool"] = await call("drop_tables", {})
            seen["bad_parent"] = await call(
                "remember", {"text": "x", "parent_event_ids": ["ev_missing"]}
            )
            seen["resources"] = await session.list_resources()
            seen["templates"] = await session.list_resource_templates()
            seen["session_res"] = await session.read_resource("ctxbase://sessions/s1")
            with pytest.raises(MCPError, match="not found"):
                await session.read_resource("ctxbase://sessions/nope")
            seen["still_alive"] = await call("list_sessions", {"limit": 1})

    anyio.run(run)

    tools = seen["tools"]
    assert set(tools) == {
        "search_memory",
        "assemble_context",
        "remember",
        "forget",
        "list_sessions",
        "get_trace",
        "rate_memory",
    }
    # One definition: the MCP schemas are the OpenAI function parameters.
    exported = {t["function"]["name"]: t["function"] for t in openai_tools()}
    for name, tool in tools.items():
        assert tool.input_schema == exported[name]["parameters"]
        assert tool.description == exported[name]["description"] and len(tool.description) > 40
        assert "project" not in tool.input_schema["properties"]
    assert tools["search_memory"].annotations.read_only_hint is True
    assert tools["forget"].annotations.destructive_hint is True

    done = ("first", "second", "fact", "search", "floored", "assemble", "trace", "sessions")
    for name in (*done, "forget"):
        assert not seen[name].is_error, (name, seen[name].content)
    hits = payload(seen["search"])["results"]
    assert hits[0]["id"] == payload(seen["first"])["event_id"]
    # the floor leaves out the hit about something else (and, in the background
    # embedding's race, one with no vector yet)
    floored = {h["id"] for h in payload(seen["floored"])["results"]}
    assert floored <= {hits[0]["id"]} and len(hits) > 1
    assert hits[0]["agent_id"] == "coder"
    assembled = payload(seen["assemble"])
    assert "50000" in json.dumps(assembled["messages"], ensure_ascii=False)  # the fact
    assert payload(seen["trace"])["context_id"] == assembled["context_id"]
    assert [s["session_id"] for s in payload(seen["sessions"])["sessions"]] == ["s1"]
    assert payload(seen["forget"])["hidden"] == 1
    after = [h["id"] for h in payload(seen["after_forget"])["results"]]
    assert payload(seen["first"])["event_id"] not in after
    # an unknown session is not found, as the CLI and the library say: an error alone,
    # named in not_found beside an id that is found
    assert seen["forget_nope"].is_error
    error = payload(seen["forget_nope"])["error"]
    assert error["code"] == "not_found" and "session 'nope'" in error["message"], error
    some = payload(seen["forget_some"])
    assert not seen["forget_some"].is_error and some["not_found"] == ["nope"], some
    assert some["unchanged"] == [payload(seen["first"])["event_id"]]

    fields = {
        "bad_type": "query",
        "bad_floor": "min_similarity",
        "missing": "context_id",
        "extra": "project",
        "unknown_tool": "name",
        "bad_parent": "parent_event_ids[0]",
    }
    for name, field in fields.items():
        assert seen[name].is_error, name
        assert payload(seen[name])["error"]["field"] == field, (name, seen[name].content)
    assert payload(seen["unknown_trace"])["error"]["code"] == "not_found"
    assert not seen["still_alive"].is_error

    assert [str(r.uri) for r in seen["resources"].resources] == ["ctxbase://sessions"]
    assert {t.uri_template for t in seen["templates"].resource_templates} == {
        "ctxbase://sessions/{session_id}",
        "ctxbase://traces/{context_id}",
    }
    events = json.loads(seen["session_res"].contents[0].text)
    assert [e["text"] for e in events][-1] == "cache added, hit rate 0.2"

    # Everything landed in the configured project, under the configured agent.
    with ContextBase(db, project="shop", embedder=None) as cb:
        stored = cb.last_events("s1", 10, project="shop")
        assert {e.agent_id for e in stored} == {"coder"}
        assert "default" not in cb.list_projects()  # nothing written there


def test_cli_refuses_a_bad_agent_id(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from ctxbase.cli import main

    code = main(["--db", str(tmp_path / "x.db"), "--embedder", "none", "mcp", "--agent", "a b"])
    assert code == 2
    assert "agent" in capsys.readouterr().err


def test_the_stdio_server_warms_the_model_and_the_segmenter_in_the_background(
    tmp_path: Path,
) -> None:
    from ctxbase.retrieve import tokenize
    from ctxbase.retrieve.embed import HashingEmbedder
    from ctxbase.serve.cli_commands import warm_in_background

    class Recording(HashingEmbedder):
        def __init__(self) -> None:
            super().__init__()
            self.queries: list[str] = []

        def embed_query(self, text: str) -> Any:
            self.queries.append(text)
            return super().embed_query(text)

    embedder = Recording()
    with ContextBase(str(tmp_path / "w.db"), embedder=embedder) as cb:
        thread = warm_in_background(cb)
        thread.join(timeout=60)
        assert not thread.is_alive() and thread.daemon  # never holds the process open
        assert embedder.queries == ["warm up"]  # the model ran once before any tool call
        assert tokenize.load_segmenter() is False  # the dictionary was loaded already
