"""A period a query places relative to another event: the pure parser, and the search
favouring the events recorded in it (every backend: the `cb` fixture is parametrised)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from ctxbase import ContextBase
from ctxbase.retrieve.config import get_preset
from ctxbase.retrieve.relative_time import RelativeTime, anchored_period, relative_time

DAY = 86400.0


@pytest.mark.parametrize(
    ("query", "anchor", "days"),
    [
        ("我从深圳出差回来的第二天，取消规则改成了多少小时？", "我从深圳出差回来", (1, 2)),
        ("搬家后第二天物业来登记时说了什么费用？", "搬家", (1, 2)),
        ("全量上线的前一晚安排了什么？", "全量上线", (-1, 0)),
        ("上线前，开始灰度的前一周看板有什么错误？", "开始灰度", (-7, 0)),
        ("换药大约两周后我妈又去复查是哪天？", "换药", (10.5, 18.5)),
        ("开题三天前谁改了摘要？", "开题", (-3, -2)),
        ("What did Caroline do the week after the trip?", "the trip", (1, 8)),
        ("Two days before the launch, who called?", "the launch", (-2, -1)),
        ("What broke the day after the migration?", "the migration", (1, 2)),
    ],
)
def test_relative_time_reads_the_anchor_and_the_offset(
    query: str, anchor: str, days: tuple[float, float]
) -> None:
    assert relative_time(query) == RelativeTime(anchor, *days)


@pytest.mark.parametrize(
    "query",
    [
        "宽带是搬家后第几天上门装的？",  # no offset named
        "截止的最后一天是哪天？",  # "the last day", not a day after anything
        "提前两天通知谁？",
        "开始备赛一个半月后体重是多少？",  # a count the patterns do not read: no guess
        "三月五号的前一天做了什么？",  # the anchor is a date
        "What did John do the week before August 3, 2023?",  # query_dates.py's
        "What is the plan for the day after tomorrow?",
        "What did we decide about the Redis TTL?",
    ],
)
def test_no_relative_period(query: str) -> None:
    assert relative_time(query) is None


def test_the_period_is_placed_on_every_best_match_day() -> None:
    day = datetime(2025, 3, 14, tzinfo=UTC).timestamp()
    times = {"a": day + 9 * 3600, "b": day + 5 * DAY + 60, "c": day - DAY, "d": day}
    asked: list[str] = []

    def rank(text: str) -> list[str]:
        asked.append(text)
        return ["a", "b", "c", "d"]

    found = anchored_period(
        "What broke the day after the migration?",
        rank,
        lambda ids: {i: times[i] for i in ids},
        anchors=3,
    )
    assert asked == ["the migration"]
    assert found is not None
    # the days of c, a and b (d is the fourth match), each moved one day on
    assert found.spans == (
        (day, day + DAY),
        (day + DAY, day + 2 * DAY),
        (day + 6 * DAY, day + 7 * DAY),
    )
    assert found.holds(day + DAY + 5) and not found.holds(day + 2 * DAY + 5)
    assert anchored_period("What broke?", rank, lambda ids: {}) is None
    assert anchored_period("the day after the migration", lambda t: [], lambda ids: {}) is None


def test_a_query_dated_by_another_event_prefers_the_events_then(cb: ContextBase) -> None:
    day = datetime(2025, 3, 10, 9, tzinfo=UTC).timestamp()
    cb.record(
        "user_message", session_id="s1", text="I just got back from the Shenzhen trip", ts=day
    )
    before = cb.record(
        "user_message",
        session_id="s0",
        text="The cancellation window is now 12 hours",
        ts=day - 3 * DAY,
    )
    after = cb.record(
        "user_message",
        session_id="s2",
        text="The cancellation window is now 24 hours",
        ts=day + DAY,
    )
    cb.wait_for_embeddings()
    query = "the day after the Shenzhen trip, how many hours was the cancellation window?"
    config = get_preset("hybrid", top_k=3, relative_date_boost=2.0)
    ranked = [c.item.owner_id for c in cb.search(query, config=config).results]
    assert ranked.index(after.id) < ranked.index(before.id)
    # the other way round when the query places its period before the trip
    query = "two days before the Shenzhen trip, how many hours was the cancellation window?"
    config = get_preset("hybrid", top_k=3, relative_date_boost=4.0)
    ranked = [c.item.owner_id for c in cb.search(query, config=config).results]
    assert ranked.index(before.id) < ranked.index(after.id)
