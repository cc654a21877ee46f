"""The state layer: confirmed facts (key -> value), versioned, scoped to a task by default.

Facts live in the store's state table: every change keeps the old value, the new value, the
time and the cause (`Store.set_state` / `state_history`), so any fact can be rolled back to
an earlier version. Facts are extracted from user messages by the offline rule extractor, or
by an OpenAI-compatible model when one is configured (explicitly, or through the
CTXBASE_LLM_BASE_URL / CTXBASE_LLM_MODEL / CTXBASE_LLM_API_KEY environment variables).

A fact written with a `ttl` (seconds) expires when it goes unwritten that long (seed 003:
"某个临时信息超过30分钟未更新"): checked when read, like an entity's `expires_at`, so no sweep
races a reader. An expired fact is out of assemblies and of `get_facts` / `get_state`, and
stays in the store and its history (`fact_history` marks the lapsed version `expired`); a
new write of the key brings it back with the ttl that write gives.

Message statuses (active / expired / archived) are state records too, in the scope
``message`` keyed by session: events are immutable, and a status record keeps the history of
who retracted what, when and why.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import logging
import math
import os
import re
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from datetime import date
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..components import ComponentsSource, components_of
from ..errors import NotFoundError, ValidationError
from ..model import StateFact
from ..store.base import MESSAGE_SCOPE, StateChange
from ..validation import (
    check_fact_key,
    check_int64,
    check_json,
    check_name,
    check_text,
    first_line_break,
)
from .facts import (
    ExtractedFact,
    FactExtractionError,
    FactExtractor,
    LLMFactExtractor,
    RuleFactExtractor,
)
from .lifecycle import ContextKind, Status, transition

__all__ = [
    "CURRENT_TASK_KEY",
    "MESSAGE_SCOPE",
    "SCOPES",
    "LLMConfig",
    "Scope",
    "check_scope_open",
    "check_ttl",
    "default_extractor",
    "delete_fact",
    "expire_message_record",
    "extract_into_state",
    "fact_history",
    "get_facts",
    "get_scope_facts",
    "lapsed_drops",
    "live",
    "mark_lapsed",
    "message_statuses",
    "render_fact",
    "retract_message_facts",
    "rollback_fact",
    "set_fact",
    "source_message",
    "state_scopes",
    "statuses_of",
]

log = logging.getLogger("ctxbase.assemble")

Scope = Literal["task", "session", "project", "user"]
SCOPES: tuple[str, ...] = ("task", "session", "project", "user")
# Facts that belong to the person, not to the work: kept in the user's own scope.
PERSONAL_KEY_PREFIX = "preference:"
# Session metadata key naming the task messages and state are scoped to.
CURRENT_TASK_KEY = "current_task_id"
# A question ("那时间呢") is not a fact; it only steers the next answer.
_NOT_STATE_KEYS = frozenset({"followup"})


class LLMConfig(BaseModel):
    """An OpenAI-compatible chat endpoint used for fact extraction and history summaries."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    base_url: str = Field(min_length=1)
    model: str = Field(min_length=1)
    api_key: str | None = None
    timeout_s: float = Field(default=20.0, gt=0)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> LLMConfig | None:
        """The endpoint named by CTXBASE_LLM_BASE_URL and CTXBASE_LLM_MODEL, or None."""
        source = os.environ if env is None else env
        base_url = source.get("CTXBASE_LLM_BASE_URL", "").strip()
        model = source.get("CTXBASE_LLM_MODEL", "").strip()
        if not base_url or not model:
            return None
        return cls(base_url=base_url, model=model, api_key=source.get("CTXBASE_LLM_API_KEY"))


def _check_scope(scope: str, scope_id: Any = None, key: Any = None) -> None:
    if scope not in SCOPES:
        raise ValidationError("scope", f"must be one of {', '.join(SCOPES)} (got {scope!r})")
    check_name("scope_id", scope_id)
    check_name("key", key)
    # a scope is a task, session or project id, at most 200 characters (as over REST)
    if scope_id == "":  # a fact of no task or session, which no forget reaches
        raise ValidationError("scope_id", f"is empty: name the {scope} the fact belongs to")
    if isinstance(scope_id, str) and len(scope_id) > 200:
        raise ValidationError("scope_id", f"must be at most 200 characters (got {len(scope_id)})")


