"""Events that name no agent belong to the agent the client or context base was opened for,
the same embedded and over the SDK; a raw REST body without one is the key's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from live_server import Live

import ctxbase


def test_remote_events_take_the_clients_agent_then_the_keys(live: Live, pid: str) -> None:
    key = live.key(pid)
    key_id = key.split("_")[1]
    with ctxbase.connect(live.url, api_key=key, project=pid, agent_id="tester") as c:
        named = c.record("user_message", session_id="s", text="from the tester")
        explicit = c.record("user_message", session_id="s", text="relayed", agent_id="planner")
    with ctxbase.connect(live.url, api_key=key, project_id=pid) as c:  # the article's word
        assert c.project == pid
        anonymous = c.record("user_message", session_id="s", text="no agent named")
        stored = {e.id: e.agent_id for e in c.last_events("s", 10)}
    assert stored[named.id] == "tester"
    assert stored[explicit.id] == "planner"
    assert stored[anonymous.id] == "agent"  # as embedded without an agent id
    # the REST body without agent_id gets the same identity
    r = live.client(key).post(
        f"/v1/projects/{pid}/events",
        json={"type": "user_message", "session_id": "s", "text": "raw"},
    )
    assert r.status_code in (200, 201), r.text
    assert r.json()["agent_id"] == f"key:{key_id}"


def test_embedded_events_take_the_context_bases_agent(tmp_path: Path) -> None:
    with ctxbase.open(str(tmp_path / "a.db"), embedder="hash", agent_id="coder") as cb:
        own = cb.record("user_message", session_id="s", text="written by the coder")
        other = cb.record("user_message", session_id="s", text="quoted", agent_id="user")
    with ctxbase.open(str(tmp_path / "b.db"), embedder="hash") as cb:
        default = cb.record("user_message", session_id="s", text="nobody named")
    assert own.agent_id == "coder" and other.agent_id == "user"
    assert default.agent_id == "agent"


TOOL_TURNS = [
    {"role": "user", "content": "Which SQL did you run?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {
                    "name": "run_sql",
                    "arguments": '{"sql": "SELECT id\\nFROM orders_2024"}',
                },
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "3 rows"},
    {"role": "assistant", "content": "It returned 3 rows."},
]


def _turns(events: list[Any]) -> list[tuple[str, str, str | None]]:
    return [(e.type, e.agent_id, e.text) for e in events]


def test_message_lists_are_the_agents_the_same_embedded_and_remote(
    live: Live, pid: str, tmp_path: Path
) -> None:
    with ctxbase.open(str(tmp_path / "m.db"), embedder="hash", agent_id="coder") as cb:
        cb.capture_messages(TOOL_TURNS, session_id="s", sync=True)
        embedded = _turns(cb.last_events("s", 10))
    key = live.key(pid)
    with ctxbase.connect(live.url, api_key=key, project=pid, agent_id="coder") as c:
        ids = c.capture_messages(TOOL_TURNS, session_id="s", sync=True)
        remote = _turns(c.last_events("s", 10))
        found = [r.item.owner_id for r in c.search("orders_2024").results]
    assert remote == embedded
    assert remote[:3] == [
        ("user_message", "user", "Which SQL did you run?"),
        ("assistant_message", "coder", 'run_sql(sql="SELECT id\nFROM orders_2024")'),
        ("tool_invocation", "coder", 'run_sql(sql="SELECT id\nFROM orders_2024")'),
    ]
    assert {ids[1], ids[2]} & set(found)
    # a client without an agent id, and a REST body without assistant_id: "assistant"
    with ctxbase.connect(live.url, api_key=key, project=pid) as c:
        c.capture_messages([{"role": "assistant", "content": "hi"}], session_id="t", sync=True)
    r = live.client(key).post(
        f"/v1/projects/{pid}/messages",
        json={
            "session_id": "t",
            "messages": [{"role": "assistant", "content": "raw"}],
            "sync": True,
        },
    )
    assert r.status_code == 200, r.text
    with ctxbase.connect(live.url, api_key=key, project=pid) as c:
        assert [e.agent_id for e in c.last_events("t", 10)] == ["assistant", "assistant"]
