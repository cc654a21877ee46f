"""The MCP endpoint of `ctxbase serve` (streamable HTTP), driven by the official MCP client
against a real server: the same API keys as the REST API decide the project and the role."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2  # the MCP client's HTTP library
import pytest
from live_server import Live, start
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from ctxbase.errors import NotFoundError
from ctxbase.serve.keys import key_agent, parse_key


def key_id(key: str) -> str:
    parsed = parse_key(key)
    assert parsed is not None
    return parsed[0]


def mcp_call(url: str, key: str | None, *calls: tuple[str, dict[str, Any]]) -> list[Any]:
    """Connect, initialize and run `calls` (tool name, arguments) in order."""

    async def run() -> list[Any]:
        headers = {} if key is None else {"Authorization": f"Bearer {key}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=30) as http,
            streamable_http_client(url, http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            out: list[Any] = [await session.list_tools()]
            for name, args in calls:
                out.append(await session.call_tool(name, args))
            return out

    return anyio.run(run)


def endpoint(live: Live, pid: str) -> str:
    return f"{live.url}/v1/projects/{pid}/mcp"


def payload(result: Any) -> Any:
    return json.loads(result.content[0].text)


def test_tools_run_in_the_keys_project(live: Live, pid: str, other_pid: str) -> None:
    key = live.key(pid, role="write")
    tools, stored, found, bad = mcp_call(
        endpoint(live, pid),
        key,
        ("remember", {"text": "the orders query needs a Redis cache", "session_id": "s1"}),
        ("search_memory", {"query": "Redis cache orders"}),
        ("search_memory", {"query": "x", "top_k": 0}),
    )
    assert {t.name for t in tools.tools} >= {"search_memory", "remember", "get_trace"}
    assert not stored.is_error
    event_id = payload(stored)["event_id"]
    assert [h["id"] for h in payload(found)["results"]][:1] == [event_id]
    assert bad.is_error and payload(bad)["error"]["field"] == "top_k"
    with httpx.Client(base_url=live.url, headers={"Authorization": f"Bearer {key}"}) as http:
        event = http.get(f"/v1/projects/{pid}/events/{event_id}").json()
    assert event["project_id"] == pid
    # the key's agent, not anything the model said, and the same as the key's REST writes
    assert event["agent_id"] == key_agent(key_id(key))
    with httpx.Client(base_url=live.url, headers={"Authorization": f"Bearer {key}"}) as http:
        body = {"type": "user_message", "session_id": "s1", "text": "sent over REST"}
        rest = http.post(f"/v1/projects/{pid}/events", json=body).json()
        agents = http.get(f"/v1/projects/{pid}/events", params={"session_id": "s1", "n": 10}).json()
    assert rest["agent_id"] == event["agent_id"]
    assert {e["agent_id"] for e in agents} == {f"key:{key_id(key)}"}
    # Another project's endpoint knows nothing of it, and this key cannot reach it.
    other = live.key(other_pid, role="write")
    _, found_elsewhere = mcp_call(
        endpoint(live, other_pid), other, ("search_memory", {"query": "Redis cache orders"})
    )
    assert payload(found_elsewhere)["results"] == []


def test_the_key_decides_access(live: Live, pid: str, other_pid: str) -> None:
    post = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {"Accept": "application/json, text/event-stream"}
    with httpx.Client(base_url=live.url, timeout=30, headers=headers) as http:
        assert http.post(f"/v1/projects/{pid}/mcp", json=post).status_code == 401
        wrong = live.key(other_pid)
        refused = http.post(
            f"/v1/projects/{pid}/mcp", json=post, headers={"Authorization": f"Bearer {wrong}"}
        )
        assert refused.status_code == 404  # as if the project did not exist
    reader = live.key(pid, role="read")
    _, denied, listed = mcp_call(
        endpoint(live, pid),
        reader,
        ("remember", {"text": "a read key cannot write"}),
        ("list_sessions", {}),
    )
    assert denied.is_error and payload(denied)["error"]["code"] == "forbidden"
    assert not listed.is_error and payload(listed)["sessions"] == []
    writer = live.key(pid, role="write")
    _, stored, hard = mcp_call(
        endpoint(live, pid),
        writer,
        ("remember", {"text": "to be forgotten", "session_id": "gone"}),
        ("forget", {"session_id": "gone", "hard": True}),
    )
    assert not stored.is_error
    assert hard.is_error and "admin" in payload(hard)["error"]["message"]


def test_tools_over_the_remote_client(live: Live, pid: str) -> None:
    """The same tools on `ctxbase.connect`: a process without the database can host them."""
    import ctxbase
    from ctxbase.integrations.tools import ToolScope, run_tool

    client = ctxbase.connect(live.url, api_key=live.key(pid, role="write"), project=pid)
    try:
        scope = ToolScope(client, agent_id="remote", role="write")
        stored = run_tool(scope, "remember", {"text": "deploy on Fridays is banned"})
        fact = run_tool(
            scope,
            "remember",
            {"text": "at least three", "fact_key": "replicas", "fact_scope": "project"},
        )
        assert fact["version"] == 1
        hits = run_tool(scope, "search_memory", {"query": "deploy Fridays", "mode": "keyword"})
        assert hits["results"][0]["id"] == stored["event_id"]
        ctx = run_tool(scope, "assemble_context", {"intent": "how many replicas"})
        assert "at least three" in json.dumps(ctx["messages"])  # the fact, in the context
    finally:
        client.close()


def test_no_auth_server_serves_mcp_locally(tmp_path: Path, pid: str) -> None:
    server = start(tmp_path, no_auth=True)
    try:
        _, stored = mcp_call(
            f"{server.url}/v1/projects/{pid}/mcp", None, ("remember", {"text": "local note"})
        )
        assert not stored.is_error
        with httpx.Client(base_url=server.url) as http:
            event = http.get(f"/v1/projects/{pid}/events/{payload(stored)['event_id']}").json()
        assert event["agent_id"] == "mcp" and event["project_id"] == pid
        bad = httpx.post(f"{server.url}/v1/projects/bad%20id/mcp", json={}, timeout=30)
        assert bad.status_code == 422 and bad.json()["error"]["field"] == "project_id"
    finally:
        server.stop()


def test_rate_limit_applies_to_mcp(tmp_path: Path, pid: str) -> None:
    server = start(tmp_path, rate_limit_per_s=0.01, rate_limit_burst=1)
    try:
        key = Live(server.url, server.settings.db, server).key(pid)
        post = {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {}}
        headers = {
            "Accept": "application/json, text/event-stream",
            "Authorization": f"Bearer {key}",
        }
        with httpx.Client(base_url=server.url, headers=headers, timeout=30) as http:
            first = http.post(f"/v1/projects/{pid}/mcp", json=post)
            second = http.post(f"/v1/projects/{pid}/mcp", json=post)
            metrics = http.get("/metrics").text
        assert first.status_code == 200
        assert second.status_code == 429 and int(second.headers["retry-after"]) >= 1
        assert "/v1/projects/{project_id}/mcp" in metrics
    finally:
        server.stop()


def test_forget_tool_hides_a_session_in_pages_over_the_remote_client(
    live: Live, pid: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A session longer than one page of `last_events` (REST allows 10,000) is hidden whole,
    page by page; the remote client was refused the one read of "every" event (422)."""
    import ctxbase
    from ctxbase.integrations import tools

    client = ctxbase.connect(live.url, api_key=live.key(pid, role="write"), project=pid)
    try:
        for n in range(8):
            client.record("user_message", session_id="long", text=f"note {n}")
        kept = client.record("user_message", session_id="short", text="one note").id
        scope = tools.ToolScope(client, agent_id="remote", role="write")
        assert tools.run_tool(scope, "forget", {"session_id": "short"})["hidden"] == 1
        monkeypatch.setattr(tools, "HIDE_PAGE", 3)  # pages of 3 stand for pages of 10,000
        done = tools.run_tool(scope, "forget", {"session_id": "long"})
        assert done["hidden"] == 8 and done["not_found"] == [] and done["unchanged"] == []
        assert client.last_events("long", 100) == []
        again = tools.run_tool(scope, "forget", {"session_id": "long"})
        assert again["hidden"] == 0
        # an unknown session is not found over the remote client too
        with pytest.raises(NotFoundError, match="session 'nope'"):
            tools.run_tool(scope, "forget", {"session_id": "nope"})
        some = tools.run_tool(scope, "forget", {"event_ids": [kept], "session_id": "nope"})
        assert some["unchanged"] == [kept] and some["not_found"] == ["nope"], some
    finally:
        client.close()