def check_ttl(ttl: Any) -> float | None:
    """A fact's time to live: None (none) or a positive, finite number of seconds."""
    if ttl is None:
        return None
    if (
        isinstance(ttl, bool)
        or not isinstance(ttl, int | float)
        or not math.isfinite(ttl)
        or not ttl > 0
    ):
        raise ValidationError(
            "ttl", f"must be a positive, finite number of seconds, or None (got {ttl!r})"
        )
    return float(ttl)


def live(facts: Iterable[StateFact], now: float | None = None) -> list[StateFact]:
    """The facts not expired by `now` (the time of the read by default)."""
    at = time.time() if now is None else now
    return [f for f in facts if not f.expired(at)]


def check_scope_open(cb: ComponentsSource, scope: str, scope_id: str, project: str) -> None:
    """A caller's fact write into a session archived or expired, or a task archived, is
    refused (ConflictError), as ContextManager.set_state refuses it: an archive is final
    and an expired session takes no writes until it is resumed. (The state layer's own
    writes, a hidden message's facts withdrawn, go on.)"""
    from ..errors import ConflictError

    _check_scope(scope, scope_id)  # a bad id is refused before any read, as by set_fact
    store = components_of(cb).store
    if scope == "session":
        info = store.get_session(project, scope_id)
        status = None if info is None else str(info.status)
    elif scope == "task":
        task = store.get_task(project, scope_id)
        status = None if task is None else str(task.status)
    else:
        return
    if status == "archived":
        raise ConflictError(f"{scope} {scope_id!r} is archived; it takes no writes")
    if status == "expired" and scope == "session":
        raise ConflictError(
            f"session {scope_id!r} is expired; it takes no writes until a message or "
            "resume_session re-activates it"
        )


def set_fact(
    cb: ComponentsSource,
    key: str,
    value: Any,
    *,
    scope_id: str,
    scope: Scope = "task",
    cause: str | None = None,
    project: str | None = None,
    ttl: float | None = None,
) -> StateFact:
    """Write one fact; the store bumps its version and records old and new value. With a
    `ttl` (seconds) the fact expires unless written again within it; without one it never
    does (a write without a ttl ends an earlier one's)."""
    cb = components_of(cb)
    _check_scope(scope, scope_id)  # its check_name checks the text too
    check_fact_key(key)
    check_text("cause", cause)
    value = json.loads(check_json("value", value))  # as stored and read back ({1: x} -> {"1": x})
    seconds = check_ttl(ttl)
    pid = cb.project if project is None else project
    fact = StateFact(
        project_id=pid, scope=scope, scope_id=scope_id, key=key, value=value, ttl=seconds
    )
    stored = cb.store.set_state(fact.model_copy(update={"cause": cause}))
    log.debug(
        "state %s/%s %s = %r (v%d, cause %r)", scope, scope_id, key, value, stored.version, cause
    )
    return stored


def delete_fact(
    cb: ComponentsSource,
    key: str,
    *,
    scope_id: str,
    scope: Scope = "task",
    cause: str | None = None,
    project: str | None = None,
    hard: bool = False,
) -> bool:
    """Delete one fact (recorded in its history, so it can be rolled back); False when the
    scope holds no such key. `hard` removes the fact with its whole history instead (no
    old value can be read back or rolled back; a fact deleted before, which only its
    history holds, is removed too): False when neither held the key."""
    cb = components_of(cb)
    _check_scope(scope, scope_id, key)
    check_text("cause", cause)
    pid = cb.project if project is None else project
    if hard:
        report = cb.store.forget(pid, replace_state={(scope, scope_id, key): None})
        return bool(report.removed.get("state") or report.removed.get("state_history"))
    return cb.store.delete_state(pid, scope, scope_id, key, cause)


