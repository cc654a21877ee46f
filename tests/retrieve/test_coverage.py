"""Complementary hits at the top (retrieve/coverage.py): pure functions, then real searches
on every backend (the `cb` fixture is parametrised)."""

from __future__ import annotations

import math

import pytest

from ctxbase import ContextBase, ValidationError
from ctxbase.retrieve.config import PRESETS, get_preset
from ctxbase.retrieve.coverage import complement_order, term_weights


def test_term_weights_are_idf_over_the_candidates() -> None:
    docs = [frozenset({"a", "b"}), frozenset({"a"}), frozenset({"a", "c"}), frozenset()]
    w = term_weights(["a", "c", "zz", "a"], docs)
    assert list(w) == ["a", "c", "zz"]  # each distinct term once, in query order
    assert w["a"] == pytest.approx(math.log(1 + 1.5 / 3.5))
    assert w["c"] == pytest.approx(math.log(1 + 3.5 / 1.5))
    assert w["zz"] > w["c"] > w["a"] > 0  # rarer among the candidates: weighs more


def test_the_next_place_goes_to_the_hit_that_adds_what_is_missing() -> None:
    ranked = [("first", 1.0), ("same", 0.9), ("other", 0.85), ("tail", 0.1)]
    terms = {
        "first": frozenset({"cancel", "hours"}),
        "same": frozenset({"cancel", "hours"}),
        "other": frozenset({"shenzhen", "back"}),
        "tail": frozenset({"shenzhen"}),
    }
    query = ["shenzhen", "back", "cancel", "hours"]
    assert complement_order(ranked, terms, query, 0.0, 10) == ranked  # off
    out = complement_order(ranked, terms, query, 0.5, 10)
    assert [i for i, _ in out] == ["first", "other", "same", "tail"]
    # the scores stay in descending order: the window's are handed out again
    assert [s for _, s in out] == [1.0, 0.9, 0.85, 0.1]
    # too small a lead in score is not overturned by a small boost
    assert [i for i, _ in complement_order(ranked, terms, query, 0.05, 10)][:2] == [
        "first",
        "same",
    ]


def test_only_the_window_is_reordered_and_the_first_hit_stays() -> None:
    ranked = [("a", 3.0), ("b", 2.0), ("c", 1.9), ("d", 1.8)]
    terms = {"a": frozenset({"x"}), "b": frozenset({"x"}), "c": frozenset({"x"})}
    terms["d"] = frozenset({"y"})
    # d adds "y" but is outside a window of 3
    assert complement_order(ranked, terms, ["x", "y"], 5.0, 3) == ranked
    assert [i for i, _ in complement_order(ranked, terms, ["x", "y"], 5.0, 4)] == [
        "a",
        "d",
        "b",
        "c",
    ]
    # the first hit stays first even when a later one covers more
    terms_first = {"a": frozenset(), "b": frozenset({"x", "y"}), "c": frozenset()}
    out = complement_order(ranked[:3], terms_first, ["x", "y"], 5.0, 3)
    assert out[0][0] == "a"
    # fewer than three hits, or no query terms: nothing to re-order
    assert complement_order(ranked[:2], terms, ["y"], 5.0, 10) == ranked[:2]
    assert complement_order(ranked, terms, [], 5.0, 10) == ranked


def test_hybrid_graph_turns_it_on_and_plain_presets_do_not() -> None:
    assert PRESETS["hybrid_graph"].coverage_boost > 0
    assert PRESETS["keyword"].coverage_boost == 0
    assert PRESETS["hybrid"].coverage_boost == 0


def test_a_turn_answering_the_other_part_of_the_question_comes_second(
    cb: ContextBase,
) -> None:
    ids: dict[str, str] = {}

    def rec(key: str, text: str) -> None:
        ids[key] = cb.record("user_message", session_id="s1", text=text, agent_id="u").id

    rec("changed", "The cancellation window changed to 12 hours before class.")
    rec("lunch", "Lunch was noodles today.")
    rec(
        "docs",
        "The cancellation window change is in the docs; the cancellation constant changed too.",
    )
    rec("printer", "The printer is out of paper.")
    rec(
        "text",
        "Cancellation window changed: the app text about the cancellation window changed as well.",
    )
    rec("parking", "Parking is free on Sundays.")
    rec("back", "I got back from Shenzhen last night.")
    rec("chairs", "The new chairs arrived.")  # indexed with the words of the turn before it
    rec("stores", "Shenzhen stores asked about the app.")
    cb.wait_for_embeddings()
    name = {v: k for k, v in ids.items()}
    query = "After I got back from Shenzhen, what did the cancellation window change to?"

    def top(boost: float) -> list[str]:
        config = get_preset("keyword", top_k=4, coverage_boost=boost)
        return [name[c.item.owner_id] for c in cb.search(query, config=config).results]

    plain = top(0.0)
    # BM25 alone: the turn after the first hit, which carries its words, comes second
    assert plain[:2] == ["back", "chairs"]
    covered = top(0.5)
    assert covered[0] == "back"
    # the second place goes to a turn about the cancellation window instead
    assert covered[1] in {"changed", "docs", "text"}


def test_a_bad_coverage_setting_is_bad_input_by_name() -> None:
    with pytest.raises(ValidationError) as err:
        get_preset("hybrid_graph", coverage_window=1)
    assert err.value.field == "coverage_window"
    with pytest.raises(ValidationError) as err:
        get_preset("hybrid_graph", coverage_boost=-0.5)
    assert err.value.field == "coverage_boost"
