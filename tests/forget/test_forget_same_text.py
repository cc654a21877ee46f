"""The same thing stored twice (a PIN pasted in two sessions): search folds the copies into
one hit, which names them (`duplicates`); forgetting or hiding the hit names the copies
still visible (`same_text_still_visible`), so the caller can forget them too. Both
backends."""

from __future__ import annotations

from ctxbase import ContextBase

PIN = "my card PIN is 4321, remember it"
# the same up to whitespace, case and the closing full stop
PIN_AGAIN = "My card  PIN is 4321,\nremember it."
PIN_MORE = "my card PIN is 4321, remember it, and the door code too"


def _pins(cb: ContextBase) -> tuple[str, str, str]:
    a = cb.record("user_message", session_id="s1", text=PIN).id
    b = cb.record("user_message", session_id="s2", text=PIN_AGAIN).id
    c = cb.record("user_message", session_id="s3", text=PIN_MORE).id
    cb.flush()
    return a, b, c


def test_a_hit_names_the_copies_folded_into_it(cb: ContextBase) -> None:
    a, b, c = _pins(cb)
    response = cb.search("card PIN 4321", top_k=5)
    hits = {h.id: h for h in response.results}
    assert b not in hits  # folded: only in `considered`
    (folded,) = [k for k in response.considered if k.id == b]
    assert folded.dropped == f"near-duplicate of {a}"
    assert hits[a].duplicates == [b]
    assert hits[c].duplicates == []  # says more: a hit of its own
    assert hits[a].explain()["duplicates"] == [b]


def test_forgetting_the_hit_names_the_copy_left(cb: ContextBase) -> None:
    a, b, c = _pins(cb)
    report = cb.forget(event_ids=[a])
    assert report.removed["events"] == 1
    assert report.same_text_still_visible == [b]  # not c, which says more
    assert report.as_dict()["same_text_still_visible"] == [b]
    assert {h.id for h in cb.search("card PIN 4321").results} == {b, c}
    # forgetting the copy too leaves no copy
    assert cb.forget(event_ids=[b]).same_text_still_visible == []
    assert {h.id for h in cb.search("card PIN 4321").results} == {c}
    # a retry names nothing: what it forgot is gone
    assert cb.forget(event_ids=[a]).same_text_still_visible == []


def test_hiding_the_hit_names_the_copy_left(cb: ContextBase) -> None:
    a, b, _ = _pins(cb)
    seen = cb.set_hidden([b])
    assert (seen.changed, seen.same_text_still_visible) == (1, [a])
    assert seen.as_dict()["same_text_still_visible"] == [a]
    # the copy hidden too: neither names the other, and restoring reports none
    assert cb.set_hidden([a]).same_text_still_visible == []
    assert cb.set_hidden([a, b], False).same_text_still_visible == []
    # both named at once: neither is "left"
    assert cb.set_hidden([a, b]).same_text_still_visible == []


def test_copies_of_other_projects_and_other_texts_are_not_named(cb: ContextBase) -> None:
    a = cb.record("user_message", session_id="s1", text=PIN).id
    cb.record("user_message", session_id="s1", text=PIN, project="elsewhere")
    cb.record("user_message", session_id="s1", text="remember it: my card PIN is 4321")
    cb.flush()
    assert cb.forget(event_ids=[a]).same_text_still_visible == []


def test_long_and_chinese_copies_are_found(cb: ContextBase) -> None:
    texts = [
        # chunked: found by the start of its first chunk
        " ".join(f"line{i} of the deploy log ok" for i in range(120)) + " token zq81",
        "# Deploy log\n" + "\n".join(f"step {i} done in {i % 7} s" for i in range(150)),
        "我的银行卡密码是4321，请记住",
        "部署日志" + "".join(f"第{i}步完成，耗时{i % 7}秒。" for i in range(150)),
    ]
    # a longer one that starts the same is not a copy
    cb.record("tool_result", session_id="s0", text=texts[0] + " and more")
    first = [cb.record("tool_result", session_id="s1", text=t).id for t in texts]
    copies = [cb.record("tool_result", session_id="s2", text=t).id for t in texts]
    cb.flush()
    assert all(len(t) > 1200 for t in (texts[0], texts[1], texts[3]))
    assert cb.forget(event_ids=first).same_text_still_visible == copies


def test_an_entity_forgotten_names_the_events_saying_it(cb: ContextBase) -> None:
    said = "We decided to keep the order cache for 300 seconds"
    source = cb.record("user_message", session_id="s1", text=said).id
    copy = cb.record("user_message", session_id="s2", text=said).id
    cb.flush()
    (decision,) = [
        e.id for e in cb.list_entities(type="decision") if e.properties["event_id"] == source
    ]
    report = cb.forget(entity_ids=[decision])
    # the message it was anchored from goes with it; the other session's copy stays, named
    assert (report.sources_forgotten, report.same_text_still_visible) == ([source], [copy])
