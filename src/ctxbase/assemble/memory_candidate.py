"""A memory candidate of one assembly: what an entity or an event brings to the memory
layer (its text, score, why it came, how it is labelled and cut), before the gatherer
merges candidates by owner and the budget packs them."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from ..model import Entity, Event, Relation
from ..retrieve.indexing import names_its_text
from ..retrieve.signals import tool_failed
from .cutting import fit_to_boundary
from .history_calls import CALL_TYPE
from .tokens import TokenCounter

__all__ = [
    "CODE_TYPES",
    "LINE_TYPES",
    "MENTION_TYPE",
    "MemoryCandidate",
    "entity_cand",
    "entity_said_at",
    "event_cand",
    "event_failed",
    "label_day",
    "label_for",
    "relation_entry",
]

CODE_TYPES = frozenset({"code", "sql", "test_case", "function", "class", "method", "script"})
# Texts read line by line: cut after a whole line, not after a sentence (cutting.py).
LINE_TYPES = CODE_TYPES | {"table", "file", "tool_result", CALL_TYPE}
# what capture anchoring makes of a file, table, route or person a message names: its text
# is the kind and the name ("table orders_archive"), no definition
MENTION_TYPE = "mention"
_LABEL_WORDS = {
    "user_message": "message",
    "assistant_message": "message",
    "tool_result": "tool result",
    "tool_invocation": "tool call",
    "test_case": "test case",
}


def label_for(type_: str, owner_id: str, name: str = "", answers: str = "", day: str = "") -> str:
    """The source label of a memory item: "[document doc_101] Redis 规范", "[tool result ev_1]";
    `answers` names the call a tool result answers: "[tool result ev_2 of ev_1 run_sql]";
    `day` when it was said or last changed: "[message ev_7, 2026-03-02]"."""
    of = f" of {answers}" if answers else ""
    head = f"[{_LABEL_WORDS.get(type_, type_.replace('_', ' '))} {owner_id}{of}{_on(day)}]"
    return f"{head} {name}" if name else head


def _on(day: str) -> str:
    return f", {day}" if day else ""


def label_day(ts: float | None) -> str:
    """The UTC day a memory item's label shows ("" when unknown): with it a reader can tell
    the later of two memories that disagree, and place "last Tuesday" said back then."""
    if ts is None:
        return ""
    try:
        return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%d")
    except (OverflowError, OSError, ValueError):  # a time no calendar day holds
        return ""


def event_failed(event: Event) -> bool:
    """A tool result that reports a failure (metadata error, or a non-zero exit code)."""
    return tool_failed(event.metadata)


@dataclass
class MemoryCandidate:
    """One candidate of the memory layer, merged across the strategies that found it."""

    owner_id: str
    kind: str  # "entity" | "event" | "correction" (corrections.py) | "conflict" (consensus.py)
    type: str
    name: str
    text: str
    score: float
    strategies: list[str] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    explain: dict[str, object] | None = None
    session_id: str | None = None
    partial: bool = False  # only the passages of a long entity that a search matched
    repo: str | None = None  # the repository of an ingested entity
    # an event's parents and time (memory_calls.py pairs tool results with their calls)
    parents: tuple[str, ...] = ()
    ts: float | None = None
    seq: int | None = None  # an event's place in its session (asked_before.py reads on)
    agent_id: str | None = None  # an event's agent: another agent's call is not a message's
    # a tool result: the call it answers ("ev_1 run_sql") and that call's text
    answers: str = ""
    call_text: str = ""
    # a tool result: the memory item its call is shown in (the call, or the call's message)
    unit: str = ""
    # an assistant message: the lines of the calls it made that its text does not say
    call_lines: list[str] = field(default_factory=list)
    # a recency cue ordered it, or a call it shows (retrieve/recency.py)
    cued: bool = False
    # when it was said: an event's time, an entity's last change, a rating's note's time;
    # the age a time decay counts (the trace shows it)
    said_at: float | None = None
    # an entity that is not its latest version: why (the gatherer leaves it out)
    superseded: str = ""

    @property
    def shown(self) -> str:
        """The text the memory block shows: a message's calls follow its text, as in the
        history."""
        if not self.call_lines:
            return self.text
        said = self.text.rstrip()
        return "\n".join([said, *self.call_lines] if said else self.call_lines)

    @property
    def cut(self) -> Literal["prose", "lines"]:
        """How its text is cut when it does not fit (cutting.py): code, tables and tool
        calls and results by lines, anything else as prose."""
        return "lines" if self.type in LINE_TYPES else "prose"

    def label(self) -> str:
        """The line the memory block shows above its text."""
        day = label_day(self.said_at)
        if self.kind == "correction":  # corrections.py: `answers` names what it replaces
            return f"[correction of {self.answers}{_on(day)}]"
        if self.kind == "conflict":  # consensus.py: the agents' contexts disagree
            return "[conflict between agents]"
        # a name that only repeats the text (a requirement sentence) is not shown twice
        name = "" if names_its_text(self.name, self.text) else self.name
        return label_for(self.type, self.owner_id, name, self.answers, day)

    def item_text(self, counter: TokenCounter, max_item_tokens: int) -> str:
        """The text the memory block shows under its label, cut to `max_item_tokens` where
        a reader expects it to end, the cut marked."""
        body = fit_to_boundary(self.shown, max_item_tokens, counter, lines=self.cut == "lines")
        return f"{self.label()}\n{body}"


def relation_entry(rel: Relation, strategy: str, floor: float) -> dict[str, Any]:
    """A relation as the trace lists it: followed when its confidence reaches `floor`."""
    return {
        "from": rel.from_id,
        "to": rel.to_id,
        "type": rel.type,
        "confidence": rel.confidence,
        "source": rel.source,
        "strategy": strategy,
        "followed": rel.confidence >= floor,
    }


def entity_cand(e: Entity, score: float, strategy: str, reason: str) -> MemoryCandidate:
    repo, session = e.properties.get("repo"), e.properties.get("session_id")
    return MemoryCandidate(
        e.id,
        "entity",
        e.type,
        e.name,
        e.text or e.name,
        score,
        [strategy],
        [reason],
        repo=repo if isinstance(repo, str) else None,
        # the session a message it was anchored from is in (memory_scope user reads it)
        session_id=session if isinstance(session, str) and session else None,
        said_at=entity_said_at(e),
        superseded=superseded_detail(e),
    )


def entity_said_at(entity: Entity) -> float:
    """When what the entity holds was said: the time of the message it was anchored from
    (property `said_at`), else its last change. A conversation captured with its own times
    (imported, replayed) has its statements dated as said, not as anchored, in the prompt.
    Its search item (retrieve/indexing.py) keeps the last change: with items dated as
    said, LoCoMo's worst fold R@10 fell 0.779 -> 0.774 (one run on a store built afresh;
    why is not examined)."""
    at = entity.properties.get("said_at")
    if isinstance(at, int | float) and not isinstance(at, bool) and math.isfinite(at):
        return float(at)
    return entity.updated_at


def superseded_detail(e: Entity) -> str:
    """Why `e` is not served as current ("" when it is its latest version): a kept earlier
    version (`spec@v1`), a document superseded by a same-named one, or a file's older one."""
    if e.latest:
        return ""
    props = e.properties
    if isinstance(head := props.get("archived_from"), str):
        return f"version {e.version} of {head}, which has a newer version"
    if isinstance(by := props.get("superseded_by"), str):
        return f"superseded by {by}"
    return "not the latest version"


def event_cand(e: Event, score: float, strategy: str, reason: str) -> MemoryCandidate:
    return MemoryCandidate(
        e.id,
        "event",
        e.type,
        "",
        e.text or "",
        score,
        [strategy],
        [reason],
        session_id=e.session_id,
        parents=tuple(e.parent_event_ids),
        ts=e.ts,
        seq=e.seq,
        said_at=e.ts,
        agent_id=e.agent_id,
    )
