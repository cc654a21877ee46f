"""How a history turn reads in one agent's prompt: its role, its text, its tokens.

In a session several agents share, a turn another agent said would read as the viewing
agent's own (an assistant message) or as the user's: it is prefixed with that agent's role,
`[tester] the test fails on line 3`. The viewing agent's own turns, the user's, and turns of
no recorded role stay as said. A tool call reads as the assistant's line `name(...)`; tool
output is stored text, quoted as data in a user message (quoting.py); any other event (a
captured system message) is labelled. Pure: events in, texts out.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from ..model import Event
from .history_calls import CALL_TYPE
from .memory_candidate import label_for
from .memory_section import ITEM_OVERHEAD
from .quoting import TOOL, Quote, neutralise
from .tokens import TokenCounter

__all__ = ["NOT_AGENTS", "SAID", "TurnView", "other_agent", "prompt_name", "role_prefix"]

# what a turn of each type is, as a chat message's role
SAID = {"user_message": "user", "assistant_message": "assistant", CALL_TYPE: "assistant"}
# roles capture records that are not agents of the session: the user, a tool, the system
NOT_AGENTS = frozenset({"user", "tool", "system"})
# tool output is stored text a tool returned: quoted as data, never read as instructions
_QUOTED = {"tool_result": Quote(TOOL)}


def other_agent(e: Event, viewer: str) -> str | None:
    """The role of the agent that said turn `e` when it is not `viewer` (nor the user, a
    tool or the system); None for the viewer's own turns, the user's and unrecorded ones."""
    role = (e.agent_role or "").strip()
    if not role or role.casefold() in NOT_AGENTS or role == viewer.strip():
        return None
    return role


def prompt_name(role: str) -> str:
    """A role as a prompt writes it: a plain name as is ("the coder agent"), anything else
    quoted, so "my agent" or a role holding a sentence (or a `]`) reads as one name."""
    if re.fullmatch(r"[\w.-]+", role):
        return role
    return json.dumps(role, ensure_ascii=False)


def role_prefix(role: str) -> str:
    """`[tester] `: the prefix of another agent's turn."""
    return f"[{prompt_name(role)}] "


@dataclass(frozen=True)
class TurnView:
    """The history as `viewer` (the assembling agent's role) sees it."""

    viewer: str
    counter: TokenCounter

    def prefix(self, e: Event) -> str:
        """Another agent's said turn: its role prefix; else ""."""
        if e.type not in SAID:
            return ""
        other = other_agent(e, self.viewer)
        return "" if other is None else role_prefix(other)

    def role(self, e: Event) -> str:
        return "user" if e.type in _QUOTED else SAID.get(e.type, "system")

    def quote(self, e: Event) -> Quote | None:
        """How the turn is quoted as data (tool output), or None."""
        return _QUOTED.get(e.type)

    def text(self, e: Event) -> str:
        """The turn's text as the prompt shows it (without a quoting wrapper)."""
        text = e.text or ""
        if e.type in SAID:
            return self.prefix(e) + text
        labelled = f"{label_for(e.type, e.id)}\n{text}"
        return neutralise(labelled) if e.type in _QUOTED else labelled

    def keep(self, e: Event) -> int:
        """Characters of the leading label or prefix a cut keeps whole."""
        if e.type in SAID:
            return len(self.prefix(e))
        return len(label_for(e.type, e.id)) + 1

    def overhead(self, e: Event) -> int:
        """Tokens the quoting wrapper adds to the turn (0 when not quoted)."""
        q = self.quote(e)
        return 0 if q is None else q.cost(self.text(e), self.counter)

    def cost(self, e: Event) -> int:
        """Tokens the turn takes in the prompt: text, message overhead, quoting wrapper."""
        return self.counter.count(self.text(e)) + ITEM_OVERHEAD + self.overhead(e)
