"""An assembly reads a session's last HISTORY_READ events; the trace's count of older
messages is the session's, not that of what was read, on every backend."""

from __future__ import annotations

from ctxbase import ContextBase
from ctxbase.assemble.assembler import HISTORY_READ, Assembler
from ctxbase.model import Event

POLICY = """
version: 1
policies:
  - name: plain
    match: {agent_roles: [coder]}
    priority: 100
    strategies:
      - {name: recent_window, max_messages: 4}
"""


def _older_note(cb: ContextBase) -> str:
    ctx = Assembler(cb, POLICY).assemble(
        session_id="s", agent_role="coder", user_intent="the order table", max_tokens=2000
    )
    (note,) = [n for n in ctx.trace["notes"] if "older messages outside the window" in n]
    return str(note)


def _said(cb: ContextBase, n: int, start: int = 0) -> None:
    cb.record_events(
        [
            Event(project_id=cb.project, session_id="s", type="user_message", text=f"turn {i}")
            for i in range(start, start + n)
        ]
    )


def test_the_older_messages_of_a_short_session_are_counted_as_read(cb: ContextBase) -> None:
    _said(cb, 10)
    assert _older_note(cb) == (
        "recent_window: 6 older messages outside the window (0 important, compressed)"
    )


def test_a_session_longer_than_what_is_read_counts_all_its_older_messages(
    cb: ContextBase,
) -> None:
    _said(cb, HISTORY_READ + 100)
    cb.record("internal_thought", session_id="s", text="not a message: not counted among them")
    assert _older_note(cb) == (
        f"recent_window: {HISTORY_READ + 96} older messages outside the window "
        f"(0 important among the last {HISTORY_READ} events read, compressed)"
    )
