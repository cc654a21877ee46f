"""Dense feedback: the pure vector and session choices, the store reading vectors back, and
search reaching a turn of another session that is near only the first hits (every backend:
the `store` and `cb` fixtures are parametrised)."""

from __future__ import annotations

import numpy as np

from ctxbase import ContextBase
from ctxbase.retrieve.config import get_preset
from ctxbase.retrieve.dense_feedback import feedback_vector, outside_sessions


def _v(*xs: float) -> np.ndarray:
    return np.array(xs, dtype=np.float32)


def test_feedback_vector_moves_the_query_toward_the_seeds() -> None:
    q, a, b = _v(1, 0, 0), _v(0, 2, 0), _v(0, 0, 1)
    out = feedback_vector(q, [a, b], 1.0)
    assert out is not None
    assert abs(float(np.linalg.norm(out)) - 1.0) < 1e-6
    # unit query plus the mean of the unit seeds (0, .5, .5), normalised
    expected = _v(1, 0.5, 0.5) / np.linalg.norm(_v(1, 0.5, 0.5))
    assert np.allclose(out, expected, atol=1e-6)
    assert np.allclose(feedback_vector(q, [a], 0.0), q)  # mix 0: the query alone
    assert feedback_vector(q, [], 1.0) is None
    assert feedback_vector(_v(1, 0), [_v(-1, 0)], 1.0) is None  # they cancel out


def test_only_hits_of_sessions_not_held_are_kept_in_order() -> None:
    found = [("a", 0.9), ("b", 0.8), ("c", 0.7), ("d", 0.6), ("e", 0.5)]
    sessions = {"a": "s1", "b": "s2", "c": "s3", "d": None}  # d: no session, e: unknown
    assert outside_sessions(found, sessions, {"s1"}) == [("b", 0.8), ("c", 0.7)]
    assert outside_sessions(found, sessions, {"s1", "s2", "s3"}) == []


def test_store_reads_the_vectors_of_given_items(cb: ContextBase) -> None:
    ids = [cb.record("user_message", session_id="s", text=f"turn {n}").id for n in range(3)]
    project = cb.project
    cb.store.put_vectors("m", [(project, i, _v(n + 1, 1, 0, 0)) for n, i in enumerate(ids[:2])])
    got = cb.store.get_vectors(project, "m", [ids[0], ids[2], "missing"])
    assert list(got) == [ids[0]]  # the third item has no vector, "missing" is no item
    assert np.allclose(got[ids[0]], _v(1, 1, 0, 0))
    assert cb.store.get_vectors(project, "other-model", ids) == {}
    assert cb.store.get_vectors(project, "m", []) == {}
    assert cb.store.get_vectors("another-project", "m", ids) == {}


def test_search_reaches_a_session_near_only_the_first_hits(cb: ContextBase) -> None:
    def say(session: str, text: str) -> str:
        return cb.record("user_message", session_id=session, text=text).id

    say("s1", "Nate plays chess at the Riverside club")
    say("s1", "Nate played chess again at the Riverside club on Sunday")
    for n in range(30):  # near the query's words, all in one session the top hits reach
        say("f", f"Where does the weather go, does it, day {n}")
    trophy = say("s2", "The Riverside club put the trophy on its shelf")
    for n in range(40):  # a session of other talk
        say("g", f"Lunch was pasta and salad, number {n}")
    cb.wait_for_embeddings()
    query = "Where does Nate play chess?"
    plain = cb.search(query, config=get_preset("hybrid", top_k=5))
    assert trophy not in [c.item.owner_id for c in plain.results]
    assert "dense_feedback" not in plain.timings_ms  # off by default
    config = get_preset("hybrid", top_k=5, dense_feedback_weight=1.0)
    response = cb.search(query, config=config)
    assert trophy in [c.item.owner_id for c in response.results]
    assert "dense_feedback" in response.timings_ms