def get_facts(
    cb: ComponentsSource, *, scope_id: str, scope: Scope = "task", project: str | None = None
) -> dict[str, StateFact]:
    """The current facts of one scope, by key (an expired one left out)."""
    cb = components_of(cb)
    _check_scope(scope, scope_id)
    pid = cb.project if project is None else project
    return {f.key: f for f in live(cb.store.get_state(pid, scope, scope_id))}


def get_scope_facts(
    cb: ComponentsSource,
    scopes: Sequence[tuple[str, str]],
    *,
    project: str | None = None,
    lapsed: list[StateFact] | None = None,
) -> dict[tuple[str, str], dict[str, StateFact]]:
    """The current facts of several (scope, scope_id) pairs, by pair then key, read at once
    (message scopes may be asked for too: see `statuses_of`); expired ones left out, and
    added to `lapsed` when given."""
    cb = components_of(cb)
    for scope, scope_id in scopes:
        if scope != MESSAGE_SCOPE:
            _check_scope(scope, scope_id)
    pid = cb.project if project is None else project
    found = cb.store.get_states(pid, scopes)
    now = time.time()
    if lapsed is not None:
        lapsed.extend(f for facts in found.values() for f in facts if f.expired(now))
    return {pair: {f.key: f for f in live(facts, now)} for pair, facts in found.items()}


def lapsed_drops(facts: Iterable[StateFact]) -> list[dict[str, Any]]:
    """A trace's drops for expired facts an assembly left out of its state layer."""
    return [
        {
            "id": f"state:{f.scope}:{f.scope_id}:{f.key}",
            "layer": "state",
            "reason": "expired",
            "detail": f"not written within its ttl of {f.ttl:g} s",
        }
        for f in facts
    ]


def state_scopes(
    pid: str,
    session_id: str | None,
    task_id: str | None,
    view: str,
    user_id: str | None,
    other_task_ids: Sequence[str] = (),
) -> list[tuple[Scope, str, float]]:
    """The fact scopes an assembly shows, narrowest first, with their weights: the task's;
    unless a subtask view of a task, the session's, its user's and the project's; in the
    global view, the session's other tasks' (`other_task_ids`)."""
    scopes: list[tuple[Scope, str, float]] = []
    if task_id is not None:
        scopes.append(("task", task_id, 1.0))
    if view != "subtask" or task_id is None:
        if session_id:
            scopes.append(("session", session_id, 0.8))
            if user_id is not None:  # the person's own facts follow them across sessions
                scopes.append(("user", user_id, 0.7))
        scopes.append(("project", pid, 0.6))
    if view == "global" and session_id:  # planners see the facts of every task
        scopes.extend(("task", other, 0.4) for other in other_task_ids if other != task_id)
    return scopes


def fact_history(
    cb: ComponentsSource,
    key: str | None = None,
    *,
    scope_id: str,
    scope: Scope = "task",
    project: str | None = None,
) -> list[StateChange]:
    """Every change of the scope's facts (or of one key), oldest first per key; a value
    written with a ttl that lapsed before the next change (or before now) is `expired`."""
    cb = components_of(cb)
    _check_scope(scope, scope_id, key)
    pid = cb.project if project is None else project
    return mark_lapsed(cb.store.state_history(pid, scope, scope_id, key), time.time())


def mark_lapsed(changes: Sequence[StateChange], now: float) -> list[StateChange]:
    """`changes` (ordered by key, then version) with each value whose ttl ran out before
    the key's next change, or before `now` for its last one, marked `expired`."""
    out: list[StateChange] = []
    for i, change in enumerate(changes):
        after = changes[i + 1] if i + 1 < len(changes) else None
        until = after.ts if after is not None and after.key == change.key else now
        if change.ttl is not None and not change.deleted and change.ts + change.ttl <= until:
            change = dataclasses.replace(change, expired=True)
        out.append(change)
    return out


