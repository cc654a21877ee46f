"""Session keys: the pure choice of key terms, keys following sessions as they grow and as
turns are forgotten, and search favouring the sessions whose keys match (every backend: the
`cb` fixture is parametrised)."""

from __future__ import annotations

from ctxbase import ContextBase
from ctxbase.retrieve.config import SearchConfig, get_preset
from ctxbase.retrieve.session_keys import key_terms
from ctxbase.retrieve.tokenize import query_terms


def stem(word: str) -> str:
    (term,) = query_terms(word)
    return term


def test_key_terms_favour_terms_many_turns_hold_and_few_sessions() -> None:
    counts = {1: 3, 2: 3, 3: 1, 4: 1}
    held_by = {1: 1, 2: 10, 3: 1, 4: 10}  # sessions holding each term, of 10
    # 1: in three turns and this session only; 2: three turns but every session; 3: one turn
    assert key_terms(counts, held_by, 10, 2) == [1, 3]
    assert key_terms(counts, held_by, 10, 10) == [1, 3, 2, 4]
    assert key_terms({7: 1, 5: 1}, {}, 3, 1) == [5]  # a tie: the term indexed first
    assert key_terms({}, {}, 3, 4) == []


def _session(cb: ContextBase, session: str, texts: list[str]) -> list[str]:
    return [cb.record("user_message", session_id=session, text=t).id for t in texts]


def test_a_key_says_what_its_session_is_about_and_follows_it(cb: ContextBase) -> None:
    _session(cb, "s1", [f"The pottery class was fun, bowl number {n}" for n in range(4)])
    _session(cb, "s2", [f"We went camping by the lake, night {n}" for n in range(4)])
    keys = cb.searcher.session_keys
    assert stem("pottery") in keys.key(cb.project, "s1")
    assert stem("pottery") not in keys.key(cb.project, "s2")
    assert stem("camping") in keys.key(cb.project, "s2")
    assert keys.key(cb.project, "nowhere") == []
    assert all(len(term) > 1 for term in keys.key(cb.project, "s1"))  # words, not digits
    # the session grows: its key follows without a reload of the index
    reloads = cb.searcher.keywords.reloads
    _session(cb, "s2", [f"The violin recital went well, piece {n}" for n in range(6)])
    assert stem("violin") in keys.key(cb.project, "s2")
    assert cb.searcher.keywords.reloads == reloads


def test_a_forgotten_turn_leaves_the_key(cb: ContextBase) -> None:
    _session(cb, "s1", [f"The pottery class was fun, bowl number {n}" for n in range(4)])
    secret = _session(cb, "s1", ["My zanzibarian passport code is hidden here"])
    _session(cb, "s2", [f"We went camping by the lake, night {n}" for n in range(4)])
    keys = cb.searcher.session_keys
    assert stem("zanzibarian") in keys.key(cb.project, "s1")
    cb.soft_delete(secret)
    assert stem("zanzibarian") not in keys.key(cb.project, "s1")
    assert stem("pottery") in keys.key(cb.project, "s1")
    # a hard forget drops the index: the keys are counted again without the turn
    more = _session(cb, "s2", ["The quokkanese lantern stays in the tent"])
    assert stem("quokkanese") in keys.key(cb.project, "s2")
    cb.forget(event_ids=more)
    assert stem("quokkanese") not in keys.key(cb.project, "s2")
    assert stem("camping") in keys.key(cb.project, "s2")


def test_search_favours_the_turns_of_the_sessions_whose_keys_match(cb: ContextBase) -> None:
    # s1 is about pottery; its first turn names the vase made without the word. A shorter
    # turn of a session about something else names a vase too.
    made = _session(cb, "s1", ["I made a blue vase and a plate for my aunt"])[0]
    _session(
        cb, "s1", [f"Pottery again today, my pottery teacher helped, try {n}" for n in range(4)]
    )
    fell = _session(cb, "s2", ["A vase fell", "The office meeting ran long"])[0]
    for n in range(6):
        _session(cb, f"o{n}", [f"Work meeting about budgets, item {n}", "Nothing else happened"])
    query = "the vase from pottery"
    off = get_preset("keyword", question_weight=1.0)
    on = get_preset("keyword", question_weight=1.0, session_key_weight=1.0, session_keys=1)

    def ranks(config: SearchConfig) -> tuple[int, int]:
        found = cb.search(query, config=config, top_k=20)
        ids = [c.item.owner_id for c in found.results]
        return ids.index(made), ids.index(fell)

    assert ranks(off)[0] > ranks(off)[1]  # the shorter turn first on the query's words
    assert ranks(on)[0] < ranks(on)[1]  # the pottery session's turn first with its key
    assert "session_keys" in cb.search(query, config=on).timings_ms
    assert "session_keys" not in cb.search(query, config=off).timings_ms
