"""The closed loop (seed 000, step 4): what the model answered goes back into the graph.

`record_outcome` stores the answer as an event of the assembly's session that refers to the
context it was given, and every artefact it produced (code, SQL, a test, a document) as an
entity linked to that context:

* same name as an entity in the context, or as one stored with other text (another agent's
  answer produced it) -> a new version that MODIFIES the old one (the old one stops being
  the latest, with `superseded_by`, so searches find the fix, not the bug, and the other
  agent's version is kept, not overwritten);
* GENERATES edges from the context's documents, requirements and code that the output used:
  the answer or the artefact names the entity (its id or name), shares code symbols with it
  (identifiers such as `list_orders`, `orders.user_id`), or shares at least two content
  words with it. An entity that was in the context but left no trace in the output is not
  linked (every context entity linked to everything would drown the graph);
* a produced test case is also VALIDATES-linked from the context's code it used;
* a produced item may name its own relations (`relations=[{"type": "MUST_CACHE", "from":
  "doc_101"}]`), custom types included; each edge records the evidence it rests on.

The assembly's trace gets an "outcome" section, so the audit trail runs from the prompt to
what came of it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..components import Components, ComponentsSource, components_of
from ..errors import ValidationError
from ..model import Entity, Relation, make_entity_id
from ..retrieve.tokenize import index_terms
from .trace import get_trace, store_trace

__all__ = ["Outcome", "Produced", "ProducedRelation", "record_outcome", "used_evidence"]

_CODE_TYPES = frozenset({"code", "sql", "function", "class", "method", "script"})
_TEST_TYPES = frozenset({"test_case", "test"})


class ProducedRelation(BaseModel):
    """An edge the caller knows the artefact has: from an entity to it, or from it to one."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    type: str = Field(min_length=1, max_length=100)
    from_id: str | None = Field(default=None, alias="from")
    to_id: str | None = Field(default=None, alias="to")
    confidence: float | None = Field(default=None, ge=0.0, le=1.0)

    @model_validator(mode="after")
    def _one_end(self) -> ProducedRelation:
        if (self.from_id is None) == (self.to_id is None):
            raise ValueError("name exactly one of 'from' (entity -> artefact) or 'to'")
        return self


class Produced(BaseModel):
    """One artefact the model produced: its entity type, name (natural key) and text."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    type: str = Field(min_length=1)
    name: str = Field(min_length=1)
    text: str = ""
    properties: dict[str, Any] = Field(default_factory=dict)
    id: str | None = None
    relations: list[ProducedRelation] = Field(default_factory=list)


_SYMBOL = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")


def _symbols(text: str) -> set[str]:
    """Code-like identifiers: with an underscore, a dot, a digit or inner capitals."""
    out: set[str] = set()
    for m in _SYMBOL.finditer(text):
        word = m.group(0)
        if len(word) < 3:
            continue
        if (
            "_" in word
            or "." in word
            or any(c.isdigit() for c in word)
            or (any(c.isupper() for c in word[1:]) and any(c.islower() for c in word))
        ):
            out.add(word.casefold())
    return out


def _content_terms(text: str) -> set[str]:
    return {t for t in index_terms(text) if len(t) >= 2 and not t.isdigit()}


def used_evidence(entity: Entity, output: str) -> str | None:
    """Why `output` (an answer and the artefacts it produced) shows it used `entity`, or None.

    Named (its id, or its name of three characters or more), shared code symbols, or at
    least two shared content words (segmented, so Chinese prose counts as well)."""
    folded = output.casefold()
    if entity.id.casefold() in folded:
        return f"names {entity.id}"
    if len(entity.name) >= 3 and entity.name.casefold() in folded:
        return f"names {entity.name!r}"
    own = f"{entity.name}\n{entity.text}"
    shared_symbols = sorted(_symbols(own) & _symbols(output))
    if shared_symbols:
        return f"shares {', '.join(shared_symbols[:3])}"
    shared_terms = sorted(_content_terms(own) & _content_terms(output))
    if len(shared_terms) >= 2:
        return f"shares the words {', '.join(shared_terms[:4])}"
    return None


@dataclass(frozen=True)
class Outcome:
    event_id: str
    entities: list[Entity]
    relations: list[Relation]


def _context_entities(cb: Components, pid: str, trace: Mapping[str, Any]) -> list[Entity]:
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


def _written_before(cb: Components, pid: str, p: Produced) -> Entity | None:
    """The stored entity `p` would be written over, when it says something else: another
    context's answer (another agent's) produced it. It gets a new version as an entity of
    the context does, so the earlier one is kept and not silently replaced."""
    if p.id is not None:  # a caller's own id is written as given
        return None
    found = cb.store.get_entities(pid, [make_entity_id(p.type, p.name)])
    if found and found[0].latest and found[0].text.strip() != p.text.strip():
        return found[0]
    return None


def record_outcome(
    cb: ComponentsSource,
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
    cb = components_of(cb)
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

    def link(
        from_id: str, rel_type: str, to_id: str, evidence: str, conf: float | None = None
    ) -> None:
        relations.append(
            cb.upsert_relationship(
                from_id,
                rel_type,
                to_id,
                source=source,
                confidence=confidence if conf is None else conf,
                properties={"context_id": context_id, "evidence": evidence},
                project=pid,
            )
        )

    for p in items:
        props = {**p.properties, "context_id": context_id}
        old = by_name.get((p.name, p.type in _CODE_TYPES)) or _written_before(cb, pid, p)
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
            if "_sig" not in old.properties:  # signed properties stay as signed
                gone = {**old.properties, "superseded_by": new.id}
                stale = stale.model_copy(update={"properties": gone})
            cb.store.upsert_entity(stale, cb.entity_items(stale))
            link(new.id, "MODIFIES", old.id, f"a new version of {old.id}")
        else:
            new = cb.upsert_entity(p.type, p.name, p.text, id=p.id, properties=props, project=pid)
        output = f"{answer}\n{p.name}\n{p.text}"
        for ctx in context:
            if ctx.id == new.id or (old is not None and ctx.id == old.id):
                continue
            evidence = used_evidence(ctx, output)
            if evidence is None:
                continue  # in the context, but nothing shows the output used it
            if p.type in _TEST_TYPES and ctx.type in _CODE_TYPES:
                link(ctx.id, "VALIDATES", new.id, evidence)
            if ctx.type not in _TEST_TYPES:
                link(ctx.id, "GENERATES", new.id, evidence)
        for rel in p.relations:
            if rel.from_id is not None:
                link(rel.from_id, rel.type, new.id, "named by the caller", rel.confidence)
            else:
                link(new.id, rel.type, str(rel.to_id), "named by the caller", rel.confidence)
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
        # the artefacts are stored above: capture anchoring does not anchor their blocks again
        metadata={"context_id": context_id}
        | ({"produced": [e.id for e in entities]} if entities else {}),
        idempotency_key=f"outcome:{context_id}:{answer_hash}",
    )
    trace["outcome"] = {
        "event_id": event.id,
        "entities": [e.id for e in entities],
        "relations": [{"from": r.from_id, "type": r.type, "to": r.to_id} for r in relations],
    }
    store_trace(cb.store, pid, context_id, trace)  # a forget since the read: redacted
    return Outcome(event.id, entities, relations)
