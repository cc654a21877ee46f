"""Bad input gets a ValidationError naming its field, and nothing partial reaches the file."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from core_helpers import table_counts

from ctxbase import ContextBase, ValidationError
from ctxbase.model import Event

Opener = Callable[..., ContextBase]


def _refused(
    db_path: Path, cb: ContextBase, field: str, call: Callable[[], Any]
) -> ValidationError:
    """Run a call that must fail; check the field and that no table changed."""
    cb.flush()
    before = table_counts(db_path)
    with pytest.raises(ValidationError) as exc:
        call()
    cb.flush()
    assert exc.value.field == field, str(exc.value)
    assert field in str(exc.value)
    assert table_counts(db_path) == before
    return exc.value


def test_unknown_event_type_without_registration(db_path: Path, cb: ContextBase) -> None:
    err = _refused(
        db_path, cb, "type", lambda: cb.capture("no_such_type", session_id="s", text="x")
    )
    assert "register_event_type" in err.message
    _refused(db_path, cb, "type", lambda: cb.record("no_such_type", session_id="s", text="x"))


def test_parent_that_does_not_exist(db_path: Path, cb: ContextBase) -> None:
    real = cb.record("user_message", session_id="s", text="hi").id
    _refused(
        db_path,
        cb,
        "parent_event_ids[1]",
        lambda: cb.capture(
            "assistant_message", session_id="s", text="a", parent_event_ids=[real, "ev_missing"]
        ),
    )
    _refused(
        db_path,
        cb,
        "parent_event_ids[0]",
        lambda: cb.record(
            "assistant_message", session_id="s", text="a", parent_event_ids=["ev_missing"]
        ),
    )
    _refused(
        db_path,
        cb,
        "refers_to[0]",
        lambda: cb.record("assistant_message", session_id="s", text="a", refers_to=["doc:missing"]),
    )


def test_parent_in_another_project_does_not_count(db_path: Path, cb: ContextBase) -> None:
    elsewhere = cb.record("user_message", session_id="s", text="hi", project="other").id
    _refused(
        db_path,
        cb,
        "parent_event_ids[0]",
        lambda: cb.capture(
            "assistant_message", session_id="s", text="a", parent_event_ids=[elsewhere]
        ),
    )


def test_parent_still_in_the_capture_queue_is_accepted(cb: ContextBase) -> None:
    first = cb.capture("user_message", session_id="s", text="q")
    assert first is not None
    second = cb.capture("assistant_message", session_id="s", text="a", parent_event_ids=[first])
    cb.flush()
    assert cb.get_event(second).parent_event_ids == [first]


def test_properties_that_are_no_mapping(db_path: Path, cb: ContextBase) -> None:
    a = cb.upsert_entity("doc", "a").id
    for bad in ([1, 2], "k=v"):
        err = _refused(
            db_path,
            cb,
            "properties",
            lambda bad=bad: cb.upsert_entity(entity_type="code", entity_id="x3", properties=bad),
        )
        assert f"must be a mapping of names to values (got {type(bad).__name__})" in str(err)
        _refused(
            db_path, cb, "properties", lambda bad=bad: cb.create_edge(a, a, "USES", properties=bad)
        )
    # a confidence or source given both ways, differing, is refused naming both
    err = _refused(
        db_path,
        cb,
        "properties.confidence",
        lambda: cb.create_edge(a, a, "USES", confidence=0.3, properties={"confidence": 0.9}),
    )
    assert "give either 'confidence' or 'properties.confidence', not both" in str(err)
    same = cb.create_edge(a, a, "USES", confidence=0.3, properties={"confidence": 0.3})
    assert same.confidence == 0.3


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"source": ""}, "source"),
        ({"source": "   "}, "source"),
        ({"source": "human", "confidence": 1.5}, "confidence"),
        ({"source": "human", "confidence": -0.01}, "confidence"),
        ({"source": "human", "confidence": float("nan")}, "confidence"),
    ],
)
def test_bad_relation(db_path: Path, cb: ContextBase, kwargs: dict[str, Any], field: str) -> None:
    a = cb.upsert_entity("doc", "a").id
    b = cb.upsert_entity("doc", "b").id
    _refused(db_path, cb, field, lambda: cb.upsert_relationship(a, "USES", b, **kwargs))


def test_relation_without_source_argument_gets_the_callers_identity(cb: ContextBase) -> None:
    # Seed 000's calls name no source: the base's identity fills it, never an empty one.
    a = cb.upsert_entity("doc", "a").id
    assert cb.upsert_relationship(a, "USES", a).source.startswith("local")
    cb.agent_id = "code_gen"  # as ctxbase.open(..., agent_id="code_gen")
    assert cb.upsert_relationship(a, "USES", a).source == "agent:code_gen"
    with pytest.raises(ValidationError) as err:
        cb.upsert_relationship(a, "USES", a, source="  ")
    assert err.value.field == "source"


def test_relation_between_missing_nodes(db_path: Path, cb: ContextBase) -> None:
    a = cb.upsert_entity("doc", "a").id
    _refused(
        db_path, cb, "to_id", lambda: cb.upsert_relationship(a, "USES", "doc:nope", source="human")
    )
    _refused(
        db_path,
        cb,
        "from_id",
        lambda: cb.upsert_relationship("doc:nope", "USES", a, source="human"),
    )
    _refused(db_path, cb, "type", lambda: cb.upsert_relationship(a, "uses", a, source="human"))


def test_content_over_the_size_limit(db_path: Path, open_base: Opener) -> None:
    cb = open_base(max_content_bytes=100)
    ok = cb.record("user_message", session_id="s", text="x" * 100)
    assert cb.get_event(ok.id).text == "x" * 100
    _refused(
        db_path, cb, "text", lambda: cb.capture("user_message", session_id="s", text="x" * 101)
    )
    # the limit is in UTF-8 bytes, not characters: 34 Chinese characters are 102 bytes
    _refused(db_path, cb, "text", lambda: cb.record("user_message", session_id="s", text="预" * 34))
    _refused(
        db_path,
        cb,
        "data",
        lambda: cb.capture("model_call", session_id="s", data={"blob": "y" * 200}),
    )
    _refused(
        db_path,
        cb,
        "text",
        lambda: cb.capture_messages([{"role": "user", "content": "z" * 500}], session_id="s"),
    )


def test_invalid_utf8_bytes(db_path: Path, cb: ContextBase) -> None:
    _refused(
        db_path,
        cb,
        "text",
        lambda: cb.capture("user_message", session_id="s", text=b"ok \xff\xfe broken"),
    )
    _refused(db_path, cb, "text", lambda: cb.record("user_message", session_id="s", text=b"\xc3"))
    good = cb.record("user_message", session_id="s", text="预算".encode())
    assert cb.get_event(good.id).text == "预算"


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"text": "lone \ud800 surrogate"}, "text"),
        ({"text": "x", "data": {"k": "\udfff"}}, "data"),
        ({"text": "x", "data": {"\ud800": 1}}, "data"),
        ({"text": "x", "metadata": {"k": "\ud800"}}, "metadata"),
        ({"text": "x", "agent_role": "r\ud800"}, "agent_role"),
    ],
)
def test_lone_surrogates_anywhere_in_an_event(
    db_path: Path, cb: ContextBase, kwargs: dict[str, Any], field: str
) -> None:
    _refused(db_path, cb, field, lambda: cb.capture("user_message", session_id="s", **kwargs))
    _refused(db_path, cb, field, lambda: cb.record("user_message", session_id="s", **kwargs))
    # the bus is still healthy: a good event after the bad ones is written
    ok = cb.capture("user_message", session_id="s", text="fine")
    cb.flush(timeout=10)
    assert cb.get_event(ok).text == "fine"


def test_lone_surrogates_in_an_entity(db_path: Path, cb: ContextBase) -> None:
    _refused(db_path, cb, "text", lambda: cb.upsert_entity("doc", "a", "bad \ud800"))
    _refused(db_path, cb, "name", lambda: cb.upsert_entity("doc", "a\ud800", "ok"))
    _refused(
        db_path,
        cb,
        "properties",
        lambda: cb.upsert_entity("doc", "a", "ok", properties={"k": "\udc00"}),
    )


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"importance": 1.2}, "importance"),
        ({"importance": -1}, "importance"),
        ({"data": {"x": object()}}, "data"),
        ({"metadata": {"x": object()}}, "metadata"),
        ({"agent_id": "has space"}, "agent_id"),
        ({"task_id": ""}, "task_id"),
    ],
)
def test_other_bad_fields(
    db_path: Path, cb: ContextBase, kwargs: dict[str, Any], field: str
) -> None:
    kwargs.setdefault("text", "x")
    _refused(db_path, cb, field, lambda: cb.capture("user_message", session_id="s", **kwargs))


def test_bad_session_and_project_ids(db_path: Path, cb: ContextBase) -> None:
    _refused(
        db_path, cb, "session_id", lambda: cb.capture("user_message", session_id="a b", text="x")
    )
    _refused(
        db_path,
        cb,
        "project",
        lambda: cb.capture("user_message", session_id="s", text="x", project="bad/\n"),
    )


def test_bad_message_in_a_list_writes_none_of_the_list(db_path: Path, cb: ContextBase) -> None:
    messages = [
        {"role": "user", "content": "run the tests"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c1", "function": {"name": "pytest", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "c9", "content": "ok"},
    ]
    _refused(
        db_path,
        cb,
        "messages[2].tool_call_id",
        lambda: cb.capture_messages(messages, session_id="s"),
    )
    _refused(
        db_path,
        cb,
        "messages[1].role",
        lambda: cb.capture_messages(
            [messages[0], {"role": "robot", "content": "x"}], session_id="s"
        ),
    )
    bad_text = [messages[0], {"role": "assistant", "content": "bad \ud800"}]
    _refused(db_path, cb, "text", lambda: cb.capture_messages(bad_text, session_id="s"))
    _refused(db_path, cb, "text", lambda: cb.capture_messages(bad_text, session_id="s", sync=True))


def test_record_events_is_all_or_nothing(db_path: Path, cb: ContextBase) -> None:
    good = Event(id="ev_good1", project_id="p", session_id="s", type="user_message", text="a")
    bad = Event(
        id="ev_bad1",
        project_id="p",
        session_id="s",
        type="assistant_message",
        text="b",
        parent_event_ids=["ev_nowhere"],
    )
    _refused(db_path, cb, "parent_event_ids[0]", lambda: cb.record_events([good, bad]))


def test_record_events_takes_events_not_their_fields(db_path: Path, cb: ContextBase) -> None:
    good = Event(id="ev_good1", project_id="p", session_id="s", type="user_message", text="a")
    fields = {"type": "user_message", "session_id": "s", "text": "b"}
    err = _refused(db_path, cb, "events[1]", lambda: cb.record_events([good, fields]))  # type: ignore[list-item]
    assert "must be a ctxbase.Event (got dict)" in err.message and "record(" in err.message


@pytest.mark.parametrize("props", [{"k": object()}, {"k": "\ud800"}])
def test_bad_relation_properties(db_path: Path, cb: ContextBase, props: dict[str, Any]) -> None:
    a = cb.upsert_entity("doc", "a").id
    _refused(
        db_path,
        cb,
        "properties",
        lambda: cb.upsert_relationship(a, "USES", a, source="human", properties=props),
    )


def test_an_empty_ctxbase_db_variable_is_bad_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # set but empty is a mistake, not "use ./ctxbase.db": the library and the server say so
    import ctxbase
    from ctxbase.serve.settings import ServerSettings

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CTXBASE_DB", " ")
    for make in (lambda: ctxbase.open(project="p"), ServerSettings):
        with pytest.raises(ValidationError) as err:
            make()
        assert err.value.field == "CTXBASE_DB"
    assert not (tmp_path / "ctxbase.db").exists()
    monkeypatch.setenv("CTXBASE_DB", str(tmp_path / "named.db"))
    ctxbase.open(project="p", embedder="none").close()
    assert (tmp_path / "named.db").exists()
