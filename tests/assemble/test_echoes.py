"""An assistant turn that repeats a retracted user message it answers (assemble/echoes.py):
marked in the history, left out of memory, the trace saying why; an assistant turn that
does not repeat it, or answers another message, stays as it is. Every backend."""

from __future__ import annotations

from ctxbase import ContextBase
from ctxbase.assemble.echoes import ECHO_MARK
from ctxbase.assemble.trace import AssembledContext
from ctxbase.model import Event
from ctxbase.retrieve.echoes import echoes, history_echoes

ASK = "when is the billing report deadline?"


def _prompt(ctx: AssembledContext) -> str:
    return "\n".join(f"{m['role']}: {m['content']}" for m in ctx.messages)


def _event(i: str, type_: str, text: str, seq: int, parents: tuple[str, ...] = ()) -> Event:
    return Event(
        id=i,
        project_id="p",
        session_id="s",
        type=type_,
        text=text,
        seq=seq,
        parent_event_ids=list(parents),
    )


def test_the_rule_wants_an_answer_that_repeats_the_message() -> None:
    assert echoes("the deadline is Friday", "OK, deadline Friday noted.")
    assert not echoes("the deadline is Friday", "OK, noted.")  # says none of it again
    assert not echoes("the deadline is Friday", "What deadline do you mean?")  # one term
    assert not echoes("Friday", "Friday it is")  # too short to tell
    events = [
        _event("u1", "user_message", "the deadline is Friday", 1),
        _event("t1", "tool_invocation", "calendar.add(deadline=Friday)", 2),
        _event("a1", "assistant_message", "OK, deadline Friday noted.", 3),
        _event("u2", "user_message", "and the report owner?", 4),
        _event("a2", "assistant_message", "The deadline Friday report owner is Li.", 5),
        _event("a3", "assistant_message", "Deadline Friday, as you said.", 6, ("u1",)),
    ]
    # a1 answers u1 (only a tool call between); a2 answers u2, not u1; a3 names u1
    assert history_echoes(events, ["u1"]) == {"a1": "u1", "a3": "u1"}
    assert history_echoes(events, []) == {}


def test_an_echo_is_marked_in_the_history_and_left_out_of_memory(cb: ContextBase) -> None:
    said = cb.record(
        "user_message", session_id="s1", text="The deadline for the billing report is Friday."
    )
    echo = cb.record(
        "assistant_message", session_id="s1", text="OK, billing report deadline Friday noted."
    )
    cb.record("user_message", session_id="s1", text="Which database do we use for billing?")
    reply = cb.record("assistant_message", session_id="s1", text="We use PostgreSQL for billing.")
    cb.flush()
    before = _prompt(cb.assemble_context(agent_role="coder", user_intent=ASK, session_id="s2"))
    assert "deadline Friday noted" in before and ECHO_MARK not in before

    cb.expire_message("s1", said.id)
    own = cb.assemble_context(agent_role="coder", user_intent=ASK, session_id="s1")
    body = _prompt(own)
    # in its place in the conversation, marked; the unrelated reply as it was
    assert f"assistant: {ECHO_MARK} OK, billing report deadline Friday noted." in body
    assert "assistant: We use PostgreSQL for billing." in body
    assert body.index("deadline Friday noted") < body.index("PostgreSQL")
    assert "is Friday." not in body  # the retracted message itself stays out
    assert any(echo.id in n and said.id in n and ECHO_MARK in n for n in own.trace["notes"])

    other = cb.assemble_context(agent_role="coder", user_intent=ASK, session_id="s2")
    assert "deadline Friday noted" not in _prompt(other)
    drops = {(d["id"], d["reason"]): d["detail"] for d in other.trace["dropped"]}
    assert said.id in drops[(echo.id, "answers retracted")]
    assert reply.id not in {d["id"] for d in other.trace["dropped"] if d["reason"] != "off topic"}


def test_an_answer_that_does_not_repeat_the_retracted_message_stays(cb: ContextBase) -> None:
    said = cb.record(
        "user_message", session_id="s1", text="The deadline for the billing report is Friday."
    )
    cb.record(
        "assistant_message", session_id="s1", text="Understood, I will plan the billing report."
    )
    cb.flush()
    cb.expire_message("s1", said.id)
    ctx = cb.assemble_context(agent_role="coder", user_intent=ASK, session_id="s1")
    body = _prompt(ctx)
    assert "assistant: Understood, I will plan the billing report." in body
    assert ECHO_MARK not in body
    elsewhere = cb.assemble_context(agent_role="coder", user_intent=ASK, session_id="s2")
    assert "answers retracted" not in {d["reason"] for d in elsewhere.trace["dropped"]}
