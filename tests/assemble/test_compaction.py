"""Retention of archived sessions (assemble/compaction.py), on both backends: an archived
session older than the threshold gets one extractive `session_summary` event and its raw
turns are hidden, reversibly, while what was anchored from them stays; a second run does
nothing; retracted, hidden and forgotten text never reaches (or stays in) a summary; the
purge of soft-deleted rows leaves compacted turns alone, and a forgotten summary takes the
turns still compacted into it."""

from __future__ import annotations

import time
from pathlib import Path

from ctxbase import ContextBase
from ctxbase.assemble.compaction import SUMMARY_TYPE
from ctxbase.assemble.summary_text import SUMMARY_TOKENS
from ctxbase.assemble.tokens import get_token_counter

LATER = time.time() + 40 * 86400  # "now" for the compaction: the archive is 40 days old

DECISION = "We decided to use PostgreSQL for the orders table."
REQUIREMENT = "We must support refunds within 7 days."


def _session(cb: ContextBase, sid: str = "s1") -> dict[str, str]:
    ids = {
        "ask": cb.record("user_message", session_id=sid, text=REQUIREMENT + " Plan the schema.").id,
        "answer": cb.record("assistant_message", session_id=sid, text=DECISION).id,
        "tool": cb.record("tool_result", session_id=sid, text="orders: 1200 rows, refunds: 35").id,
        "secret": cb.record(
            "user_message", session_id=sid, text="The staging password is kiwi77."
        ).id,
    }
    cb.flush()  # anchored: the decision and the requirement are entities now
    return ids


def _summary(cb: ContextBase, sid: str = "s1") -> list[str]:
    found = cb.store.list_events(cb.project, sid, types=[SUMMARY_TYPE], include_inactive=True)
    return [e.text or "" for e in found]


def _found(cb: ContextBase, query: str) -> list[tuple[str, str | None]]:
    return [(c.item.owner_id, c.item.type) for c in cb.search(query, preset="keyword").results]


def test_an_old_archived_session_becomes_one_summary(cb: ContextBase) -> None:
    ids = _session(cb)
    cb.record("user_message", session_id="live", text="The staging password is kiwi77 too.")
    decisions = [e.id for e in cb.list_entities(type="decision")]
    assert decisions
    cb.archive_session("s1")

    report = cb.compact_archived("30d", now=LATER)

    assert report.compacted == ["s1"] and report.events_hidden == 4
    (text,) = _summary(cb)
    assert DECISION in text and REQUIREMENT in text and "Plan the schema" in text
    assert text.startswith("Summary of archived session s1")
    # the raw turns are hidden, not gone: reads skip them, the rows stay
    assert [e.type for e in cb.store.list_events(cb.project, "s1")] == [SUMMARY_TYPE]
    kept = cb.store.get_events(cb.project, list(ids.values()), include_inactive=True)
    assert len(kept) == 4 and not any(e.active for e in kept)
    # searches serve the summary instead of the turns; other sessions are untouched
    hits = _found(cb, "refunds orders")
    assert [t for _, t in hits if t in ("decision", "requirement", SUMMARY_TYPE)]
    events = [c.item for c in cb.search("refunds orders", preset="keyword").results]
    assert [i.type for i in events if i.kind == "event"] == [SUMMARY_TYPE]
    assert not {ids["ask"], ids["answer"], ids["tool"]} & {o for o, _ in hits}
    assert cb.store.list_events(cb.project, "live")[0].active
    # what was anchored from the turns stays visible
    assert {e.id for e in cb.list_entities(type="decision")} == set(decisions)
    assert cb.store.get_entities(cb.project, decisions)
    # reversible: restore brings a turn back
    assert cb.restore([ids["tool"]]) >= 1
    assert ids["tool"] in [e.id for e in cb.store.list_events(cb.project, "s1")]


def test_running_again_does_nothing_more(cb: ContextBase) -> None:
    ids = _session(cb)
    cb.archive_session("s1")
    first = cb.compact_archived(30 * 86400, now=LATER)
    cb.restore([ids["tool"]])  # a turn a user brought back stays back
    before = cb.store.list_events(cb.project, "s1", include_inactive=True)

    again = cb.compact_archived("30d", now=LATER)

    assert first.compacted == ["s1"]
    assert again.compacted == [] and again.events_hidden == 0
    assert again.already_compacted == ["s1"]
    after = cb.store.list_events(cb.project, "s1", include_inactive=True)
    assert [(e.id, e.active, e.text) for e in after] == [(e.id, e.active, e.text) for e in before]
    assert len(_summary(cb)) == 1


