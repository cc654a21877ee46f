"""Confidence and decay exemptions as pure scoring (fusion.confidence_factor, spared_age,
score_adjust.weigh_confidence and decay_by_age with signals): no store. Without signals,
or with none for a candidate, its score is not touched."""

from __future__ import annotations

import pytest

from ctxbase.retrieve.config import SearchConfig
from ctxbase.retrieve.fusion import confidence_factor, spared_age, time_decay
from ctxbase.retrieve.score_adjust import adjust_expanded, decay_by_age, weigh_confidence
from ctxbase.retrieve.search import Candidate
from ctxbase.retrieve.signals import Confidence, Signals, tool_failed
from ctxbase.store.base import SearchItem

DAY = 86400.0


def _cand(item_id: str, *, score: float = 1.0, ts: float = 0.0) -> Candidate:
    item = SearchItem(
        item_id=item_id, owner_id=item_id, kind="event", type="user_message", text="",
        terms="", ts=ts,
    )  # fmt: skip
    return Candidate(item, score=score)


def test_confidence_factor_is_one_at_neutral_and_bounded_by_the_weight() -> None:
    assert confidence_factor(0.5, 0.4) == 1.0
    assert confidence_factor(1.0, 0.4) == pytest.approx(1.4)
    assert confidence_factor(0.0, 0.4) == pytest.approx(0.6)
    assert confidence_factor(0.1, 0.0) == 1.0  # weight 0: off
    assert confidence_factor(0.75, 0.4) > 1.0 > confidence_factor(0.25, 0.4)


def test_spared_age_slows_with_each_use_and_stops_at_the_threshold() -> None:
    age = 100 * DAY
    assert spared_age(age, 0, 3) == age  # never used
    assert spared_age(age, 1, 3) == age / 2  # each use slows it
    assert spared_age(age, 2, 3) == age / 3
    assert spared_age(age, 3, 3) == 0.0  # used often: no decay
    assert spared_age(age, 50, 0) == age / 51  # threshold 0: the count never stops it


def test_weigh_confidence_scales_rated_candidates_and_drops_below_the_floor() -> None:
    cands = [_cand(k) for k in ("liked", "wrong", "zero", "plain")]
    signals = Signals(
        confidence={
            "liked": Confidence(0.75, "feedback:liked"),
            "wrong": Confidence(0.1, "feedback:wrong"),
            "zero": Confidence(0.0, "feedback:wrong"),
        }
    )
    weigh_confidence(cands, SearchConfig(), signals)
    by = {c.item_id: c for c in cands}
    assert by["liked"].score == pytest.approx(1.2)
    assert by["wrong"].score == pytest.approx(0.68)
    assert by["plain"].score == 1.0 and by["plain"].confidence is None
    assert by["zero"].dropped is not None and "min_confidence" in by["zero"].dropped
    assert by["liked"].explain()["confidence"] == 0.75
    assert by["wrong"].explain()["confidence_source"] == "feedback:wrong"
    assert "confidence" not in by["plain"].explain()  # the explain of an unrated item as before
    # weight 0: the confidence is shown but scales nothing; the floor still applies
    again = [_cand("wrong"), _cand("zero")]
    weigh_confidence(again, SearchConfig(confidence_weight=0.0), signals)
    assert again[0].score == 1.0 and again[0].confidence == 0.1
    assert again[1].dropped is not None


def test_decay_spares_linked_and_often_used_items() -> None:
    now = 400 * DAY
    config = SearchConfig(time_decay_half_life_days=30, decay_spare_uses=3)
    cands = [_cand(k, ts=now - 90 * DAY) for k in ("old", "linked", "used", "once")]
    signals = Signals(uses={"used": 5, "once": 1}, linked={"linked": "REFERS_TO"})
    decay_by_age(cands, config, now, signals)
    by = {c.item_id: c for c in cands}
    assert by["old"].score == pytest.approx(0.125)  # three half-lives
    assert by["linked"].score == 1.0 and by["linked"].decay_spared == "linked by REFERS_TO"
    assert by["used"].score == 1.0 and by["used"].decay_spared == "used 5 times"
    assert by["once"].score == pytest.approx(0.5**1.5)  # half as old: 1.5 half-lives
    assert by["once"].decay_spared == "used 1 time"
    assert by["old"].explain()["decay"] == 0.125
    # without signals: the decay of every candidate, as before this change
    plain = [_cand(k, ts=now - 90 * DAY) for k in ("linked", "used")]
    decay_by_age(plain, config, now)
    assert [c.score for c in plain] == [time_decay(90 * DAY, 30)] * 2


def test_no_signals_leaves_every_score_as_it_was() -> None:
    config = SearchConfig()
    cands = [_cand("a", score=0.3, ts=1.0), _cand("b", score=0.2, ts=2.0)]
    adjust_expanded(cands, "anything", config, 10 * DAY, Signals())
    assert [c.score for c in cands] == [0.3, 0.2]
    assert all(c.confidence is None and c.decay is None for c in cands)
    assert [c.explain() for c in cands] == [
        _cand("a", score=0.3, ts=1.0).explain(),
        _cand("b", score=0.2, ts=2.0).explain(),
    ]


def test_tool_failed_reads_error_and_exit_code() -> None:
    assert tool_failed({"error": "timeout"})
    assert tool_failed({"exit_code": 2})
    assert not tool_failed({"exit_code": 0})
    assert not tool_failed({})
