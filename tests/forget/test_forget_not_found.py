"""Forget, soft delete and restore say what they did not find (on SQLite and PostgreSQL):
ids the project does not hold are named in the report, and a call whose every id is
unknown is NotFoundError instead of an empty answer; an event forgotten before is named as
already forgotten, no error; an id hidden (or visible) already is no error and is told
apart from an unknown one."""

from __future__ import annotations

import re

import pytest

from ctxbase import ContextBase
from ctxbase.errors import NotFoundError, UnknownProjectError, ValidationError
from ctxbase.model import new_event_id


def _seed(cb: ContextBase) -> tuple[str, str]:
    event = cb.record("user_message", session_id="s1", text="the deploy key rotates monthly")
    doc = cb.upsert_entity("document", "runbook", "rotate the deploy key every month")
    cb.flush()
    return event.id, doc.id


def test_a_forget_names_the_ids_it_did_not_find(cb: ContextBase) -> None:
    event_id, doc_id = _seed(cb)
    report = cb.forget(event_ids=[event_id, "ev_typo"], entity_ids=[doc_id, "doc_typo"])
    assert report.removed["events"] == 1 and report.removed["entities"] >= 1
    assert report.not_found == ["ev_typo", "doc_typo"]
    assert report.as_dict()["not_found"] == ["ev_typo", "doc_typo"]
    # an id is forgotten whichever list names it: an entity named as an event is found
    named_as_event = cb.upsert_entity("document", "other", "goes too")
    cb.flush()
    mixed = cb.forget(event_ids=[named_as_event.id])
    assert mixed.not_found == [] and mixed.removed["entities"] == 1
    with pytest.raises(NotFoundError):
        cb.get_entity(named_as_event.id)


def test_a_forget_whose_every_id_is_unknown_is_not_found(cb: ContextBase) -> None:
    event_id, _ = _seed(cb)
    with pytest.raises(NotFoundError) as err:
        cb.forget(event_ids=["ev_x"], entity_ids=["doc_y"], session_id="nosuch")
    assert str(err.value) == (
        f"nothing to forget: event 'ev_x', entity 'doc_y', session 'nosuch' not found in "
        f"project {cb.project!r}"
    )
    assert err.value.ids == ("ev_x", "doc_y", "nosuch") and err.value.kind == "item"
    with pytest.raises(NotFoundError) as one:
        cb.forget(session_id="nosuch")
    assert (one.value.kind, one.value.item_id) == ("session", "nosuch")
    assert cb.get_event(event_id).id == event_id  # nothing was touched
    # the session is found while it is held; once forgotten, a repeat is already forgotten
    assert cb.forget(session_id="s1").not_found == []
    again = cb.forget(session_id="s1")
    assert (again.total, again.already_forgotten, again.not_found) == (0, ["s1"], [])


def test_a_blank_id_is_a_mistake_not_an_unknown_id(cb: ContextBase) -> None:
    event_id, _ = _seed(cb)
    for call in (
        lambda: cb.forget(event_ids=[event_id, ""]),
        lambda: cb.forget(entity_ids=["  "]),
        lambda: cb.soft_delete([""]),
    ):
        with pytest.raises(ValidationError, match=r"\[\d\]: is blank: name an id"):
            call()
    assert cb.get_event(event_id).id == event_id  # nothing was touched


def test_forgetting_an_event_again_says_it_was_forgotten_already(cb: ContextBase) -> None:
    event_id, doc_id = _seed(cb)
    first = cb.forget(event_ids=[event_id])
    assert first.removed["events"] == 1 and first.already_forgotten == []
    # again (a repeat, or a retry whose answer was lost): no error, nothing removed
    again = cb.forget(event_ids=[event_id, event_id])
    assert (again.removed, again.total, again.caches) == ({}, 0, {})
    assert (again.already_forgotten, again.not_found) == ([event_id], [])
    assert again.as_dict()["already_forgotten"] == [event_id]
    # beside a typo: the typo is not found, and no error as the event is accounted for
    mixed = cb.forget(event_ids=["ev_typo", event_id])
    assert (mixed.not_found, mixed.already_forgotten) == (["ev_typo"], [event_id])
    # an id is forgotten whichever list names it, so a forgotten event named as an entity
    assert cb.forget(entity_ids=[event_id]).already_forgotten == [event_id]
    # an entity forgotten before is already forgotten too, whichever list names it
    assert cb.forget(entity_ids=[doc_id]).removed["entities"] == 1
    doc_again = cb.forget(entity_ids=[doc_id])
    assert (doc_again.total, doc_again.already_forgotten, doc_again.not_found) == (0, [doc_id], [])
    assert cb.forget(event_ids=[doc_id]).already_forgotten == [doc_id]