def rollback_fact(
    cb: ComponentsSource,
    key: str,
    to_version: int,
    *,
    scope_id: str,
    scope: Scope = "task",
    cause: str | None = None,
    project: str | None = None,
) -> StateFact | None:
    """Make the value the fact had at `to_version` current again, as a new version.

    Returns the new fact, or None when the fact did not exist at that version (it is then
    deleted). History is never rewritten: the rollback is one more recorded change. The
    value comes back with the ttl it was written with, counted from the rollback.
    """
    cb = components_of(cb)
    check_int64("to_version", to_version)  # "1" or 1.0 would miss v1 and say it is there
    if to_version < 1:  # versions count from 1: a 0 or below is bad input, not a miss
        raise ValidationError(
            "to_version", f"must be a version number, 1 or more (got {to_version})"
        )
    pid = cb.project if project is None else project
    changes = [c for c in fact_history(cb, key, scope_id=scope_id, scope=scope, project=project)]
    target = next((c for c in changes if c.version == to_version), None)
    if target is None:
        versions = ", ".join(str(c.version) for c in changes) or "none"
        message = None
        if not changes:  # no such key here: name the scope's keys, and the one it may mean
            keys = sorted({f.key for f in cb.store.get_state(pid, scope, scope_id)})
            near = difflib.get_close_matches(key, keys, n=1, cutoff=0.6)
            message = (
                f"no fact {key!r} in {scope} {scope_id!r}"
                + (f" (did you mean {near[0]!r}?)" if near else "")
                + (f"; its facts: {', '.join(keys[:20])}" if keys else "; it holds no fact")
            )
        wanted = f"{key}@v{to_version}"
        message = message or f"state version {wanted!r} not found (its versions: {versions})"
        raise NotFoundError("state version", wanted, message=message)
    why = cause or f"rollback to v{to_version}"
    if target.deleted:
        cb.store.delete_state(pid, scope, scope_id, key, why)
        return None
    return set_fact(
        cb,
        key,
        target.new_value,
        scope_id=scope_id,
        scope=scope,
        cause=why,
        project=project,
        ttl=target.ttl,
    )


def default_extractor(llm: LLMConfig | None = None) -> FactExtractor:
    """The LLM extractor when an endpoint is configured (argument or environment), else rules."""
    config = llm if llm is not None else LLMConfig.from_env()
    if config is None:
        return RuleFactExtractor()
    return LLMFactExtractor(
        config.base_url, config.model, config.api_key, timeout_s=config.timeout_s
    )


def extract_into_state(
    cb: ComponentsSource,
    text: str,
    *,
    scope_id: str,
    scope: Scope = "task",
    extractor: FactExtractor | None = None,
    today: date | None = None,
    cause: str | None = None,
    project: str | None = None,
    user_id: str | None = None,
    event_id: str | None = None,
) -> list[StateFact]:
    """Extract facts from one user message and write them to the scope; with `user_id`,
    the user's preferences ("我喜欢蓝色") go to that user's own scope instead, so they reach
    the user's other sessions and no one else's. `event_id` (the message's) is named in
    each fact's cause.

    When the LLM extractor fails (endpoint down, an answer that is not JSON), the rule
    extractor is used instead and the failure is logged: a message is never lost for that.
    """
    cb = components_of(cb)
    known = get_facts(cb, scope_id=scope_id, scope=scope, project=project)
    previous = [
        ExtractedFact(
            k, f.value if isinstance(f.value, dict) else {"value": f.value}, 1.0, (0, 0), "state"
        )
        for k, f in known.items()
    ]
    chosen = extractor if extractor is not None else default_extractor()
    try:
        found = chosen.extract(text, previous=previous, today=today)
    except FactExtractionError as exc:
        log.warning(
            "fact extraction by %s failed (%s); using the rules", type(chosen).__name__, exc
        )
        found = RuleFactExtractor().extract(text, previous=previous, today=today)
    personal = (
        {} if user_id is None else get_facts(cb, scope_id=user_id, scope="user", project=project)
    )
    written: list[StateFact] = []
    for fact in found:
        if fact.key in _NOT_STATE_KEYS:
            continue
        mine = user_id is not None and fact.key.startswith(PERSONAL_KEY_PREFIX)
        where: Scope = "user" if mine else scope
        where_id = user_id if mine and user_id is not None else scope_id
        seen = personal if mine else known
        # The message's id in the cause: forgetting or retracting the message finds its
        # facts by it.
        source = _from_message(event_id) if event_id else ""
        span = text[fact.span[0] : fact.span[1]]
        why = cause or f"extracted by {fact.rule}{source}: {span!r}"
        if fact.key in seen and seen[fact.key].value == fact.value:
            if not source or source in (seen[fact.key].cause or ""):
                continue  # the same value again, from no other message: no change
            # restated by another message: recorded, so the value stays while either
            # message does (retracting or forgetting the first keeps it)
            why = cause or f"restated by {fact.rule}{source}: {span!r}"
        written.append(
            set_fact(
                cb, fact.key, fact.value, scope_id=where_id, scope=where, cause=why, project=project
            )
        )
    return written


