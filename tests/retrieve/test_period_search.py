"""A query naming a dated period is searched again among the items recorded in it: an event
of that period the whole project's rankings leave out (others say the query's words more)
becomes a candidate, and the date boost can then favour it."""

from __future__ import annotations

from datetime import UTC, datetime

from ctxbase import ContextBase
from ctxbase.retrieve.config import get_preset
from ctxbase.retrieve.period_search import period_filter
from ctxbase.store.base import ItemFilter


def _ts(year: int, month: int, day: int) -> float:
    return datetime(year, month, day, 12, tzinfo=UTC).timestamp()


def test_period_filter_narrows_to_the_named_period_and_the_week_after() -> None:
    flt = period_filter(None, "What did Joanna finish in January 2022?")
    assert flt is not None and flt.since is not None and flt.until is not None
    assert flt.since <= _ts(2022, 1, 1) and flt.until >= _ts(2022, 2, 6)  # a week after
    assert flt.until < _ts(2022, 2, 9) and flt.since > _ts(2021, 12, 29)
    assert period_filter(None, "What did Joanna finish last week?") is None
    # a filter's own range: the part both share; none shared, no period ranking
    mine = ItemFilter(session_ids=("s",), since=_ts(2022, 1, 15))
    both = period_filter(mine, "in January 2022")
    assert both is not None and both.since == _ts(2022, 1, 15) and both.session_ids == ("s",)
    assert period_filter(ItemFilter(until=_ts(2021, 6, 1)), "in January 2022") is None


def test_an_event_of_the_named_period_is_found_among_louder_ones(cb: ContextBase) -> None:
    for n in range(8):  # outside the period, each says the query's word twice
        cb.record(
            "user_message",
            session_id="s",
            text=f"screenplay screenplay screenplay draft {n}",
            ts=_ts(2022, 6, 1 + n),
        )
    said = (
        "Finally done: the script I was writing for months, my first screenplay, is "
        "printed and bound at the copy shop downtown, with a cover my sister drew"
    )
    quiet = cb.record("user_message", session_id="other", text=said, ts=_ts(2022, 1, 20)).id
    cb.wait_for_embeddings()
    query = "Which screenplay news came in January 2022?"
    narrow = {"candidates": 4, "top_k": 10}  # the whole project's rankings hold 4 each
    off = cb.search(query, config=get_preset("hybrid_graph", period_weight=0.0, **narrow))
    on = cb.search(query, config=get_preset("hybrid_graph", **narrow))
    assert quiet not in [h.item.owner_id for h in off.results]
    assert on.results and on.results[0].item.owner_id == quiet  # found, then date-boosted