def test_forgetting_a_session_again_says_it_was_forgotten_already(cb: ContextBase) -> None:
    event_id, doc_id = _seed(cb)
    first = cb.forget(session_id="s1")
    assert first.removed["sessions"] == 1 and first.already_forgotten == []
    # a repeat, or the SDK's retry of a forget whose answer was lost: no error, nothing done
    again = cb.forget(session_id="s1")
    assert (again.removed, again.caches, again.not_found) == ({}, {}, [])
    assert again.already_forgotten == ["s1"]
    both = cb.forget(session_id="s1", event_ids=[event_id, "ev_typo"])
    assert (both.already_forgotten, both.not_found) == ([event_id, "s1"], ["ev_typo"])
    # a stale retry of its event stores nothing, and brings the session back neither
    cb.record("user_message", session_id="s1", text="stale", event_id=event_id)
    assert cb.forget(session_id="s1").already_forgotten == ["s1"]
    # a session named beside a held id but never held is not tombstoned by that forget
    cb.forget(entity_ids=[doc_id], session_id="s-never")
    with pytest.raises(NotFoundError, match="session 's-never' not found"):
        cb.forget(session_id="s-never")
    # a session used again is held again: forgotten anew, not "already forgotten"
    cb.record("user_message", session_id="s1", text="a new start")
    anew = cb.forget(session_id="s1")
    assert (anew.removed["sessions"], anew.already_forgotten) == (1, [])


def test_a_whole_project_forget_tombstones_its_entities_and_sessions(cb: ContextBase) -> None:
    event_id, doc_id = _seed(cb)
    assert not cb.store.has_forgotten(cb.project)
    cb.forget(whole_project=True)
    # the project is gone from the listing, but known as forgotten (not a typo)
    assert cb.project not in cb.store.list_projects()
    assert cb.store.has_forgotten(cb.project) and not cb.store.has_forgotten("never-held")
    again = cb.forget(event_ids=[event_id], entity_ids=[doc_id], session_id="s1")
    assert (again.total, again.not_found) == (0, [])
    assert again.already_forgotten == [event_id, doc_id, "s1"]
    # the tombstones hold hashes only: no id named, let alone text
    rows = [r for batch in cb.store.export_rows(cb.project, "tombstones") for r in batch]
    assert len(rows) >= 3
    assert all(
        re.fullmatch(r"((entity|session|project):)?[0-9a-f]{64}", r["hashed_id"]) for r in rows
    )


def test_only_forgotten_events_count_as_forgotten(cb: ContextBase) -> None:
    event_id, _ = _seed(cb)
    later = new_event_id()  # an id named before any event has it
    report = cb.forget(event_ids=[event_id, later])
    assert (report.not_found, report.already_forgotten) == ([later], [])
    with pytest.raises(NotFoundError, match=f"event {later!r} not found"):
        cb.forget(event_ids=[later])
    # it was not tombstoned: an event captured with it later is stored
    stored = cb.record("user_message", session_id="s1", text="later", event_id=later)
    assert stored.seq is not None and cb.get_event(later).text == "later"
    # events forgotten with their session, or with the whole project, are forgotten too
    one = cb.record("user_message", session_id="s2", text="in session two")
    cb.forget(session_id="s2")
    assert cb.forget(event_ids=[one.id]).already_forgotten == [one.id]
    cb.forget(whole_project=True)
    both = cb.forget(event_ids=[later, one.id, "ev_typo"])
    assert (both.already_forgotten, both.not_found) == ([later, one.id], ["ev_typo"])


