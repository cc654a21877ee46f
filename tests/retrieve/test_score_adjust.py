"""The score adjustments after fusion (retrieve/score_adjust.py): pure functions over
candidates and the config, no store. Each scales exactly the candidates it is about, by
its setting, and leaves every score alone when that setting is neutral."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from ctxbase.retrieve.config import SearchConfig
from ctxbase.retrieve.score_adjust import (
    adjust_expanded,
    boost_actors,
    boost_dates,
    boost_numbers,
    boost_standout,
    decay_by_age,
    weigh_importance,
    weigh_questions,
)
from ctxbase.retrieve.search import Candidate
from ctxbase.store.base import SearchItem

DAY = 86400.0
NEUTRAL = SearchConfig(actor_boost=1.0, question_weight=1.0)  # every step off


def _cand(
    item_id: str,
    text: str = "",
    *,
    score: float = 1.0,
    kind: str = "event",
    agent: str | None = None,
    role: str | None = None,
    ts: float = 0.0,
    importance: float = 0.5,
    similarity: float | None = None,
) -> Candidate:
    item = SearchItem(
        item_id=item_id, owner_id=item_id, kind=kind, type="user_message", text=text, terms="",
        ts=ts, agent_id=agent, agent_role=role, importance=importance,
    )  # fmt: skip
    return Candidate(item, score=score, similarity=similarity)


def _scores(cands: list[Candidate]) -> dict[str, float]:
    return {c.item_id: c.score for c in cands}


def test_a_semantic_hit_far_ahead_of_the_rest_is_boosted() -> None:
    sims = {"a": 0.9, "b": 0.5, "c": 0.45, "d": 0.4, "e": None}
    cands = {k: _cand(k, similarity=s) for k, s in sims.items()}
    boost_standout(cands, SearchConfig(standout_boost=2.0))
    assert _scores(list(cands.values())) == {"a": 2.0, "b": 1.0, "c": 1.0, "d": 1.0, "e": 1.0}
    # a first hit close to the second does not stand out; off at 1.0
    near = {"a": 0.9, "b": 0.88, "c": 0.4, "d": 0.3}
    close = {k: _cand(k, similarity=s) for k, s in near.items()}
    boost_standout(close, SearchConfig(standout_boost=2.0))
    assert {c.score for c in close.values()} == {1.0}
    boost_standout(cands, SearchConfig(standout_boost=1.0))
    assert cands["a"].score == 2.0


def test_events_that_only_ask_weigh_less_but_entities_do_not() -> None:
    cands = [
        _cand("ask", "第二次约在什么时候？"),
        _cand("say", "约在6月17日晚上7点"),
        _cand("doc", "What is the cache TTL?", kind="entity"),
    ]
    weigh_questions(cands, SearchConfig(question_weight=0.5))
    assert _scores(cands) == {"ask": 0.5, "say": 1.0, "doc": 1.0}


def test_a_query_asking_for_a_number_favours_turns_that_state_one() -> None:
    cands = [_cand("n", "单车教室固定30个车位"), _cand("t", "容量按教室配置，后台改一下就行")]
    config = SearchConfig(number_boost=1.5)
    boost_numbers(cands, "Who fixed the build?", config)  # asks for no number: unchanged
    assert _scores(cands) == {"n": 1.0, "t": 1.0}
    boost_numbers(cands, "单车教室一节课最多容纳多少人？", config)
    assert _scores(cands) == {"n": 1.5, "t": 1.0}


def test_a_query_asking_when_favours_turns_that_say_a_day() -> None:
    cands = [
        _cand("amount", "单车教室固定30个车位"),
        _cand("day", "6月7日在田林社区打的"),
        _cand("none", "容量按教室配置"),
    ]
    config = SearchConfig(number_boost=1.5)
    boost_numbers(cands, "乙脑第二针是哪天打的？", config)
    assert _scores(cands) == {"amount": 1.0, "day": 1.5, "none": 1.0}
    # asking how much as well: any number, the day's included
    boost_numbers(cands, "打了几次，最后一次是哪天？", config)
    assert _scores(cands) == {"amount": 1.5, "day": 2.25, "none": 1.0}


def test_the_actor_a_query_names_is_favoured_by_id_or_role() -> None:
    cands = [
        _cand("alice", agent="alice"),
        _cand("bob", agent="bob", role="tester"),
        _cand("carol", agent="carol"),
    ]
    boost_actors(cands, "What did the tester report?", SearchConfig(actor_boost=2.0))
    assert _scores(cands) == {"alice": 1.0, "bob": 2.0, "carol": 1.0}
    # two named, no subject_actor: nobody is favoured; with it, the one named first
    boost_actors(cands, "Did Carol thank Alice?", SearchConfig(actor_boost=2.0))
    assert _scores(cands) == {"alice": 1.0, "bob": 2.0, "carol": 1.0}
    boost_actors(cands, "Did Carol thank Alice?", SearchConfig(actor_boost=2.0, subject_actor=True))
    assert _scores(cands) == {"alice": 1.0, "bob": 2.0, "carol": 2.0}


def test_a_dated_query_favours_what_was_recorded_then() -> None:
    may = datetime(2023, 5, 3, 12, tzinfo=UTC).timestamp()
    cands = [_cand("then", ts=may), _cand("later", ts=may + 60 * DAY)]
    boost_dates(cands, "他2023年5月3日做了什么？", SearchConfig(date_boost=4.0))
    assert _scores(cands) == {"then": 4.0, "later": 1.0}
    boost_dates(cands, "他做了什么？", SearchConfig(date_boost=4.0))  # no date: unchanged
    assert _scores(cands) == {"then": 4.0, "later": 1.0}


def test_age_halves_the_score_every_half_life() -> None:
    now = 1_000 * DAY
    cands = [_cand("new", ts=now), _cand("old", ts=now - 30 * DAY), _cand("older", ts=0.0)]
    decay_by_age(cands, SearchConfig(time_decay_half_life_days=30.0), now)
    scores = _scores(cands)
    assert scores["new"] == 1.0
    assert scores["old"] == pytest.approx(0.5)
    assert scores["older"] < 1e-9
    decay_by_age(cands, SearchConfig(), now)  # no half-life: unchanged
    assert _scores(cands) == scores


def test_importance_scales_around_the_default() -> None:
    cands = [_cand(f"i{n}", importance=n / 4) for n in range(5)]
    weigh_importance(cands, SearchConfig(importance_weight=0.4))
    assert [round(c.score, 9) for c in cands] == [0.6, 0.8, 1.0, 1.2, 1.4]
    weigh_importance(cands, SearchConfig())  # weight 0: unchanged
    assert [round(c.score, 9) for c in cands] == [0.6, 0.8, 1.0, 1.2, 1.4]


def test_neutral_settings_leave_every_score_as_it_was() -> None:
    may = datetime(2023, 5, 3, tzinfo=UTC).timestamp()
    cands = [
        _cand("a", "他有多少个？", agent="alice", ts=may, importance=1.0, score=0.3),
        _cand("b", "固定30个车位", agent="bob", ts=0.0, importance=0.0, score=0.7),
    ]
    adjust_expanded(cands, "Alice 2023年5月3日 有多少？", NEUTRAL, now=may + 400 * DAY)
    assert _scores(cands) == {"a": 0.3, "b": 0.7}


def test_adjust_expanded_applies_every_step_in_order() -> None:
    """The factors of each step, multiplied in the order search applies them (a float
    product depends on its order: rankings must not move)."""
    may = datetime(2023, 5, 3, 12, tzinfo=UTC).timestamp()
    now = may + 10 * DAY
    config = SearchConfig(
        question_weight=0.7,
        number_boost=1.3,
        actor_boost=1.6,
        date_boost=2.5,
        time_decay_half_life_days=20.0,
        importance_weight=0.3,
    )
    query = "How many tickets did alice close on 3 May, 2023?"
    cand = _cand("x", "我关了多少张？", agent="alice", ts=may, importance=0.8, score=0.123)
    other = _cand("y", "All done.", agent="bob", ts=0.0, importance=0.5, score=0.456)
    adjust_expanded([cand, other], query, config, now)

    expected = 0.123
    expected *= 0.7  # only asks
    expected *= 1.6  # alice is named
    expected *= 2.5  # recorded on the day named
    expected *= 0.5 ** (10 / 20)
    expected *= 1.0 - 0.3 + 0.3 * 2 * 0.8
    assert cand.score == expected  # the states-a-number boost does not apply: no number
    assert other.score == 0.456 * 0.5 ** ((now - 0.0) / (20 * DAY))