def _from_message(event_id: str) -> str:
    return f" (from {event_id})"


_FROM_MESSAGE = re.compile(r"\(from ([^)\s]+)\)")


def source_message(cause: str | None) -> str | None:
    """The id of the message a change's cause names as its source ("(from ev_1)"), if any."""
    found = _FROM_MESSAGE.search(cause or "")
    return found.group(1) if found else None


def retract_message_facts(
    cb: ComponentsSource,
    message_id: str,
    *,
    scopes: Sequence[tuple[Scope, str]],
    retracted: Iterable[str] = (),
    still_out: Callable[[Collection[str]], Collection[str]] | None = None,
    cause: str,
    project: str | None = None,
) -> list[StateChange]:
    """Undo the facts a retracted message stated (seed 003: a retracted message must not
    stay in effect). A fact of `scopes` whose current value came from `message_id` goes back
    to its newest value that no retracted message stated (`retracted`: the session's other
    ones; `still_out`, given the other messages a fact's history names, says which of them
    are out too: hidden or rated wrong), or is deleted when it has none; a fact a later
    message restated or changed keeps that value. Each change is recorded with `cause`;
    returns them."""
    cb = components_of(cb)
    pid = cb.project if project is None else project
    gone = {message_id, *retracted}
    marks = [_from_message(m) for m in gone]
    current = get_scope_facts(cb, scopes, project=pid)
    undone: list[StateChange] = []
    for scope, scope_id in scopes:
        for key, fact in current[(scope, scope_id)].items():
            if _from_message(message_id) not in (fact.cause or ""):
                continue
            history = fact_history(cb, key, scope_id=scope_id, scope=scope, project=pid)
            if still_out is not None:
                named = {m for c in history if (m := source_message(c.cause)) is not None}
                marks += [_from_message(m) for m in still_out(named - gone)]
            kept = next(
                (c for c in reversed(history) if not any(m in (c.cause or "") for m in marks)),
                None,
            )
            why = f"{cause}: message {message_id} retracted"
            if kept is None or kept.deleted:
                cb.store.delete_state(pid, scope, scope_id, key, why)
            else:
                # The value restored keeps naming the message that stated it, so retracting
                # that one later (or forgetting it) finds it too.
                source = _FROM_MESSAGE.search(kept.cause or "")
                why += f", back to v{kept.version}" + (f" {source.group(0)}" if source else "")
                set_fact(
                    cb,
                    key,
                    kept.new_value,
                    scope_id=scope_id,
                    scope=scope,
                    cause=why,
                    project=pid,
                    ttl=kept.ttl,
                )
            undone.append(fact_history(cb, key, scope_id=scope_id, scope=scope, project=pid)[-1])
    return undone


