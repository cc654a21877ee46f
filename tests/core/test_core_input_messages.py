"""Refusals a new user meets first say what the rule is and what to pass instead."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

import ctxbase
from ctxbase import ContextBase, ValidationError
from ctxbase.model import Event
from ctxbase.validation import MAX_EVENT_TS, MIN_EVENT_TS

Opener = Callable[..., ContextBase]


def test_a_chinese_id_is_refused_naming_the_ascii_rule(tmp_path: Path, cb: ContextBase) -> None:
    with pytest.raises(ValidationError) as err:
        ctxbase.open(str(tmp_path / "zh.db"), project="电商", embedder=None)
    assert err.value.field == "project"
    assert "ASCII" in err.value.message and "A-Z a-z" in err.value.message
    assert "'电商'" in err.value.message
    for field, value in (("session_id", "第一天"), ("agent_id", "小明"), ("task_id", "任务1")):
        kwargs = {"session_id": "s", field: value}
        with pytest.raises(ValidationError) as err:
            cb.capture("user_message", text="hi", **kwargs)
        assert err.value.field == field
        assert "ASCII" in err.value.message
    # a role is text, not an id: Chinese is fine there
    assert cb.record("user_message", session_id="s", text="hi", agent_role="测试").seq == 1


@pytest.mark.parametrize(
    ("ts", "words"),
    [
        (1e300, "from 1970-01-01 to 2200-01-01"),
        (-1e300, "from 1970-01-01 to 2200-01-01"),
        (-1.0, "from 1970-01-01 to 2200-01-01"),
        (1_796_226_319_400.8, "looks like milliseconds"),
        (1_796_226_319_400_800.0, "looks like microseconds"),
        ("9999-01-01T00:00:00Z", "from 1970-01-01 to 2200-01-01"),
        (datetime(1960, 1, 1, tzinfo=UTC), "from 1970-01-01 to 2200-01-01"),
    ],
)
def test_an_implausible_time_is_refused_everywhere_an_event_is_written(
    cb: ContextBase, ts: Any, words: str
) -> None:
    for field, write in (
        ("ts", lambda: cb.capture("user_message", session_id="s", text="x", ts=ts)),
        ("ts", lambda: cb.record("user_message", session_id="s", text="x", ts=ts)),
        ("timestamp", lambda: cb.record("user_message", session_id="s", text="x", timestamp=ts)),
    ):
        with pytest.raises(ValidationError) as err:
            write()
        assert err.value.field == field
        assert words in err.value.message, err.value.message
    cb.flush()
    assert cb.list_sessions() == []  # no session was made with that time


def test_a_hand_built_event_with_a_bad_time_is_refused_whole(cb: ContextBase) -> None:
    good = Event(project_id="p", session_id="s", type="user_message", text="a")
    bad = Event(project_id="p", session_id="s", type="user_message", text="b", ts=1e300)
    with pytest.raises(ValidationError) as err:
        cb.record_events([good, bad])
    assert err.value.field == "events[1].ts"
    assert cb.list_sessions() == []


def test_the_edges_of_the_time_range_are_accepted(cb: ContextBase) -> None:
    first = cb.record("user_message", session_id="s", text="x", ts=MIN_EVENT_TS)
    last = cb.record("user_message", session_id="s", text="y", ts=MAX_EVENT_TS)
    now = cb.record("user_message", session_id="s", text="z", ts=time.time())
    assert [first.ts, last.ts] == [0.0, 7_258_118_400.0] and now.seq == 3


def test_a_filter_given_as_a_search_argument_says_where_it_goes(cb: ContextBase) -> None:
    for name, value, words in (
        ("agent_id", "a1", "filters=ItemFilter(agent_ids=('a1',))"),
        ("repo", "core", "filters=ItemFilter(repos=('core',))"),
        ("since", 5.0, "filters=ItemFilter(since=5.0)"),
    ):
        with pytest.raises(ValidationError) as err:
            cb.search("hello", **{name: value})
        assert err.value.field == name
        assert "not a search option but a filter" in err.value.message
        assert words in err.value.message, err.value.message
    with pytest.raises(ValidationError) as err:  # an unknown option keeps pydantic's word
        cb.search("hello", no_such_option=1)
    assert err.value.field == "no_such_option"


def test_an_event_where_its_id_belongs_is_refused_naming_id(cb: ContextBase) -> None:
    event = cb.record("user_message", session_id="s", text="we use MongoDB")
    with pytest.raises(ValidationError) as err:
        cb.feedback(event, "wrong")  # type: ignore[arg-type]
    assert err.value.field == "node_id"
    assert "pass the Event's id (.id)" in err.value.message
    assert cb.feedback(event.id, "wrong").confidence == 0.0
