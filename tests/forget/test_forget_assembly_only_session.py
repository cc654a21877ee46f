"""A session nothing was captured in still holds what its assemblies asked (their traces
keep the request's text): forgetting the session takes them, on every backend. A session
id `record` refuses is refused by an assembly too, so no trace lands where a forget by
session could not reach it."""

from __future__ import annotations

import pytest

from ctxbase import ContextBase
from ctxbase.errors import NotFoundError, ValidationError


def test_forgetting_a_session_of_assemblies_alone_takes_their_traces(cb: ContextBase) -> None:
    cb.record("user_message", session_id="other", text="the cache is Redis")
    asked = cb.assemble_context(
        agent_role="coder", user_intent="my card is 4111 zqxsecret", session_id="fresh-1"
    )
    kept = cb.assemble_context(agent_role="coder", user_intent="cache?", session_id="other")
    report = cb.forget(session_id="fresh-1")
    assert report.removed.get("traces") == 1
    with pytest.raises(NotFoundError):
        cb.get_trace(asked.context_id)
    assert cb.get_trace(kept.context_id)["intent"] == "cache?"


@pytest.mark.parametrize("session_id", ["bad id", "会话", ""])
def test_an_assembly_refuses_a_session_id_record_refuses(cb: ContextBase, session_id: str) -> None:
    with pytest.raises(ValidationError, match="session_id"):
        cb.record("user_message", session_id=session_id, text="x")
    with pytest.raises(ValidationError, match="session_id"):
        cb.assemble_context(agent_role="coder", user_intent="x", session_id=session_id)


def test_a_rollback_version_must_be_an_integer(cb: ContextBase) -> None:
    cb.set_fact("q", 1, scope_id="t1")
    cb.set_fact("q", 2, scope_id="t1")
    for version in ("1", 1.0, True):
        with pytest.raises(ValidationError, match="to_version: must be an integer"):
            cb.rollback_fact("q", version, scope_id="t1")  # type: ignore[arg-type]
    assert cb.get_facts(scope_id="t1")["q"].value == 2  # nothing rolled back
