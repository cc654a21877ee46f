"""Seed 000's call names on the native API: one place that maps them, for the embedded base
and the remote SDK alike.

The article's client writes ``upsert_entity(entity_type=..., entity_id=..., properties={
"content": ...})``, ``create_edge(from_id=..., to_id=..., edge_type=..., properties={
"confidence": 0.95})`` and ``upsert_relationship(from_id, to_id, edge_type)`` (positional,
target before type). The native names (``type``, ``name``, ``text``, ``id``; ``from_id, type,
to_id``) keep working; these helpers turn either spelling into the native arguments.
(Seed 001's event field names are mapped in capture/event_fields.py.)
"""

from __future__ import annotations

import getpass
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .errors import ValidationError
from .validation import either

__all__ = [
    "EdgeArgs",
    "EntityArgs",
    "edge_args",
    "entity_args",
    "identity_source",
    "looks_like_relation_type",
]

_REL_TYPE = re.compile(r"^[A-Z][A-Z0-9_]{0,63}$")


def looks_like_relation_type(value: object) -> bool:
    """Relation types are UPPER_SNAKE_CASE; ids of entities and events never are in practice."""
    return isinstance(value, str) and bool(_REL_TYPE.fullmatch(value))


def identity_source(agent_id: str | None, fallback: str | None = None) -> str:
    """The provenance written on an edge whose caller named no `source`: the agent id, else
    `fallback` (e.g. the API key's id), else the local user. Never empty."""
    if agent_id and agent_id.strip():
        return f"agent:{agent_id.strip()}"
    if fallback and fallback.strip():
        return fallback.strip()
    try:
        user = getpass.getuser()
    except Exception:  # no login name in some containers: still a non-empty provenance
        user = ""
    return f"local:{user}" if user else "local"


@dataclass(frozen=True)
class EntityArgs:
    type: str
    name: str
    text: str
    id: str | None
    properties: dict[str, Any]


def entity_args(
    type: str | None,
    name: str | None,
    text: str | None,
    id: str | None,
    properties: Mapping[str, Any] | None,
    *,
    entity_type: str | None = None,
    entity_id: str | None = None,
) -> EntityArgs:
    """Native entity arguments from either spelling.

    Without a name the entity is named by its id (or by ``properties["name"|"title"]``);
    ``properties["content"]`` is the text (moved out of the properties, so it is stored and
    indexed once): it must be a string, and one given beside a different `text` is refused.
    """
    kind = either("type", type, "entity_type", entity_type)
    eid = either("id", id, "entity_id", entity_id)
    props = _properties(properties)
    if not kind or not isinstance(kind, str):
        raise ValidationError("type", "an entity needs a type (type= or entity_type=)")
    body = text
    if "content" in props:  # seed 000's name for the text: stored once, as the text
        content = props.pop("content")
        if not isinstance(content, str):
            kind = content.__class__.__name__
            message = f"is the entity's text: give a string (got {kind})"
            raise ValidationError("properties.content", message)
        body = either("text", text or None, "properties.content", content)
    label = name
    if not label:
        named = props.get("name") or props.get("title")
        label = named if isinstance(named, str) and named else eid
    if not label or not isinstance(label, str):
        raise ValidationError("name", "an entity needs a name (or an entity_id to name it by)")
    return EntityArgs(kind, label, body or "", eid, props)


@dataclass(frozen=True)
class EdgeArgs:
    from_id: str
    type: str
    to_id: str
    source: str
    confidence: float | None  # None: not given (an existing edge keeps its confidence)
    properties: dict[str, Any]


def edge_args(
    from_id: str | None,
    type: str | None,
    to_id: str | None,
    *,
    edge_type: str | None,
    source: str | None,
    confidence: float | None,
    properties: Mapping[str, Any] | None,
    identity: str,
) -> EdgeArgs:
    """Native edge arguments from either spelling.

    Positional calls are read in the native order ``(from_id, type, to_id)`` unless only the
    third argument is a relation type (``(from_id, to_id, "REFERENCES")``, seed 000's
    order). ``properties["confidence"]`` and ``properties["source"]`` stand for the
    arguments of that name when those are not given; without any source the caller's
    `identity` is the source. A confidence given nowhere stays None: a new edge gets 1.0,
    an existing one keeps its own (re-upserting an edge does not reset it).
    """
    if edge_type is not None:
        if type is not None and to_id is None:
            type, to_id = None, type  # upsert_relationship(a, b, edge_type="X")
        kind = either("type", type, "edge_type", edge_type)
    elif looks_like_relation_type(to_id) and not looks_like_relation_type(type):
        kind, to_id = to_id, type
    else:
        kind = type
    for field, value in (("from_id", from_id), ("to_id", to_id), ("type", kind)):
        if not value or not isinstance(value, str):
            raise ValidationError(field, "an edge needs from_id, to_id and a type (edge_type)")
    props = _properties(properties)
    conf_prop = props.pop("confidence", None)
    src_prop = props.pop("source", None)
    conf: Any = either("confidence", confidence, "properties.confidence", conf_prop)
    if conf is not None and (isinstance(conf, bool) or not isinstance(conf, int | float)):
        raise ValidationError("confidence", f"must be a number in [0, 1] (got {conf!r})")
    src = either("source", source, "properties.source", src_prop)
    if src is None:
        src = identity
    if not isinstance(src, str) or not src.strip():
        raise ValidationError("source", 'is required: "human", a model name, or "auto:<rule>"')
    assert from_id is not None and to_id is not None and kind is not None  # checked above
    return EdgeArgs(from_id, kind, to_id, src, None if conf is None else float(conf), props)


def _properties(properties: object) -> dict[str, Any]:
    """A copy of the properties given (None: none); anything but a mapping is refused."""
    if properties is None:
        return {}
    if not isinstance(properties, Mapping):
        kind = properties.__class__.__name__
        raise ValidationError("properties", f"must be a mapping of names to values (got {kind})")
    return dict(properties)