def test_facts_are_searched_and_forgotten_over_http(live: Live, pid: str) -> None:
    """search_memory finds a remembered fact's current value; forget deletes it by key and
    with its session (one nothing was captured in, which list_sessions shows)."""
    key = live.key(pid, role="write")
    _, *answers = mcp_call(
        endpoint(live, pid),
        key,
        ("remember", {"text": "50k", "fact_key": "budget", "fact_scope": "project"}),
        ("remember", {"text": "80k", "fact_key": "budget", "fact_scope": "project"}),
        ("remember", {"text": "PostgreSQL 16", "fact_key": "billing.db", "session_id": "s2"}),
        ("search_memory", {"query": "budget"}),
        ("list_sessions", {}),
        ("forget", {"fact_keys": ["budget"], "fact_scope": "project"}),
        ("forget", {"session_id": "s2"}),
        ("search_memory", {"query": "budget billing"}),
    )
    assert not any(a.is_error for a in answers), [payload(a) for a in answers]
    found = payload(answers[3])["facts"]
    assert [(f["key"], f["value"]) for f in found] == [("budget", "80k")]
    assert [s["session_id"] for s in payload(answers[4])["sessions"]] == ["s2"]
    assert payload(answers[5])["facts_deleted"] == ["budget"]
    assert payload(answers[6])["facts_deleted"] == ["billing.db"]
    assert "facts" not in payload(answers[7])


