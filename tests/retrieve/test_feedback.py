"""Pseudo-relevance feedback: the pure term choice, and search reaching a turn that shares
words only with the first hits (every backend: the `cb` fixture is parametrised)."""

from __future__ import annotations

from ctxbase import ContextBase
from ctxbase.retrieve.config import get_preset
from ctxbase.retrieve.feedback import feedback_terms


def test_terms_shared_by_several_hits_and_rare_are_chosen() -> None:
    seeds = [
        ["nate", "win", "riversid", "club", "chess"],
        ["nate", "win", "riversid", "club", "sunday"],
        ["nate", "riversid", "weather"],
    ]
    df = {"nate": 30, "win": 4, "riversid": 3, "club": 4, "chess": 1, "sunday": 2, "weather": 2}
    # riversid: 3 seeds; club: 2; "nate" and "win" are the query's; the rest in one seed only
    assert feedback_terms(["nate", "win"], seeds, df, 100) == ["riversid", "club"]
    assert feedback_terms(["nate", "win"], seeds, df, 100, max_terms=1) == ["riversid"]
    # a term one hit holds says what that hit is about, not what the hits share
    assert feedback_terms(["nate"], seeds, df, 100, min_seeds=3) == ["riversid"]


def test_common_terms_and_degenerate_input_add_nothing() -> None:
    seeds = [["the", "club"], ["the", "club"]]
    # "the" is in half the items, "club" in 6 of 100 (over the 5 % share): both too common
    assert feedback_terms([], seeds, {"the": 50, "club": 6}, 100) == []
    assert feedback_terms([], seeds, {"the": 50, "club": 6}, 100, max_df_share=0.1) == ["club"]
    assert feedback_terms([], seeds, {}, 100) == []  # terms the project does not hold
    assert feedback_terms([], seeds, {"club": 1}, 0) == []
    assert feedback_terms([], [], {"club": 1}, 100) == []


def test_ties_keep_the_order_the_terms_first_appear_in() -> None:
    seeds = [["b", "a"], ["a", "b"]]
    assert feedback_terms([], seeds, {"a": 1, "b": 1}, 50) == ["b", "a"]


def test_search_reaches_a_turn_sharing_words_only_with_the_first_hits(cb: ContextBase) -> None:
    lunches = iter(range(1000))

    def say(text: str) -> str:
        return cb.record("user_message", session_id="s", text=text).id

    def lunch() -> None:  # a turn between: each turn is indexed with the words before it
        say(f"Lunch was pasta and salad, number {next(lunches)}")

    first = say("Nate plays chess at the Riverside club")
    lunch()
    second = say("Nate played chess again at the Riverside club on Sunday")
    lunch()
    for n in range(3):  # turns naming Nate rank next on the query's own words
        say(f"Nate said the weather was fine, day {n}")
    lunch()
    trophy = say("The Riverside club put the trophy on its shelf")
    for _ in range(120):  # the project's other items keep Riverside and club rare
        lunch()
    cb.wait_for_embeddings()
    # df counts an item's own terms and those of the turn before it (indexed with it)
    n, df = cb.searcher.keywords.frequencies(cb.project, ["riversid", "club", "nope"])
    assert n >= 129 and df == {"riversid": 6, "club": 6}
    query = "Where does Nate play chess?"
    plain = [c.item.owner_id for c in cb.search(query, config=get_preset("hybrid")).results]
    assert set(plain[:2]) == {first, second}
    assert trophy not in plain
    response = cb.search(query, config=get_preset("hybrid", feedback_weight=1.0))
    found = [c.item.owner_id for c in response.results]
    assert found[:2] == plain[:2]  # the hits it started from keep their order
    assert trophy in found  # by "Riverside" and "club", which both first hits hold
    assert "feedback" in response.timings_ms
