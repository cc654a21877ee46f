"""A record where its id goes (the Event `record` returns, the SessionInfo `create_session`
returns), or a number or None, is refused naming the field, embedded and remote alike, with
nothing written: not a TypeError or a database driver's error."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from live_server import Live, embedded_or_remote

from ctxbase import ValidationError

PROJECT = "ids-as-records"


@pytest.fixture(params=["embedded", "remote"])
def api(request: pytest.FixtureRequest, live: Live, tmp_path: Path) -> Iterator[Any]:
    yield from embedded_or_remote(request.param, live, tmp_path / "ids.db", PROJECT)


def test_a_record_where_its_id_goes_is_refused_naming_the_field(api: Any) -> None:
    ev = api.record("user_message", session_id="s1", text="hello orders")
    session = api.create_session("s9")
    calls: dict[str, tuple[Callable[[], Any], str]] = {
        "forget": (lambda: api.forget(event_ids=[ev]), "event_ids[0]"),
        "soft_delete": (lambda: api.soft_delete([ev]), "ids[0]"),
        "restore": (lambda: api.restore([ev]), "ids[0]"),
        "set_hidden": (lambda: api.set_hidden([ev]), "ids[0]"),
        "get_event": (lambda: api.get_event(ev), "event_id"),
        "causal_chain": (lambda: api.causal_chain(ev), "event_id"),
        "effects": (lambda: api.effects(ev), "event_id"),
        "parent": (
            lambda: api.record(
                "assistant_message", session_id="s1", text="x", parent_event_ids=[ev]
            ),
            "parent_event_ids[0]",
        ),
        "forget session": (lambda: api.forget(session_id=session), "session_id"),
        "last_events": (lambda: api.last_events(session), "session_id"),
        "assemble": (
            lambda: api.assemble_context(agent_role="coder", user_intent="x", session_id=session),
            "session_id",
        ),
        "forget number": (lambda: api.forget(entity_ids=[123]), "entity_ids[0]"),
        "forget None": (lambda: api.forget(event_ids=[None]), "event_ids[0]"),
        "get_entity": (lambda: api.get_entity(123), "entity_id"),
    }
    for name, (call, field) in calls.items():
        with pytest.raises(ValidationError) as info:
            call()
        assert info.value.field == field, (name, str(info.value))
        kind = "SessionInfo" if "session" in name or name in ("last_events", "assemble") else ""
        if kind:
            assert "pass the SessionInfo's id (.id)" in str(info.value), name
        elif "number" not in name and "None" not in name and name != "get_entity":
            assert "pass the Event's id (.id)" in str(info.value), name
    assert [e.id for e in api.last_events("s1")] == [ev.id]  # nothing written, nothing gone


def test_a_search_filter_given_a_session_record_says_to_pass_its_id(api: Any) -> None:
    session = api.create_session("s9")
    for given, field in ((session, "session_id"), ([session], "session_id[0]")):
        with pytest.raises(ValidationError) as info:
            api.search("orders", session_id=given)
        assert info.value.field == field and "pass the SessionInfo's id (.id)" in str(info.value)


def test_whole_project_is_refused_unless_alone_and_boolean(api: Any) -> None:
    api.record("user_message", session_id="s1", text="keep me")
    before = [e.id for e in api.last_events("s1")]
    for kwargs in ({"whole_project": "yes"}, {"whole_project": True, "session_id": "s1"}):
        with pytest.raises(ValidationError) as info:
            api.forget(**kwargs)
        assert info.value.field == "whole_project", str(info.value)
    assert [e.id for e in api.last_events("s1")] == before  # nothing was forgotten
