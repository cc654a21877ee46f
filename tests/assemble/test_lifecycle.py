from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxbase.assemble.lifecycle import (
    LEGAL_TRANSITIONS,
    ContextKind,
    IllegalTransition,
    Status,
    allowed_targets,
    can_transition,
    is_terminal,
    transition,
)


def test_normal_task_life() -> None:
    status = Status.CREATED
    for target in (Status.ACTIVE, Status.SUSPENDED, Status.ACTIVE, Status.EXPIRED):
        status = transition(status, target, ContextKind.TASK)
    assert transition(status, Status.ARCHIVED, ContextKind.TASK) is Status.ARCHIVED


def test_strings_are_accepted_and_result_is_enum() -> None:
    result = transition("active", "suspended", "session")
    assert result is Status.SUSPENDED


def test_message_cannot_be_suspended() -> None:
    with pytest.raises(IllegalTransition) as info:
        transition(Status.ACTIVE, Status.SUSPENDED, ContextKind.MESSAGE)
    message = str(info.value)
    assert "message" in message
    assert "active -> suspended" in message
    assert info.value.kind is ContextKind.MESSAGE
    assert info.value.current is Status.ACTIVE
    assert info.value.target is Status.SUSPENDED


def test_archive_is_final_for_every_kind() -> None:
    for kind in ContextKind:
        assert is_terminal(Status.ARCHIVED, kind)
        for target in Status:
            with pytest.raises(IllegalTransition, match="final"):
                transition(Status.ARCHIVED, target, kind)


def test_expired_goes_to_archive_and_only_a_session_comes_back() -> None:
    # an expired session is idle, not closed: used again, it is active again
    assert allowed_targets(Status.EXPIRED, ContextKind.SESSION) == {Status.ACTIVE, Status.ARCHIVED}
    for kind in (ContextKind.TASK, ContextKind.MESSAGE):
        assert allowed_targets(Status.EXPIRED, kind) == {Status.ARCHIVED}
    with pytest.raises(IllegalTransition):
        transition("expired", "active", "task")
    with pytest.raises(IllegalTransition):
        transition("expired", "suspended", "session")


def test_staying_in_place_is_refused() -> None:
    with pytest.raises(IllegalTransition):
        transition(Status.ACTIVE, Status.ACTIVE, ContextKind.TASK)


def test_unknown_names_are_value_errors_listing_valid_ones() -> None:
    with pytest.raises(ValueError, match="valid: created"):
        transition("running", "active", "task")
    with pytest.raises(ValueError, match="unknown context kind"):
        transition("created", "active", "thread")


def test_table_covers_every_kind_and_status() -> None:
    for kind in ContextKind:
        assert set(LEGAL_TRANSITIONS[kind]) == set(Status)
        # everything that is not archived can eventually be archived
        for status in Status:
            if status is not Status.ARCHIVED and status in _reachable(kind):
                assert Status.ARCHIVED in _reachable(kind, status)


def _reachable(kind: ContextKind, start: Status = Status.CREATED) -> set[Status]:
    seen = {start}
    frontier = [start]
    while frontier:
        for nxt in LEGAL_TRANSITIONS[kind][frontier.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                frontier.append(nxt)
    return seen


@given(
    st.sampled_from(list(Status)), st.sampled_from(list(Status)), st.sampled_from(list(ContextKind))
)
def test_transition_agrees_with_table(current: Status, target: Status, kind: ContextKind) -> None:
    legal = target in LEGAL_TRANSITIONS[kind][current]
    assert can_transition(current, target, kind) == legal
    if legal:
        assert transition(current, target, kind) is target
    else:
        with pytest.raises(IllegalTransition):
            transition(current, target, kind)
