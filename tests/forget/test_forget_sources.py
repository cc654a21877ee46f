"""Forgetting an entity anchored from a message (a decision statement search ranks first)
deals with the message too: the message that is the statement goes with it, one that says
more is named in `sources_still_visible`, and a mention never touches the messages naming
it. Hide, restore and hard forget alike, on both backends."""

from __future__ import annotations

import pytest

from ctxbase import ContextBase
from ctxbase.errors import NotFoundError

WHOLE = "订单服务的缓存过期时间定为300秒，由张三负责"
MORE = (
    "We decided to use Redis for the order cache. Also lunch is at noon and the build runs "
    "on Fridays."
)


def _decision(cb: ContextBase, event_id: str) -> str:
    (found,) = [
        e.id for e in cb.list_entities(type="decision") if e.properties["event_id"] == event_id
    ]
    return found


def _top(cb: ContextBase, query: str) -> list[str]:
    return [c.item.owner_id for c in cb.search(query, preset="keyword").results]


def _captured(cb: ContextBase) -> tuple[str, str, str, str]:
    whole = cb.record("user_message", session_id="s", text=WHOLE).id
    more = cb.record("user_message", session_id="s", text=MORE).id
    cb.flush()
    return whole, _decision(cb, whole), more, _decision(cb, more)


def test_hiding_a_statement_hides_the_message_that_is_it(cb: ContextBase) -> None:
    whole, stated, more, said_more = _captured(cb)
    assert whole in _top(cb, "订单服务 缓存过期时间")
    seen = cb.set_hidden([stated])
    assert (seen.changed, seen.sources_hidden, seen.sources_still_visible) == (2, [whole], [])
    assert _top(cb, "订单服务 缓存过期时间") == []
    # restoring the statement brings the message back with it
    back = cb.set_hidden([stated], False)
    assert (back.changed, back.sources_hidden) == (2, [whole])
    assert cb.get_event(whole).text == WHOLE
    # a message that says more stays visible, and the answer names it
    seen = cb.set_hidden([said_more])
    assert (seen.changed, seen.sources_hidden, seen.sources_still_visible) == (1, [], [more])
    assert _top(cb, "Redis order cache") == [more]


def test_hard_forget_of_a_statement_forgets_the_message_that_is_it(cb: ContextBase) -> None:
    whole, stated, more, said_more = _captured(cb)
    report = cb.forget(event_ids=[stated])  # the ids of search hits, as the MCP tool gets
    assert (report.sources_forgotten, report.sources_still_visible) == ([whole], [])
    assert report.removed["events"] == 1
    with pytest.raises(NotFoundError):
        cb.get_event(whole, include_inactive=True)
    assert _top(cb, "订单服务 缓存过期时间") == []
    report = cb.forget(entity_ids=[said_more])
    assert (report.sources_forgotten, report.sources_still_visible) == ([], [more])
    assert "events" not in report.removed and _top(cb, "Redis order cache") == [more]
    # named along with its message, nothing is left to report
    again = cb.record("user_message", session_id="t", text=MORE).id
    cb.flush()
    report = cb.forget(event_ids=[_decision(cb, again), again])
    assert (report.sources_forgotten, report.sources_still_visible) == ([], [])


def test_a_mention_names_no_message(cb: ContextBase) -> None:
    texts = [f"check table order_items_archive before release {n}" for n in range(3)]
    ids = [cb.record("user_message", session_id="m", text=t).id for t in texts]
    cb.flush()
    (mention,) = [e.id for e in cb.list_entities(type="mention", name="order_items_archive")]
    seen = cb.set_hidden([mention])
    assert (seen.changed, seen.sources_hidden, seen.sources_still_visible) == (1, [], [])
    report = cb.forget(entity_ids=[mention])
    assert (report.sources_forgotten, report.sources_still_visible) == ([], [])
    assert [e.id for e in cb.last_events("m", 10)] == ids
