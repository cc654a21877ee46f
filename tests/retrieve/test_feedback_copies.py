"""A rating is on what a memory says: search folds copies of the same text into one hit
(`duplicates`), and a rating of the hit holds for those copies too, named in the answer's
`same_text`; "neutral" undoes it for the same copies. A text that says more is its own
memory, and a copy's record names nothing of the memory rated (which a forget of that one
would leave behind). Both backends."""

from __future__ import annotations

import json

from ctxbase import ContextBase
from ctxbase.store.base import FEEDBACK_SCOPE

PIN = "my card PIN is 4321, remember it"
# the same up to whitespace, case and the closing full stop
PIN_AGAIN = "My card  PIN is 4321,\nremember it."
PIN_MORE = "my card PIN is 4321, remember it, and the door code too"
QUERY = "card PIN 4321"


def _pins(cb: ContextBase) -> tuple[str, str, str]:
    a = cb.record("user_message", session_id="s1", text=PIN).id
    b = cb.record("user_message", session_id="s2", text=PIN_AGAIN).id
    c = cb.record("user_message", session_id="s3", text=PIN_MORE).id
    cb.flush()
    return a, b, c


def _hits(cb: ContextBase) -> list[str]:
    return [h.id for h in cb.search(QUERY, top_k=5).results]


def test_wrong_on_a_folded_hit_leaves_its_copy_out_and_neutral_brings_both_back(
    cb: ContextBase,
) -> None:
    a, b, c = _pins(cb)
    (hit,) = [h for h in cb.search(QUERY, top_k=5).results if h.id == a]
    assert hit.duplicates == [b]
    given = cb.feedback(a, "wrong")
    assert _hits(cb) == [c]  # the copy does not come back in the hit's place
    assert given.same_text == [b]
    copy = cb.get_feedback(b)
    assert copy is not None and (copy.label, copy.confidence) == ("wrong", 0.0)
    assert cb.get_feedback(c) is None  # says more: rated on its own
    # the assembled context leaves the copy out as well
    ctx = cb.assemble_context(agent_role="assistant", user_intent=QUERY, session_id="s9")
    placed = [k["id"] for k in ctx.trace["candidates"] if k["included"]]
    assert c in placed and a not in placed and b not in placed

    back = cb.feedback(a, "neutral")
    assert back.same_text == [b]
    assert sorted(_hits(cb)) == sorted([a, c])  # b folded into a again
    assert [(f.label, f.confidence) for f in cb.feedback_history(b)] == [
        ("wrong", 0.0),
        ("neutral", 0.5),
    ]


def test_a_forget_of_the_rated_one_leaves_no_trace_of_it_on_the_copy(cb: ContextBase) -> None:
    a, b, _ = _pins(cb)
    cb.feedback(a, "wrong", note="the PIN changed")
    cb.feedback(b, "disliked")  # from the copy's side: the first one is rated with it
    cb.forget(event_ids=[a])
    history = cb.store.state_history(cb.project, FEEDBACK_SCOPE, "", b)
    assert [h.new_value["label"] for h in history] == ["wrong", "disliked"]
    said = json.dumps([(h.new_value, h.old_value, h.cause) for h in history], default=str)
    assert a not in said  # nor a chunk of it ("<id>#<n>")
    # the copy stays rated: wrong no more, but disliked, until rated otherwise
    assert [h.id for h in cb.search(QUERY, top_k=5).results][-1] == b


def test_a_copy_hidden_when_rating_is_not_rated(cb: ContextBase) -> None:
    a, b, _ = _pins(cb)
    cb.set_hidden([b])
    assert cb.feedback(a, "wrong").same_text == []  # only the visible copies are folded
    assert cb.get_feedback(b) is None


def test_rating_the_copy_reaches_the_first_and_a_later_copy(cb: ContextBase) -> None:
    a, b, _ = _pins(cb)
    assert cb.feedback(b, "disliked").same_text == [a]
    later = cb.record("user_message", session_id="s4", text=PIN).id
    cb.flush()
    assert cb.get_feedback(later) is None  # stored after the rating: not rated by it
    assert sorted(cb.feedback(a, "neutral").same_text) == sorted([b, later])
    for node in (a, b, later):
        current = cb.get_feedback(node)
        assert current is not None and current.label == "neutral"


def test_the_statements_cut_from_a_copy_are_rated_with_it(cb: ContextBase) -> None:
    said = "We decided to keep the order cache for 300 seconds"
    first = cb.record("user_message", session_id="s1", text=said).id
    copy = cb.record("user_message", session_id="s2", text=said).id
    cb.flush()
    decisions = {
        e.properties["event_id"]: e.id
        for e in cb.list_entities(type="decision")
        if e.properties["event_id"] in (first, copy)
    }
    assert set(decisions) == {first, copy}
    given = cb.feedback(first, "wrong")
    assert given.same_text == [copy]
    assert sorted(given.same_statement) == sorted(decisions.values())
    assert cb.search("order cache 300 seconds", top_k=5).results == []
    # from an entity's side: its message, the copy and the copy's statement
    back = cb.feedback(decisions[copy], "neutral")
    assert copy in back.same_statement + back.same_text and first in back.same_text
    for node in (first, copy, *decisions.values()):
        current = cb.get_feedback(node)
        assert current is not None and current.label == "neutral", node


def test_a_single_hit_still_names_its_copy(cb: ContextBase) -> None:
    a, b, _ = _pins(cb)
    for k in (1, 2):  # the copy ranks just below the cut: still folded into the hit
        response = cb.search(QUERY, top_k=k)
        (hit,) = [h for h in response.results if h.id in (a, b)]
        assert hit.duplicates == [b if hit.id == a else a]
        dropped = {c.id: c.dropped for c in response.considered}
        assert (dropped[hit.duplicates[0]] or "").startswith("near-duplicate of")