def test_a_captured_session_summary_is_a_turn_not_a_compaction(cb: ContextBase) -> None:
    """Only compaction's own summary says a session was compacted: one captured by a user
    (the type is open to capture) made compaction skip the session for good."""
    _session(cb)
    said = cb.record("session_summary", session_id="s1", text="my own notes on s1")
    cb.archive_session("s1")
    report = cb.compact_archived("30d", now=LATER)
    assert report.compacted == ["s1"] and report.events_hidden == 5
    (text,) = [t for t in _summary(cb) if t.startswith("Summary of archived session s1")]
    assert DECISION in text
    assert not cb.store.get_events(cb.project, [said.id])  # hidden with the other turns


def test_only_sessions_archived_longer_ago_than_the_threshold(cb: ContextBase) -> None:
    _session(cb, "old")
    _session(cb, "open")
    cb.archive_session("old")

    soon = cb.compact_archived("30d", now=time.time() + 86400)
    assert soon.compacted == [] and soon.too_recent == ["old"]
    assert _summary(cb, "old") == []
    late = cb.compact_archived("30d", now=LATER)
    assert late.compacted == ["old"]  # a live session is never compacted
    assert _summary(cb, "open") == []
    assert all(e.active for e in cb.store.list_events(cb.project, "open"))


def test_retracted_and_hidden_text_never_reaches_a_summary(cb: ContextBase) -> None:
    ids = _session(cb)
    cb.expire_message("s1", ids["tool"])  # retracted: out of prompts, so out of the summary
    cb.soft_delete([ids["secret"]])
    cb.archive_session("s1")

    cb.compact_archived(0, now=LATER)

    (text,) = _summary(cb)
    assert "1200 rows" not in text and "kiwi77" not in text
    assert DECISION in text
    # the hidden message stays hidden by its user: the purge still forgets it
    cb.purge_soft_deleted(0)
    assert cb.store.get_events(cb.project, [ids["secret"]], include_inactive=True) == []


def test_a_reply_repeating_a_retracted_message_never_reaches_a_summary(cb: ContextBase) -> None:
    cm = cb.context_manager()
    sid = cm.create_session("u1")
    told = cm.add_message(sid, "user", "The deadline is Friday")
    cm.add_message(sid, "assistant", "OK, deadline Friday noted.")
    cm.add_message(sid, "user", "Also book the venue for the launch party")
    cm.expire_message(sid, told)  # retracted: so is the reply that repeats it
    archived = cb.archive_session(sid).metadata["archive_summary"]
    assert "Friday" not in archived and "venue" in archived
    cb.compact_archived(0, now=LATER)
    (text,) = _summary(cb, sid)
    assert "Friday" not in text and "venue" in text
    # another session of the user does not get it back through the summary
    other = cm.create_session("u1")
    cm.add_message(other, "user", "When is the deadline?")
    prompt = cm.get_prompt_messages(other, max_tokens=2000)
    assert not any("Friday" in m["content"] for m in prompt)


def test_forgotten_text_leaves_the_summary(cb: ContextBase) -> None:
    ids = _session(cb)
    cb.archive_session("s1")
    cb.compact_archived(0, now=LATER)
    assert "kiwi77" in _summary(cb)[0]
    assert _found(cb, "kiwi77")

    cb.forget(event_ids=[ids["secret"]])

    (text,) = _summary(cb)
    assert "kiwi77" not in text and DECISION in text
    assert _found(cb, "kiwi77") == []
    assert "kiwi77" not in str(cb.get_session("s1").metadata)  # nor the archive's own summary
    # hiding a compacted turn by its own id takes it out of the summary too
    cb.soft_delete([ids["tool"]])
    (text,) = _summary(cb)
    assert "1200 rows" not in text and DECISION in text
    assert _found(cb, "1200 rows") == []


