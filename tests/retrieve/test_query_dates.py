"""The period a query names: the pure parser, and the search favouring the events recorded
then over the store (every backend: the `cb` fixture is parametrised)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from ctxbase import ContextBase
from ctxbase.retrieve.config import get_preset
from ctxbase.retrieve.query_dates import (
    REPORT_LAG_S,
    in_period,
    in_yearless,
    names_yearless,
    query_period,
    yearless_dates,
)


def _days(query: str) -> tuple[str, str] | None:
    period = query_period(query)
    if period is None:
        return None
    start, end = (datetime.fromtimestamp(t, UTC).date().isoformat() for t in period)
    return start, end


@pytest.mark.parametrize(
    ("query", "days"),
    [
        ("What did Nate play on 9 October, 2022?", ("2022-10-09", "2022-10-10")),
        ("What did Tim read on 8th December, 2023?", ("2023-12-08", "2023-12-09")),
        ("Where was the photo shared on December 1,2023 taken?", ("2023-12-01", "2023-12-02")),
        ("What did John share in January 2024?", ("2024-01-01", "2024-02-01")),
        ("What did John organize in 2024?", ("2024-01-01", "2025-01-01")),
        ("Where was John between August 11 and August 15 2023?", ("2023-08-11", "2023-08-16")),
        ("他2023年5月3日做了什么？", ("2023-05-03", "2023-05-04")),
        ("2023年5月的预算是多少？", ("2023-05-01", "2023-06-01")),
        ("31 February, 2022", ("2022-02-01", "2022-03-01")),  # no such day: the month
    ],
)
def test_query_period_reads_dates_with_a_year(query: str, days: tuple[str, str]) -> None:
    assert _days(query) == days


@pytest.mark.parametrize(
    "query",
    ["Which spot did Joanna visit in May?", "version 1.2023 fails", "at 10:2023", "上周做了什么"],
)
def test_no_period_without_a_year(query: str) -> None:
    assert query_period(query) is None


def test_events_told_in_the_week_after_count() -> None:
    period = query_period("in May 2023")
    assert period is not None
    start, end = period
    assert in_period(start + 3600, period)
    assert in_period(end + REPORT_LAG_S - 1, period)
    assert not in_period(end + REPORT_LAG_S + 1, period)
    assert not in_period(start - 2 * 86400, period)


def test_a_dated_query_prefers_the_events_of_that_period(cb: ContextBase) -> None:
    may = datetime(2023, 5, 10, tzinfo=UTC).timestamp()
    sept = datetime(2023, 9, 10, tzinfo=UTC).timestamp()
    early = cb.record("user_message", session_id="s1", text="I baked bread today", ts=may)
    late = cb.record("user_message", session_id="s2", text="I baked bread again", ts=sept)
    cb.wait_for_embeddings()
    query = "What did I bake in September 2023?"
    on = cb.search(query, config=get_preset("hybrid", date_boost=2.0, top_k=2)).results
    assert on[0].item.owner_id == late.id
    other = "What did I bake in May 2023?"
    on = cb.search(other, config=get_preset("hybrid", date_boost=2.0, top_k=2)).results
    assert on[0].item.owner_id == early.id


@pytest.mark.parametrize(
    ("query", "dates"),
    [
        ("九月那次连接数突然冲上去，起因是什么？", [(9, None)]),
        ("那十一月那次当场是怎么先压下来的？", [(11, None)]),
        ("朵朵6月7日打的针", [(6, 7)]),
        ("六月七号那天", [(6, 7)]),
        ("3月份的账", [(3, None)]),
        ("从九月初到十月底体重降了多少？", [(9, None), (10, None)]),
        ("When did Melanie go camping in June?", [(6, None)]),
        ("What did John's teammates give him when they met on Aug 15th?", [(8, 15)]),
        # not a month: a duration, no numeral, a verb, a name, a dated query
        ("两个月后复查", []),
        ("每月和上个月", []),
        ("几月份", []),
        ("I may go there", []),
        ("What is the name of Maria's second puppy?", []),
        ("2025年9月那次", []),
        ("in June 2023", []),
    ],
)
def test_a_month_or_day_named_without_a_year(
    query: str, dates: list[tuple[int, int | None]]
) -> None:
    assert yearless_dates(query) == dates


def test_a_yearless_month_holds_for_any_year_and_the_week_after() -> None:
    sept = [(9, None)]
    assert in_yearless(datetime(2025, 9, 12, 21, tzinfo=UTC).timestamp(), sept)
    assert in_yearless(datetime(2019, 9, 1, tzinfo=UTC).timestamp(), sept)
    assert in_yearless(datetime(2025, 10, 5, tzinfo=UTC).timestamp(), sept)  # told after
    assert not in_yearless(datetime(2025, 10, 9, tzinfo=UTC).timestamp(), sept)
    assert not in_yearless(datetime(2025, 8, 20, tzinfo=UTC).timestamp(), sept)
    day = [(6, 7)]
    assert in_yearless(datetime(2025, 6, 10, tzinfo=UTC).timestamp(), day)
    assert not in_yearless(datetime(2025, 6, 20, tzinfo=UTC).timestamp(), day)


def test_a_turn_naming_the_month_itself_counts() -> None:
    october = [(10, None)]
    assert names_yearless("婚期改到10月18日，场地费降到3.9万", october)
    assert names_yearless("We moved it to October 18, 2025", october)
    assert names_yearless("the party in October was fun", october)
    assert not names_yearless("婚期定在国庆", october)
    assert not names_yearless("I may go", [(5, None)])
    assert not names_yearless("改到11月", october)


def test_a_yearless_month_prefers_the_events_of_that_month(cb: ContextBase) -> None:
    sept = datetime(2025, 9, 12, tzinfo=UTC).timestamp()
    nov = datetime(2025, 11, 18, tzinfo=UTC).timestamp()
    early = cb.record("user_message", session_id="s1", text="连接数打满，门锁全部掉线", ts=sept)
    late = cb.record("user_message", session_id="s2", text="连接数又打满了，门锁掉线", ts=nov)
    cb.wait_for_embeddings()
    config = get_preset("hybrid", date_boost=2.0, yearless_date_boost=2.0, top_k=2)
    for query, first in (("九月那次门锁掉线是怎么回事？", early), ("十一月那次门锁掉线", late)):
        assert cb.search(query, config=config).results[0].item.owner_id == first.id
    off = get_preset("hybrid", date_boost=2.0, top_k=2)  # yearless_date_boost 1: no effect
    asked = ("九月那次门锁掉线是怎么回事？", "十一月那次门锁掉线")
    got = {cb.search(q, config=off).results[0].item.owner_id for q in asked}
    assert len(got) == 1