def test_whole_project_and_purges_are_never_not_found(cb: ContextBase) -> None:
    _seed(cb)
    purge = cb.forget(event_ids=["ev_x"], soft_deleted_older_than="30d")
    assert purge.total == 0 and purge.not_found == ["ev_x"]
    with pytest.raises(ValidationError, match="whole_project"):  # which was meant? neither
        cb.forget(whole_project=True, event_ids=["ev_x"])
    everything = cb.forget(whole_project=True)
    assert everything.total > 0 and everything.not_found == []
    assert cb.purge_soft_deleted("1d").not_found == []


def test_hide_and_restore_tell_unknown_ids_from_ids_already_in_that_state(
    cb: ContextBase,
) -> None:
    event_id, doc_id = _seed(cb)
    first = cb.set_hidden([event_id, "ev_typo"], True)
    assert (first.changed, first.unchanged, first.not_found) == (1, [], ["ev_typo"])
    again = cb.set_hidden([event_id, doc_id], True)
    assert (again.changed, again.unchanged, again.not_found) == (1, [event_id], [])
    assert again.as_dict() == {
        "changed": 1, "unchanged": [event_id], "not_found": [], "already_forgotten": [],
        "sources_hidden": [], "sources_still_visible": [], "same_text_still_visible": [],
    }  # fmt: skip
    assert cb.soft_delete([event_id]) == 0  # the int API: hidden already, no error
    with pytest.raises(NotFoundError) as err:
        cb.soft_delete(["ev_typo", "doc_typo"])
    assert str(err.value) == (
        f"nothing to hide: 'ev_typo', 'doc_typo' match no event or entity of project {cb.project!r}"
    )
    assert err.value.ids == ("ev_typo", "doc_typo")
    back = cb.set_hidden([event_id, doc_id, "x"], False)
    assert (back.changed, back.unchanged, back.not_found) == (2, [], ["x"])
    assert cb.restore([event_id]) == 0
    visible = cb.set_hidden([event_id], False)
    assert (visible.changed, visible.unchanged) == (0, [event_id])
    with pytest.raises(NotFoundError, match="nothing to restore: 'x' matches no event"):
        cb.restore(["x"])
    assert cb.soft_delete([]) == 0 and cb.set_hidden([]).as_dict()["not_found"] == []


def test_hide_and_restore_name_hard_forgotten_ids_as_already_forgotten(cb: ContextBase) -> None:
    event_id, doc_id = _seed(cb)
    kept = cb.record("user_message", session_id="s2", text="kept")
    cb.forget(event_ids=[event_id], entity_ids=[doc_id])
    for hidden in (True, False):
        # every id forgotten: nothing to do, and no error (it was not a typo)
        report = cb.set_hidden([event_id, doc_id], hidden)
        assert (report.changed, report.unchanged) == (0, [])
        assert (report.not_found, report.already_forgotten) == ([], [event_id, doc_id])
        beside = cb.set_hidden([event_id, "ev_typo"], hidden)
        assert (beside.not_found, beside.already_forgotten) == (["ev_typo"], [event_id])
    assert cb.soft_delete([event_id]) == 0 and cb.restore([doc_id]) == 0
    mixed = cb.set_hidden([kept.id, event_id], True)
    assert (mixed.changed, mixed.already_forgotten, mixed.not_found) == (1, [event_id], [])
    assert mixed.as_dict()["already_forgotten"] == [event_id]
    with pytest.raises(NotFoundError, match="nothing to restore: 'ev_typo' matches no"):
        cb.restore(["ev_typo"])


def test_what_a_purge_forgot_is_already_forgotten_after(cb: ContextBase) -> None:
    event_id, doc_id = _seed(cb)
    cb.soft_delete([event_id, doc_id])
    purged = cb.purge_soft_deleted(0)
    assert (purged.removed["events"], purged.removed["entities"]) == (1, 1)
    again = cb.forget(event_ids=[event_id], entity_ids=[doc_id])
    assert (again.total, again.already_forgotten, again.not_found) == (0, [event_id, doc_id], [])
    assert cb.set_hidden([doc_id], False).already_forgotten == [doc_id]


