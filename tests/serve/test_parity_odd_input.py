"""Inputs a user may well send, answered alike embedded and over HTTP on both backends: the
ids "." and ".." (allowed by the id rule), an id with a trailing newline (no id holds one),
a message id holding "/", ids longer than any id (not found), and bad arguments that
embedded refuses as ValidationError (a relation direction, a version 0, values JSON cannot
carry, an idle timeout of 0)."""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from live_server import Live, embedded_and_remote, serve_on_param


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Live]:
    yield from serve_on_param(request, tmp_path_factory, "parity-odd")


def _error(call: Callable[[], object]) -> tuple[str, str]:
    """The error class a call raised and its field, or ("ok", repr of the answer)."""
    try:
        answer = call()
    except Exception as exc:  # the class is what is compared
        return type(exc).__name__, str(getattr(exc, "field", ""))
    return "ok", repr(answer)


def _scenario(api: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    out["dot_entity"] = api.upsert_entity("note", "dot", "a dot", id=".").id
    out["dot_read"] = api.get_entity(".").name
    out["dots_entity"] = api.upsert_entity("note", "dots", "two dots", id="..").id
    out["dots_read"] = api.get_entity("..").name
    out["dot_session"] = api.create_session("..").session_id
    out["dot_session_read"] = api.get_session("..").session_id
    api.upsert_entity("note", "n", "t", id="n1")
    out["newline_id"] = _error(lambda: api.get_entity("n1\n"))
    api.create_session("s1")
    api.record("user_message", session_id="s1", text="截止日期是周五", event_id="ev_a/1")
    api.expire_message("s1", "ev_a/1")
    out["expired_marks"] = api.get_event("ev_a/1").marks
    out["direction"] = _error(lambda: api.relationships("n1", direction="up"))
    api.set_fact("k", 1, scope_id="s1", scope="session")
    out["version_0"] = _error(lambda: api.rollback_fact("k", 0, scope_id="s1", scope="session"))
    day = {"d": datetime.date(2025, 1, 2)}
    out["date_property"] = _error(lambda: api.upsert_entity("note", "x", "t", properties=day))
    nan = {"d": float("nan")}
    out["nan_property"] = _error(lambda: api.upsert_entity("note", "y", "t", properties=nan))
    out["idle_0"] = _error(lambda: api.expire_idle_sessions(idle_timeout_s=0))
    out["sessions_left"] = sorted(s.status for s in api.list_sessions())
    long_scope = "a" * 201
    out["long_scope"] = _error(lambda: api.set_fact("k", 1, scope_id=long_scope, scope="session"))
    out["empty_scope"] = _error(lambda: api.get_facts(scope_id="", scope="session"))
    out["int_keys"] = api.set_fact("ik", {1: "a"}, scope_id="s1", scope="session").value
    long_id = "e" * 300  # no id is that long: not found, as any id never stored
    out["long_event"] = _error(lambda: api.get_event(long_id))
    out["long_causes"] = _error(lambda: api.causal_chain(long_id))
    out["long_effects"] = _error(lambda: api.effects(long_id))
    out["long_relation"] = _error(lambda: api.close_relationship(long_id))
    out["long_message"] = _error(lambda: api.expire_message("s1", long_id))
    out["long_trace"] = _error(lambda: api.get_trace(long_id))
    out["long_entity"] = _error(lambda: api.get_entity(long_id))
    out["long_node"] = _error(lambda: api.relationships(long_id))
    out["long_hood"] = _error(lambda: api.neighbourhood(long_id))
    out["long_session"] = _error(lambda: api.get_session(long_id))
    out["long_rated"] = _error(lambda: api.feedback(long_id, "wrong"))
    try:
        api.get_trace("ctx/a:b@c")
    except Exception as exc:  # the class and what it says are compared
        out["trace_with_slash"] = (type(exc).__name__, str(exc))
    return out


def test_odd_input_is_answered_alike_embedded_and_remote(
    server: Live, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    local, remote = embedded_and_remote(server, tmp_path, request, _scenario)
    assert remote == local
    assert (local["dot_entity"], local["dot_read"]) == (".", "dot")
    assert (local["dots_entity"], local["dots_read"]) == ("..", "dots")
    assert local["dot_session"] == local["dot_session_read"] == ".."
    assert local["newline_id"][0] == "NotFoundError"
    for call in ("event", "causes", "effects", "relation", "message", "trace", "entity"):
        assert local[f"long_{call}"][0] == "NotFoundError", call
    assert local["long_node"] == ("ok", "[]")  # no relations, as for any unknown node
    assert local["expired_marks"] == ["retracted"]
    assert local["direction"] == ("ValidationError", "direction")
    assert local["version_0"] == ("ValidationError", "to_version")
    assert local["date_property"] == ("ValidationError", "properties")
    assert local["nan_property"] == ("ValidationError", "properties")
    assert local["idle_0"] == ("ValidationError", "idle_timeout_s")
    assert local["sessions_left"] == ["active", "active"]  # the refused sweep expired none
    assert local["long_scope"] == local["empty_scope"] == ("ValidationError", "scope_id")
    assert local["int_keys"] == {"1": "a"}  # as JSON stores it and every read gives it back
    assert local["trace_with_slash"][0] == "NotFoundError"
    assert "no such route" not in local["trace_with_slash"][1]
