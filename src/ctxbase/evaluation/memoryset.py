"""The project's own agent-memory test sets, adapted to the common conversation structure.

File format (JSON)::

    {"name": str, "language": str, "description": str,
     "conversations": [
        {"id": str, "title": str,
         "events": [{"id": str, "session": int, "speaker" or "agent_role": str,
                     "text": str, "date": "YYYY-MM-DD HH:MM"}, ...],
         "queries": [{"id": str, "query": str, "evidence": [event id, ...],
                      "category": "single-hop" | "multi-hop" | "temporal" | "follow-up"
                                  | "cross-agent", "answer": str (optional)}, ...]}]}

Event ids play the role of LoCoMo's dia_ids. Unlike LoCoMo, the sets are the project's own,
so a malformed file is an error rather than something to work around.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from ctxbase.evaluation.locomo import CATEGORY_NAMES, Conversation, Question, Session, Turn

__all__ = [
    "MEMORY_SET_CATEGORIES",
    "MemorySet",
    "load_memory_set",
    "parse_memory_set",
]

MEMORY_SET_CATEGORIES: tuple[int, ...] = (1, 2, 4, 6, 7)
_CATEGORY_BY_NAME = {
    name: number for number, name in CATEGORY_NAMES.items() if number in MEMORY_SET_CATEGORIES
}


@dataclass(frozen=True, slots=True)
class MemorySet:
    name: str
    language: str
    description: str
    conversations: tuple[Conversation, ...]

    @property
    def event_count(self) -> int:
        return sum(len(conv.turns) for conv in self.conversations)

    @property
    def question_count(self) -> int:
        return sum(len(conv.questions) for conv in self.conversations)


def _event_speaker(event: Mapping[str, Any]) -> str:
    speaker = event.get("speaker") or event.get("agent_role")
    if not isinstance(speaker, str) or not speaker:
        raise ValueError(f"event {event.get('id')!r} has neither speaker nor agent_role")
    return speaker


def _conversation(raw: Mapping[str, Any]) -> Conversation:
    conv_id = str(raw["id"])
    events = sorted(
        raw["events"], key=lambda event: (datetime.fromisoformat(event["date"]), event["id"])
    )
    session_dates: dict[int, str] = {}
    positions: dict[int, int] = {}
    turns: list[Turn] = []
    for event in events:
        session = int(event["session"])
        session_dates.setdefault(session, str(event["date"]))
        positions[session] = positions.get(session, 0) + 1
        turns.append(
            Turn(
                dia_id=str(event["id"]),
                speaker=_event_speaker(event),
                text=str(event["text"]),
                session_index=session,
                turn_index=positions[session],
                timestamp=datetime.fromisoformat(event["date"]),
            )
        )
    ids = [turn.dia_id for turn in turns]
    if len(set(ids)) != len(ids):
        raise ValueError(f"conversation {conv_id!r} repeats an event id")
    known = set(ids)
    questions: list[Question] = []
    for query in raw.get("queries", []):
        category = _CATEGORY_BY_NAME.get(query["category"])
        if category is None:
            raise ValueError(f"query {query.get('id')!r}: unknown category {query['category']!r}")
        evidence = tuple(dict.fromkeys(str(item) for item in query["evidence"]))
        missing = [item for item in evidence if item not in known]
        if missing or not evidence:
            raise ValueError(f"query {query.get('id')!r}: evidence {missing or '[]'} not found")
        questions.append(
            Question(str(query["query"]), str(query.get("answer", "")), category, evidence)
        )
    sessions = tuple(
        Session(index, date, datetime.fromisoformat(date))
        for index, date in sorted(session_dates.items())
    )
    return Conversation(
        conv_id=conv_id,
        speakers=tuple(dict.fromkeys(turn.speaker for turn in turns)),
        sessions=sessions,
        turns=tuple(turns),
        questions=tuple(questions),
    )


def parse_memory_set(data: Mapping[str, Any]) -> MemorySet:
    """Adapt an already-decoded memory set; raises ValueError on inconsistent data."""
    return MemorySet(
        name=str(data.get("name", "")),
        language=str(data.get("language", "")),
        description=str(data.get("description", "")),
        conversations=tuple(_conversation(raw) for raw in data["conversations"]),
    )


def load_memory_set(path: str | Path) -> MemorySet:
    """Load a memory-set JSON file (see the module docstring for its format)."""
    with Path(path).open(encoding="utf-8") as handle:
        return parse_memory_set(json.load(handle))