def _money(value: Mapping[str, Any]) -> str | None:
    op = value.get("op")
    currency = f" {value['currency']}" if value.get("currency") else ""
    if "amount" in value:
        return f"{op or '='} {value['amount']}{currency}".strip()
    if "min" in value or "max" in value:
        return f"between {value.get('min')} and {value.get('max')}{currency}"
    return None


def _one_line(text: str) -> str:
    """`text` as it is, or, when a control or line-separator character in it could start a
    prompt line of its own, as a quoted JSON string with every such character escaped."""
    if first_line_break(text) is None:
        return text
    return _escape_breaks(json.dumps(text, ensure_ascii=False))


def _escape_breaks(json_text: str) -> str:
    # json.dumps escapes U+0000-U+001F; DEL, C1 controls and U+2028/9 it leaves raw
    return "".join(
        f"\\u{ord(ch):04x}" if first_line_break(ch) is not None else ch for ch in json_text
    )


def render_fact(key: str, value: Any) -> str:
    """One fact as a line for the prompt: "budget <= 50000 CNY", "deadline <= 2025-06-06".
    A string that holds a control or line-separator character (newline, \\r, escape) is
    shown as a quoted JSON string, so no value can forge a prompt line of its own."""
    key = _one_line(key)  # refused at write; a key stored before that is shown quoted too
    if isinstance(value, Mapping):
        money = _money(value)
        if money is not None:
            return f"{key} {_one_line(money)}"
        if "date" in value or "expression" in value:
            when = value.get("date") or value.get("expression")
            return f"{key} {_one_line(str(value.get('op') or '='))} {_one_line(str(when))}"
        if set(value) == {"value"}:
            return f"{key}: {_one_line(str(value['value']))}"
    if isinstance(value, str):
        return f"{key}: {_one_line(value)}"
    return f"{key}: {_escape_breaks(json.dumps(value, ensure_ascii=False, sort_keys=True))}"


# -- message statuses -----------------------------------------------------------------------


def message_statuses(
    cb: ComponentsSource, session_id: str, *, project: str | None = None
) -> dict[str, Status]:
    """Recorded statuses of a session's messages; a message without a record is active."""
    cb = components_of(cb)
    pid = cb.project if project is None else project
    return statuses_of(cb.store.get_state(pid, MESSAGE_SCOPE, session_id))


def statuses_of(records: Iterable[StateFact]) -> dict[str, Status]:
    """Message statuses from a message scope's records (unknown values left out)."""
    out: dict[str, Status] = {}
    for fact in records:
        try:
            out[fact.key] = Status(fact.value)
        except ValueError:
            continue
    return out


def expire_message_record(
    cb: ComponentsSource,
    session_id: str,
    message_ids: Sequence[str],
    *,
    cause: str,
    target: Status = Status.EXPIRED,
    project: str | None = None,
) -> list[str]:
    """Move messages to `target` (expired or archived); returns the ids changed.

    The lifecycle decides what is legal: expiring an expired message raises
    `IllegalTransition`, as does anything after the archive.
    """
    cb = components_of(cb)
    pid = cb.project if project is None else project
    # the statuses of these messages only (by key), not the session's whole record
    statuses = statuses_of(
        cb.store.get_state_keys(pid, MESSAGE_SCOPE, session_id, list(message_ids)).values()
    )
    changed: list[str] = []
    for mid in message_ids:
        current = statuses.get(mid, Status.ACTIVE)
        new = transition(current, target, ContextKind.MESSAGE)
        cb.store.set_state(
            StateFact(
                project_id=pid,
                scope=MESSAGE_SCOPE,
                scope_id=session_id,
                key=mid,
                value=new.value,
                cause=cause,
            )
        )
        log.debug("message %s %s -> %s (%s)", mid, current.value, new.value, cause)
        changed.append(mid)
    if changed:
        cb.store.touch_index(pid)  # searches read message statuses again (retrieve/signals.py)
        if target == Status.EXPIRED:  # a retracted message's words stop finding its neighbour
            cb.store.set_context_hidden(pid, changed, True)
    return changed