def test_one_id_string_is_refused_not_taken_as_its_characters(cb: ContextBase) -> None:
    event_id, doc_id = _seed(cb)
    calls = {
        "ids": [
            lambda: cb.soft_delete(event_id),
            lambda: cb.restore(event_id),
            lambda: cb.set_hidden(event_id, True),
        ],
        "event_ids": [lambda: cb.forget(event_ids=event_id)],
        "entity_ids": [lambda: cb.forget(entity_ids=doc_id)],
    }
    for field, refused in calls.items():
        for call in refused:
            with pytest.raises(ValidationError) as err:
                call()  # type: ignore[no-untyped-call]
            assert err.value.field == field
            assert "must be a list of ids, not one string" in str(err.value)
            assert f"pass [{event_id!r}]" in str(err.value) or f"pass [{doc_id!r}]" in str(
                err.value
            )
    # nothing was hidden or forgotten on the way
    assert cb.get_event(event_id).active and cb.get_entity(doc_id).active
    assert cb.soft_delete([event_id]) == 1


def test_an_entity_hidden_or_forgotten_says_so_as_an_event_does(cb: ContextBase) -> None:
    _, doc_id = _seed(cb)
    cb.soft_delete([doc_id])
    with pytest.raises(NotFoundError, match="is hidden \\(restore brings it back\\)"):
        cb.get_entity(doc_id)
    cb.restore([doc_id])
    cb.forget(entity_ids=[doc_id])
    with pytest.raises(NotFoundError, match="not found: it was hard-forgotten"):
        cb.get_entity(doc_id)
    with pytest.raises(NotFoundError) as err:
        cb.get_entity("document:never")
    assert str(err.value) == "entity 'document:never' not found"


def test_rating_or_retracting_a_forgotten_message_says_it_was_forgotten(cb: ContextBase) -> None:
    cm = cb.context_manager()
    sid = cm.create_session("u1")
    said = cm.add_message(sid, "user", "the staging password is hunter2")
    kept = cm.add_message(sid, "user", "deploys go out on Tuesdays")
    cb.flush()
    cb.forget(event_ids=[said])
    forgotten = "not found: it was hard-forgotten"
    with pytest.raises(NotFoundError, match=re.escape(f"node {said!r} {forgotten}")):
        cb.feedback(said, "wrong")
    with pytest.raises(NotFoundError, match=re.escape(f"message {said!r} {forgotten}")):
        cm.expire_message(sid, said)
    with pytest.raises(NotFoundError, match=re.escape(f"message {said!r} {forgotten}")):
        cm.message_status(sid, said)
    # a typo is still only not found, and a live message still takes both
    with pytest.raises(NotFoundError, match=r"^node 'ev_typo' not found$"):
        cb.feedback("ev_typo", "wrong")
    with pytest.raises(NotFoundError, match=r"^message 'ev_typo' not found$"):
        cm.expire_message(sid, "ev_typo")
    cb.feedback(kept, "helpful")
    cm.expire_message(sid, kept)


def test_a_forget_in_a_mistyped_project_names_the_projects_held(cb: ContextBase) -> None:
    event_id, _ = _seed(cb)
    for call in (
        lambda: cb.forget(event_ids=[event_id], project="nope"),
        lambda: cb.soft_delete([event_id], project="nope"),
        lambda: cb.restore([event_id], project="nope"),
    ):
        with pytest.raises(UnknownProjectError) as err:
            call()
        assert "projects with data" in str(err.value) and "new_project" in str(err.value)
    assert cb.get_event(event_id).id == event_id  # nothing was touched
    # the project a base was opened for is no typo, even before it holds anything
    with pytest.raises(NotFoundError) as own:
        cb.forget(event_ids=["ev_x"])
    assert not isinstance(own.value, UnknownProjectError)
