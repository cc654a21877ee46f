"""Facts of a hidden or wrong-rated message: out of the state while the message is.

A fact the anchoring extracted from a user message names it in its cause ("extracted by
budget_limit (from ev_1): '预算控制在7万以内'"). When that message is hidden
(`soft_delete`, `forget --soft`) or rated false (`feedback ... wrong`), the value it stated
is no confirmed fact any more: the fact is withdrawn as a retraction withdraws it
(`state.retract_message_facts`): back to its newest value no withheld message stated, or
deleted, recorded in its history with the cause

    hidden (soft_delete): message ev_1 retracted
    rated wrong (feedback): message ev_1 retracted

A fact a later message set again keeps that value. `restore` of the message, or a rating
that is no longer false ("neutral"), brings back each fact whose newest change is a
withdrawal (this one, or a retraction's since) and whose history names the message: to its
newest value stated by no message still withheld (hidden, rated false, retracted by
`expire_message`, or forgotten), recorded as a change too. A retracted message stays
withheld: its value never comes back this way.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Collection, Sequence
from typing import cast

from ..components import ComponentsSource, components_of
from ..model import Event
from ..retrieve.config import SearchConfig
from ..retrieve.signals import feedback_confidence
from ..store.base import FEEDBACK_SCOPE, MESSAGE_SCOPE, KeptFact, StateChange
from .lifecycle import Status
from .state import Scope, retract_message_facts, set_fact, source_message, statuses_of

__all__ = [
    "HIDDEN",
    "RATED_WRONG",
    "facts_kept_after_forget",
    "messages_out",
    "reinstate_facts",
    "withdraw_facts",
]

HIDDEN = "hidden (soft_delete)"
RATED_WRONG = "rated wrong (feedback)"
# how `retract_message_facts` records a withdrawal, whatever made it
_WITHDRAWAL = re.compile(r": message [^\s:]+ retracted(?:,|$)")
# Facts are extracted from user messages only (ContextManager.add_message).
_STATING = "user_message"


def _withdrawal(cause: str | None) -> bool:
    return _WITHDRAWAL.search(cause or "") is not None


def messages_out(cb: ComponentsSource, ids: Collection[str], *, project: str) -> set[str]:
    """Those of `ids` whose statements are no facts now: hidden, hard-forgotten, rated
    false (below the default `SearchConfig.min_confidence`, as searches leave them out), or
    moved out of their session (retracted, expired)."""
    if not ids:
        return set()
    store = components_of(cb).store
    wanted = sorted(ids)
    events = store.get_events(project, wanted, include_inactive=True)
    out = set(wanted) - {e.id for e in events}  # forgotten
    out |= {e.id for e in events if not e.active}
    floor = SearchConfig.model_fields["min_confidence"].default
    for key, fact in store.get_state_keys(project, FEEDBACK_SCOPE, "", wanted).items():
        conf = feedback_confidence(fact.value)
        if conf is not None and conf.value < floor:
            out.add(key)
    sessions = sorted({e.session_id for e in events if e.session_id and e.id not in out})
    if sessions:
        found = store.get_states(project, [(MESSAGE_SCOPE, s) for s in sessions])
        for records in found.values():
            out |= {m for m, st in statuses_of(records).items() if st != Status.ACTIVE}
    return out & set(wanted)


def _scopes(
    cb: ComponentsSource, event: Event, project: str, users: dict[str, str | None]
) -> list[tuple[Scope, str]]:
    """Where ContextManager put the message's facts: its task's (or else its session's)
    scope, and the session's user's own (`users`: the sessions' users read so far)."""
    sid = event.session_id
    assert sid is not None
    own: tuple[Scope, str] = ("task", event.task_id) if event.task_id else ("session", sid)
    if sid not in users:
        info = components_of(cb).store.get_session(project, sid)
        user_id = info.metadata.get("user_id") if info is not None else None
        users[sid] = user_id if isinstance(user_id, str) and user_id else None
    user = users[sid]
    return [own] if user is None else [own, ("user", user)]


def _newest_stated(history: Sequence[StateChange], out: Collection[str]) -> StateChange | None:
    """The newest change of a fact's history (by version) that set a value no message of
    `out` stated: not a deletion, nor a withdrawal."""
    return next(
        (
            c
            for c in reversed(history)
            if not c.deleted and not _withdrawal(c.cause) and source_message(c.cause) not in out
        ),
        None,
    )


def _stating(events: Sequence[Event]) -> list[Event]:
    return [e for e in events if e.type == _STATING and e.session_id]


def withdraw_facts(
    cb: ComponentsSource, events: Sequence[Event], cause: str, *, project: str
) -> list[StateChange]:
    """Withdraw the facts `events` (messages just hidden or rated false) stated, with
    `cause` (HIDDEN or RATED_WRONG); returns the changes made."""
    changes: list[StateChange] = []
    users: dict[str, str | None] = {}
    for event in _stating(events):
        changes += retract_message_facts(
            cb,
            event.id,
            scopes=_scopes(cb, event, project, users),
            still_out=lambda ids: messages_out(cb, ids, project=project),
            cause=cause,
            project=project,
        )
    return changes


def reinstate_facts(
    cb: ComponentsSource, events: Sequence[Event], cause: str, *, project: str
) -> list[StateChange]:
    """Bring back the facts withdrawn for `events` (messages just restored or rated again,
    not false), each to its newest value no withheld message stated, with `cause`
    ("restored", "feedback neutral"); returns the changes made."""
    store = components_of(cb).store
    changes: list[StateChange] = []
    users: dict[str, str | None] = {}
    for event in _stating(events):
        scopes = _scopes(cb, event, project, users)
        withdrawn: list[list[StateChange]] = []
        for scope, scope_id in scopes:
            by_key: dict[str, list[StateChange]] = defaultdict(list)
            for change in store.state_history(project, scope, scope_id):
                by_key[change.key].append(change)
            for history in by_key.values():
                history.sort(key=lambda c: c.version)
                sources = {source_message(c.cause) for c in history}
                if _withdrawal(history[-1].cause) and event.id in sources:
                    withdrawn.append(history)
        if not withdrawn:
            continue
        named = {m for h in withdrawn for c in h if (m := source_message(c.cause)) is not None}
        out = messages_out(cb, named, project=project)
        if event.id in out:
            continue  # withheld still: hidden and rated wrong, say, and only one undone
        for history in withdrawn:
            last = history[-1]
            back = _newest_stated(history, out)
            if back is None or (not last.deleted and back.new_value == last.new_value):
                continue  # nothing to bring back, or the value it holds already
            source = source_message(back.cause)
            why = f"{cause}: message {event.id} back, v{back.version}"
            # the value brought back names its message, so hiding that one finds it again
            why += f" (from {source})" if source else ""
            scope = cast("Scope", last.scope)
            set_fact(
                cb, last.key, back.new_value, scope_id=last.scope_id, scope=scope, cause=why,
                project=project, ttl=back.ttl,
            )  # fmt: skip
            changes += store.state_history(project, last.scope, last.scope_id, last.key)[-1:]
    return changes


def facts_kept_after_forget(
    cb: ComponentsSource,
    events: Sequence[Event],
    *,
    project: str,
    skip_scopes: Collection[tuple[str, str]] = (),
) -> dict[tuple[str, str, str], KeptFact]:
    """The facts `events` (messages about to be hard-forgotten) are named in that keep a
    value once they are gone, by (scope, scope_id, key). The store removes such a fact
    whole, history and all (no forgotten value may stay in it); this is what it writes
    back: the fact's current value when no forgotten message stated it, else its newest
    value stated by no message withheld or forgotten (a later or earlier message that
    says it still). A fact deleted, or stated only by what goes, keeps nothing.
    `skip_scopes` are forgotten whole (a forgotten session's)."""
    store = components_of(cb).store
    gone = {e.id for e in events}
    kept: dict[tuple[str, str, str], KeptFact] = {}
    seen: set[tuple[str, str]] = set()
    users: dict[str, str | None] = {}
    for event in _stating(events):
        for scope, scope_id in _scopes(cb, event, project, users):
            if (scope, scope_id) in seen or (scope, scope_id) in skip_scopes:
                continue
            seen.add((scope, scope_id))
            by_key: dict[str, list[StateChange]] = defaultdict(list)
            for change in store.state_history(project, scope, scope_id):
                by_key[change.key].append(change)
            for key, history in by_key.items():
                if not any(g in (c.cause or "") for c in history for g in gone):
                    continue  # the forget leaves this fact as it is
                history.sort(key=lambda c: c.version)
                last = history[-1]
                if last.deleted:
                    continue
                named = {m for c in history if (m := source_message(c.cause)) is not None}
                out = messages_out(cb, named - gone, project=project) | gone
                current = not any(g in (last.cause or "") for g in gone)
                back = last if current else _newest_stated(history, out)
                if back is None:
                    continue
                source = source_message(back.cause)
                source = source if source not in gone else None
                cause = "forget: kept" + (f" (from {source})" if source else "")
                kept[(scope, scope_id, key)] = KeptFact(back.new_value, cause)
    return kept
