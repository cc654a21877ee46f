"""A message retracted (`expire_message`) or rated false leaves searches with the words the
next turn was indexed with: they no longer find that turn (SQLite and PostgreSQL). A
rating that is no longer false shows them again; restoring a hidden message that is also
retracted keeps them out."""

from __future__ import annotations

from ctxbase import ContextBase


def _found(cb: ContextBase, word: str) -> list[str]:
    hits = cb.search(word, preset="keyword").results
    return [c.item.owner_id for c in hits]


def test_withheld_words_leave_the_turn_after_them(cb: ContextBase) -> None:
    cm = cb.context_manager()
    sid = cm.create_session("u1")
    said = [
        cm.add_message(sid, "user", "The vault password hint is cinderpoppy."),
        cm.add_message(sid, "user", "Also book the meeting room for Friday."),
        cm.add_message(sid, "user", "The deploy window is marblewisp Tuesday."),
        cm.add_message(sid, "user", "Please order more coffee."),
    ]
    cb.flush()
    # indexed with the turn before it, each next turn is found by its words
    assert said[1] in _found(cb, "cinderpoppy") and said[3] in _found(cb, "marblewisp")
    cm.expire_message(sid, said[0])
    assert _found(cb, "cinderpoppy") == []
    cb.feedback(said[2], "wrong")
    assert _found(cb, "marblewisp") == []
    assert said[3] in _found(cb, "coffee")  # the turn itself is still found by its own words
    cb.feedback(said[2], "neutral")  # no longer false: its words come back with it
    assert said[3] in _found(cb, "marblewisp")
    # hidden and restored, a retracted message stays withheld, its words too
    cb.soft_delete([said[0]])
    cb.restore([said[0]])
    assert _found(cb, "cinderpoppy") == []
