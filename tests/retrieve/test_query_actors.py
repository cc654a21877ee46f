"""Which named actor a query is about: the pure functions, and the search preferring the
subject's events over the store (every backend: the `cb` fixture is parametrised)."""

from __future__ import annotations

from ctxbase import ContextBase
from ctxbase.retrieve.config import get_preset
from ctxbase.retrieve.query_actors import first_mention, query_subject


def test_first_mention_is_a_whole_word_position() -> None:
    assert first_mention("What did Nate give Joanna?", "joanna") == 19
    assert first_mention("What did Nate give Joanna?", "Nate") == 9
    assert first_mention("What did Nates give?", "Nate") is None
    assert first_mention("Nate?", "") is None
    # Scripts without spaces: a substring.
    assert first_mention("小明送给小红什么？", "小红") == 4


def test_query_subject_is_the_actor_named_first() -> None:
    assert query_subject("What did Nate give Joanna?", ["joanna", "nate"]) == "nate"
    both = ["caroline", "melanie"]
    assert query_subject("What book did Melanie read from Caroline's advice?", both) == "melanie"
    assert query_subject("What does Melanie play?", ["melanie"]) == "melanie"
    assert query_subject("What does everyone play?", ["melanie"]) is None
    assert query_subject("小明送给小红什么？", ["小红", "小明"]) == "小明"
    # Two names starting at one place (a Chinese name inside a longer one): the longer.
    assert query_subject("王小明说了什么？", ["王小明", "王小"]) == "王小明"


def _pair(cb: ContextBase) -> tuple[set[str], set[str]]:
    """Three sessions in which nate and joanna each say they gave a gift."""
    ids: dict[str, set[str]] = {"nate": set(), "joanna": set()}
    for n in range(3):
        for actor, text in (
            ("nate", f"I gave a gift, day {n}"),
            ("joanna", f"I gave a gift too, {n}"),
        ):
            ids[actor].add(
                cb.record("user_message", session_id=f"s{n}", text=text, agent_id=actor).id
            )
    cb.wait_for_embeddings()
    return ids["nate"], ids["joanna"]


def test_a_query_naming_two_actors_prefers_its_subject(cb: ContextBase) -> None:
    nate, joanna = _pair(cb)
    query = "What gift did nate give joanna?"
    top = cb.search(query, config=get_preset("hybrid", subject_actor=True, top_k=3)).results
    assert {c.item.owner_id for c in top} == nate
    # what the subject said in every session, not one session's turns
    assert {c.item.session_id for c in top} == {"s0", "s1", "s2"}
    other = "What gift did joanna give nate?"
    top = cb.search(other, config=get_preset("hybrid", subject_actor=True, top_k=3)).results
    assert {c.item.owner_id for c in top} == joanna


def test_without_subject_actor_two_names_favour_no_one(cb: ContextBase) -> None:
    nate, joanna = _pair(cb)
    resp = cb.search("What gift did nate give joanna?", config=get_preset("hybrid", top_k=6))
    scored = {c.item.owner_id: c.score for c in resp.results}
    # Neither actor's events were multiplied: the best of each differ by the texts alone.
    assert max(scored[i] for i in nate) < 1.3 * max(scored[i] for i in joanna)
    assert max(scored[i] for i in joanna) < 1.3 * max(scored[i] for i in nate)
