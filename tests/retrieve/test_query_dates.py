"""The period a query names: the pure parser, and the search favouring the events recorded
then over the store (every backend: the `cb` fixture is parametrised)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from ctxbase import ContextBase
from ctxbase.retrieve.config import get_preset
from ctxbase.retrieve.query_dates import REPORT_LAG_S, in_period, query_period


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