def test_the_purge_of_soft_deleted_rows_keeps_compacted_turns(cb: ContextBase) -> None:
    ids = _session(cb)
    cb.archive_session("s1")
    cb.compact_archived(0, now=LATER)

    cb.purge_soft_deleted(0)

    kept = cb.store.get_events(cb.project, list(ids.values()), include_inactive=True)
    assert len(kept) == 4


def test_a_forgotten_summary_takes_the_turns_only_it_shows(cb: ContextBase) -> None:
    """Forgotten by its id, or hidden and purged, a summary takes the raw turns still
    compacted into it: left stored, nothing would show, restore or ever purge them. A turn
    restored before stays: it shows itself."""
    for purge in (False, True):
        sid = f"s{int(purge)}"
        ids = _session(cb, sid)
        cb.archive_session(sid)
        cb.compact_archived(0, now=LATER)
        cb.restore([ids["tool"]])  # shown on its own again
        summary = cb.store.list_events(cb.project, sid, types=[SUMMARY_TYPE])[0].id
        if purge:
            cb.soft_delete([summary])
            report = cb.purge_soft_deleted(0)
        else:
            report = cb.forget(event_ids=[summary])
        gone = [ids["ask"], ids["answer"], ids["secret"]]
        assert sorted(report.sources_forgotten) == sorted(gone)
        left = cb.store.get_events(cb.project, list(ids.values()), include_inactive=True)
        assert [e.id for e in left] == [ids["tool"]]
        assert _found(cb, "kiwi77") == [] and _found(cb, "1200 rows") != []
    # nothing of them stays stored, in any table
    assert "kiwi77" not in repr(cb.store.list_events(cb.project, "s0", include_inactive=True))


def test_a_long_session_gets_a_bounded_summary(cb: ContextBase) -> None:
    for n in range(120):
        cb.capture(
            "user_message",
            session_id="long",
            text=f"Step {n}: the importer reads batch {n} of the catalogue and checks prices. "
            f"Nothing unusual happened in batch {n}, which had {n * 7} rows.",
        )
    cb.archive_session("long")
    seen: list[tuple[int, int, str]] = []

    report = cb.compact_archived(0, now=LATER, progress=lambda d, t, s: seen.append((d, t, s)))

    assert report.events_hidden == 120
    (text,) = _summary(cb, "long")
    assert get_token_counter().count(text) <= SUMMARY_TOKENS
    assert "120 turns" in text
    assert seen == [(1, 1, "long")]


def test_every_project_at_once(tmp_path: Path) -> None:
    # its own database: the PostgreSQL one is shared by every test's project
    with ContextBase(str(tmp_path / "all.db"), project="p1", embedder=None) as cb:
        _session(cb)
        cb.archive_session("s1")
        cb.record("user_message", session_id="t", text="another project's turn", project="p2")
        cb.archive_session("t", project="p2")

        report = cb.compact_archived(0, now=LATER, all_projects=True)

        assert sorted(report.compacted) == ["s1", "t"]
        assert _summary(cb) and cb.store.list_events("p2", "t", types=[SUMMARY_TYPE])


def test_the_facts_the_turns_set_stay(cb: ContextBase) -> None:
    cm = cb.context_manager()
    sid = cm.create_session(session_id="f1")
    cm.add_message(sid, "user", "预算控制在5万以内，截止日期是月底。")
    before = cb.get_facts(scope_id=sid, scope="session")
    assert "budget" in before
    cm.archive_session(sid)

    cb.compact_archived(0, now=LATER)

    assert cb.get_facts(scope_id=sid, scope="session") == before
    (text,) = _summary(cb, sid)
    assert "预算控制在5万以内" in text


def test_a_compacted_message_saying_more_than_a_forgotten_decision_is_named(
    cb: ContextBase,
) -> None:
    more = cb.record(
        "user_message",
        session_id="m",
        text="We decided to use Redis for the cache. Lunch is at noon.",
    ).id
    cb.flush()
    (decision,) = [
        e.id for e in cb.list_entities(type="decision") if e.properties["event_id"] == more
    ]
    cb.archive_session("m")
    cb.compact_archived(0, now=LATER)

    report = cb.forget(entity_ids=[decision])

    # the summary still says it through the message: named, for the caller to forget too
    assert report.sources_still_visible == [more]
    assert "Redis" in _summary(cb, "m")[0]
    cb.forget(event_ids=[more])
    assert "Redis" not in _summary(cb, "m")[0]
