"""The closed loop (seed 000, step 4): what the model answered goes back into the graph.

`record_outcome` stores the answer as an event of the assembly's session that refers to the
context it was given, and every artefact it produced (code, SQL, a test, a document) as an
entity linked to that context:

* same name as an entity in the context -> a new version that MODIFIES the old one (the old
  one stops being the latest, so searches find the fix, not the bug);
* otherwise GENERATES edges from the context's documents, requirements and code;
* a produced test case is also VALIDATES-linked from the context's code (code -> test).

The assembly's trace gets an "outcome" section, so the audit trail runs from the prompt to
what came of it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from ..errors import ValidationError
from ..model import Entity, Relation
from ..retrieve.indexing import entity_items
from .trace import get_trace

if TYPE_CHECKING:
    from ..contextbase import ContextBase

__all__ = ["Outcome", "Produced", "record_outcome"]

_CODE_TYPES = frozenset({"code", "sql", "function", "class", "method", "script"})
_TEST_TYPES = frozenset({"test_case", "test"})


class Produced(BaseModel):
    """One artefact the model produced: its entity type, name (natural key) and text."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    type: str = Field(min_length=1)
    name: str = Field(min_length=1)
    text: str = ""
    properties: dict[str, Any] = Field(default_factory=dict)
    id: str | None = None


@dataclass(frozen=True)
class Outcome:
    event_id: str
    entities: list[Entity]
    relations: list[Relation]


def _context_entities(cb: ContextBase, pid: str, trace: Mapping[str, Any]) -> list[Entity]:
    ids = [
        str(c["id"])
        for c in trace.get("candidates", ())
        if c.get("included") and c.get("kind") == "entity"
    ]
    return cb.store.get_entities(pid, ids)


def _as_produced(item: Produced | Mapping[str, Any], index: int) -> Produced:
    if isinstance(item, Produced):
        return item
    try:
        return Produced.model_validate(dict(item))
    except Exception as exc:
        raise ValidationError(f"produced[{index}]", str(exc).splitlines()[0]) from exc


def record_outcome(
    cb: ContextBase,
    context_id: str,
    answer: str,
    produced: Sequence[Produced | Mapping[str, Any]] = (),
    *,
    project: str | None = None,
    session_id: str | None = None,
    agent_role: str | None = None,
    source: str = "auto:record_outcome",
    confidence: float = 0.9,
) -> Outcome:
    """Record the model's answer to an assembled context and link what it produced."""
    pid = cb.project if project is None else project
    trace = get_trace(cb, context_id, project=pid)
    sid = session_id or trace.get("session_id")
    if not sid:
        raise ValidationError("session_id", "the context has no session; name one")
    items = [_as_produced(p, i) for i, p in enumerate(produced)]
    context = _context_entities(cb, pid, trace)
    by_name = {(e.name, e.type in _CODE_TYPES): e for e in context}
    entities: list[Entity] = []
    relations: list[Relation] = []

    def link(from_id: str, rel_type: str, to_id: str) -> None:
        relations.append(
            cb.upsert_relationship(
                from_id,
                rel_type,
                to_id,
                source=source,
                confidence=confidence,
                properties={"context_id": context_id},
                project=pid,
            )
        )

    for p in items:
        props = {**p.properties, "context_id": context_id}
        old = by_name.get((p.name, p.type in _CODE_TYPES))
        if old is not None:
            new = cb.upsert_entity(
                p.type,
                p.name,
                p.text,
                id=p.id or f"{old.id}.v{old.version + 1}",
                properties=props,
                project=pid,
                version=old.version + 1,
            )
            stale = old.model_copy(update={"latest": False})
            cb.store.upsert_entity(stale, entity_items(stale))
            link(new.id, "MODIFIES", old.id)
        else:
            new = cb.upsert_entity(p.type, p.name, p.text, id=p.id, properties=props, project=pid)
        for ctx in context:
            if ctx.id == new.id or (old is not None and ctx.id == old.id):
                continue
            if p.type in _TEST_TYPES and ctx.type in _CODE_TYPES:
                link(ctx.id, "VALIDATES", new.id)
            if ctx.type not in _TEST_TYPES:
                link(ctx.id, "GENERATES", new.id)
        entities.append(new)

    refs = [e.id for e in entities] + [e.id for e in context]
    # An assembly's context id is unique, so the same answer to it again is a retry of this
    # call (e.g. by the remote SDK after a timeout): it must not store a second event.
    answer_hash = hashlib.sha256(str(answer).encode("utf-8", "surrogatepass")).hexdigest()[:32]
    event = cb.record(
        "assistant_message",
        session_id=sid,
        project=pid,
        text=answer,
        task_id=trace.get("task_id"),
        agent_role=agent_role or trace.get("agent_role"),
        refers_to=list(dict.fromkeys(refs)),
        metadata={"context_id": context_id},
        idempotency_key=f"outcome:{context_id}:{answer_hash}",
    )
    trace["outcome"] = {
        "event_id": event.id,
        "entities": [e.id for e in entities],
        "relations": [{"from": r.from_id, "type": r.type, "to": r.to_id} for r in relations],
    }
    cb.store.put_trace(pid, context_id, trace)
    return Outcome(event.id, entities, relations)
