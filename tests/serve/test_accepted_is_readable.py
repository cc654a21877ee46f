"""Property: whatever the REST API accepts can be read back by every read endpoint.

Hypothesis generates events, batches, entities and state values, nasty ones included (deep
nesting, NaN and Infinity, huge integers, lone surrogates, empty and blank text, NUL
characters), and sends them to a real server. An accepted write (2xx) must leave every read
of the project answering 2xx, the remote SDK included; a refused one must be a 4xx.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import event as note
from hypothesis import strategies as st
from live_server import Live

import ctxbase

# Text with what breaks things: lone surrogates (category Cs), NUL, blanks, CJK.
nasty_text = st.one_of(
    st.sampled_from(["", " ", "\t\n", "\x00", "\ud800", "a\udfffb", "缓存", "redis cache"]),
    st.text(st.characters(codec=None, categories=None), max_size=20),
)
# Mostly well-formed, so that plenty of writes are accepted and then read back.
plain_text = st.one_of(
    st.sampled_from(["redis cache", "订单查询要加缓存", "a", "SELECT * FROM orders"]),
    st.text(st.characters(exclude_categories=["Cs"]), min_size=1, max_size=20),
)
some_text = st.one_of(plain_text, plain_text, nasty_text)
numbers = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
)
scalars = st.one_of(st.none(), st.booleans(), numbers, nasty_text)


def _nest(depth: int, leaf: Any, as_dict: bool) -> Any:
    value = leaf
    for _ in range(depth):
        value = {"k": value} if as_dict else [value]
    return value


deep = st.builds(_nest, st.integers(1, 300), scalars, st.booleans())
json_values = st.one_of(
    deep,
    st.recursive(
        scalars,
        lambda kids: st.one_of(
            st.lists(kids, max_size=3), st.dictionaries(nasty_text, kids, max_size=3)
        ),
        max_leaves=8,
    ),
)
json_objects = st.dictionaries(nasty_text, json_values, max_size=3)
stamps = st.one_of(st.none(), numbers)
event_types = st.sampled_from(["user_message", "tool_invocation", "tool_result"] * 3 + ["nope"])
plain_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-(2**40), 2**40), plain_text),
    lambda kids: st.one_of(
        st.lists(kids, max_size=3), st.dictionaries(plain_text, kids, max_size=3)
    ),
    max_leaves=6,
)
some_values = st.one_of(plain_values, plain_values, json_values)


@st.composite
def events(draw: st.DrawFn, session: str) -> dict[str, Any]:
    body: dict[str, Any] = {"type": draw(event_types), "session_id": session}
    if draw(st.integers(0, 3)):
        body["text"] = draw(some_text)
    if draw(st.booleans()):
        body["data"] = draw(some_values)
    if not draw(st.integers(0, 3)):
        body["metadata"] = draw(json_objects)
    if not draw(st.integers(0, 3)):
        body["ts"] = draw(stamps)
    if not draw(st.integers(0, 3)):
        body["importance"] = draw(numbers)
    if not draw(st.integers(0, 3)):
        body["agent_role"] = draw(some_text)
    return body


@st.composite
def writes(draw: st.DrawFn) -> tuple[str, str, dict[str, Any], dict[str, Any]]:
    """(method, path under the project, query params, JSON body)."""
    session = f"s-{uuid.uuid4().hex[:8]}"
    kind = draw(st.sampled_from(["event", "queue", "batch", "entity", "state"]))
    if kind == "event":
        return "POST", "/events", {}, draw(events(session))
    if kind == "queue":
        return "POST", "/events/queue", {}, draw(events(session))
    if kind == "batch":
        batch = draw(st.lists(events(session), min_size=1, max_size=3))
        return "POST", "/events/batch", {}, {"events": batch, "wait": draw(st.booleans())}
    if kind == "entity":
        body: dict[str, Any] = {"type": draw(some_text), "name": draw(some_text)}
        if draw(st.booleans()):
            body["text"] = draw(some_text)
        if draw(st.booleans()):
            body["properties"] = draw(
                st.one_of(
                    st.dictionaries(plain_text, plain_values, max_size=3),
                    json_objects,
                    st.fixed_dictionaries(
                        {"line_start": numbers, "importance": numbers, "path": scalars}
                    ),
                )
            )
        if not draw(st.integers(0, 3)):
            body["version"] = draw(st.integers(min_value=-5, max_value=2**70))
        return "POST", "/entities", {}, body
    params = {"key": "k", "scope_id": session}
    return "PUT", "/state", params, {"value": draw(some_values)}


def _send(c: httpx.Client, method: str, path: str, params: dict[str, Any], body: Any) -> Any:
    # Python's JSON writes NaN/Infinity and \\ud800 escapes: what a careless client sends.
    raw = json.dumps(body, allow_nan=True)
    return c.request(
        method, path, params=params, content=raw, headers={"content-type": "application/json"}
    )


@pytest.fixture(scope="module")
def project(live: Live) -> tuple[str, str]:
    pid = f"prop-{uuid.uuid4().hex[:8]}"
    return pid, live.key(pid, role="write")


@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(write=writes(), query=nasty_text)
def test_what_is_accepted_reads_back_everywhere(
    live: Live, project: tuple[str, str], write: Any, query: str
) -> None:
    pid, key = project
    method, path, params, body = write
    base = f"/v1/projects/{pid}"
    with live.client(key) as c:
        r = _send(c, method, base + path, params, body)
        note(f"{path} -> {r.status_code}")
        assert r.status_code < 500, r.text
        if r.status_code >= 400:
            assert r.json()["error"]["field"], r.text  # a refusal names its field
            return
        assert c.post(f"{base}/flush").status_code == 204
        session = params.get("scope_id") or (
            body.get("session_id") or body.get("events", [{}])[0].get("session_id")
        )
        reads = [
            c.get(f"{base}/entities"),
            c.get(f"{base}/relations"),
            c.get(f"{base}/sessions"),
            c.post(f"{base}/search", json={"query": "cache"}),
            c.post(
                "/v1/context/assemble",
                json={"project_id": pid, "agent_role": "coder", "user_intent": "cache"},
            ),
        ]
        if session:
            reads += [
                c.get(f"{base}/state", params={"scope_id": session}),
                c.get(f"{base}/state/history", params={"scope_id": session}),
            ]
        if session and path != "/state":  # a state write makes no session to list
            reads.append(c.get(f"{base}/events", params={"session_id": session}))
        for read in reads:
            assert read.status_code == 200, (read.request.url, read.text)
        # a generated query: answered or refused, never a server error
        found = _send(c, "POST", f"{base}/search", {}, {"query": query, "preset": "keyword"})
        assert found.status_code in (200, 422), found.text
    # the remote SDK rebuilds the library's models from the same answers
    sdk = ctxbase.connect(live.url, api_key=key, project=pid)
    try:
        sdk.list_entities()
        if session and path != "/state":
            for event in sdk.last_events(session, 50):
                assert event.text is None or isinstance(event.text, str)
        if session:
            sdk.get_facts(scope_id=session)
    finally:
        sdk.close()