def _proxy(live: Live, key: str, *calls: tuple[str, dict[str, Any]]) -> list[Any]:
    """`ctxbase mcp --url URL --api-key KEY` (no --project, no --agent) over stdio."""
    import os
    import sys

    from mcp import StdioServerParameters, stdio_client

    src = str(Path(__file__).resolve().parents[2] / "src")
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "ctxbase", "mcp", "--url", live.url, "--api-key", key],
        env={**os.environ, "PYTHONPATH": src},
    )

    async def run() -> list[Any]:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            return [await session.call_tool(name, args) for name, args in calls]

    return anyio.run(run)


def test_the_proxy_uses_the_keys_project_and_agent(live: Live, pid: str) -> None:
    """Without --project the proxy serves the key's only project (as `ctxbase.connect`),
    and writes as the key's agent, as REST and HTTP MCP do for the same key."""
    key = live.key(pid, role="write")
    (stored,) = _proxy(live, key, ("remember", {"text": "proxy note", "session_id": "px"}))
    assert not stored.is_error, payload(stored)
    event_id = payload(stored)["event_id"]
    with live.client(key) as http:
        event = http.get(f"/v1/projects/{pid}/events/{event_id}").json()
    assert event["agent_id"] == key_agent(key_id(key))


def test_the_proxy_asks_for_a_project_when_the_key_has_several(
    live: Live, pid: str, other_pid: str, tmp_path: Path
) -> None:
    import os
    import subprocess
    import sys

    key = live.key(pid, other_pid, role="write")
    src = str(Path(__file__).resolve().parents[2] / "src")
    done = subprocess.run(
        [sys.executable, "-m", "ctxbase", "mcp", "--url", live.url, "--api-key", key],
        env={**os.environ, "PYTHONPATH": src},
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        cwd=tmp_path,
    )
    assert done.returncode != 0
    assert "--project: is needed: this key sees several projects (" in done.stderr, done.stderr
    assert done.stderr.count("--project") == 1, done.stderr  # the flag is named once
    assert pid in done.stderr and other_pid in done.stderr


def test_the_proxy_says_why_a_context_is_empty_and_names_it(live: Live, pid: str) -> None:
    """Over the remote client the assembly's trace comes with the answer, so the proxy's
    assemble_context gives the same header and note as the embedded tool."""
    key = live.key(pid, role="write")
    (answer,) = _proxy(live, key, ("assemble_context", {"intent": "what did we decide?"}))
    out = payload(answer)
    assert out["header"] == (
        f"context_id {out['context_id']} ({out['total_tokens']}/{out['max_tokens']} tokens)"
    )
    assert out["note"].startswith("nothing recalled: ")
