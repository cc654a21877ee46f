"""HMAC-signed metadata (seed 002): detect entities and relations changed behind our back.

A signature is HMAC-SHA256 over a canonical JSON of what an entity says (project, id, type,
name, version, properties without `_sig`, and a digest of its text), stored in
`properties["_sig"]`. Relations are signed over project, ends, type, confidence, source and
properties. Storage bookkeeping (`latest`, `active`, timestamps) is not signed: the system
changes it itself when a version is superseded or soft-deleted.

Keys are per project: pass one explicitly, or set `CTXBASE_HMAC_KEY_<PROJECT>` (the project id
upper-cased, every character that is not a letter or digit turned into `_`), or
`CTXBASE_HMAC_KEY` for all projects. `project_key` resolves them in that order.

Events are not signed (they are append-only captures, not curated metadata): result filtering
keeps them as they are.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from ..model import Entity, Relation
from ..store.base import SearchItem, Store

if TYPE_CHECKING:
    from ..contextbase import ContextBase

__all__ = [
    "SIGNATURE_PROPERTY",
    "entity_signature_status",
    "filter_signed",
    "key_env_var",
    "project_key",
    "sign_entity",
    "sign_relation",
    "sign_stored_entities",
    "signed_entity",
    "verify_entity",
    "verify_relation",
    "verify_results",
]

SIGNATURE_PROPERTY = "_sig"
_ALGORITHM = "hmac-sha256:v1"


class _HasItem(Protocol):
    @property
    def item(self) -> SearchItem: ...


_C = TypeVar("_C", bound=_HasItem)


def key_env_var(project: str) -> str:
    """The environment variable holding a project's key: `CTXBASE_HMAC_KEY_<PROJECT>`."""
    return "CTXBASE_HMAC_KEY_" + re.sub(r"[^A-Za-z0-9]", "_", project).upper()


def project_key(project: str, key: bytes | str | None = None) -> bytes | None:
    """The signing key: the one given, else the project's variable, else CTXBASE_HMAC_KEY."""
    if key is not None:
        return key.encode("utf-8") if isinstance(key, str) else bytes(key)
    value = os.environ.get(key_env_var(project)) or os.environ.get("CTXBASE_HMAC_KEY")
    return value.encode("utf-8") if value else None


def _as_key(key: bytes | str) -> bytes:
    if isinstance(key, str):
        key = key.encode("utf-8")
    if not key:
        raise ValueError("an HMAC key must not be empty")
    return key


def _mac(key: bytes | str, payload: Any) -> str:
    raw = json.dumps(payload, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    digest = hmac.new(_as_key(key), raw.encode("utf-8"), hashlib.sha256).hexdigest()
    return f"{_ALGORITHM}:{digest}"


def _unsigned(properties: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in properties.items() if k != SIGNATURE_PROPERTY}


def sign_entity(entity: Entity, key: bytes | str) -> str:
    """The signature of an entity's metadata (store it in properties["_sig"])."""
    text_digest = hashlib.sha256(entity.text.encode("utf-8")).hexdigest()
    payload = [
        entity.project_id,
        entity.id,
        entity.type,
        entity.name,
        entity.version,
        _unsigned(entity.properties),
        text_digest,
    ]
    return _mac(key, payload)


def signed_entity(entity: Entity, key: bytes | str) -> Entity:
    """A copy of the entity carrying its signature."""
    props = {**_unsigned(entity.properties), SIGNATURE_PROPERTY: sign_entity(entity, key)}
    return entity.model_copy(update={"properties": props})


def verify_entity(entity: Entity, key: bytes | str) -> bool:
    """True when the entity carries a signature that matches its current content."""
    sig = entity.properties.get(SIGNATURE_PROPERTY)
    return isinstance(sig, str) and hmac.compare_digest(sig, sign_entity(entity, key))


def sign_relation(relation: Relation, key: bytes | str) -> str:
    payload = [
        relation.project_id,
        relation.from_id,
        relation.type,
        relation.to_id,
        round(relation.confidence, 6),
        relation.source,
        _unsigned(relation.properties),
    ]
    return _mac(key, payload)


def verify_relation(relation: Relation, key: bytes | str) -> bool:
    sig = relation.properties.get(SIGNATURE_PROPERTY)
    return isinstance(sig, str) and hmac.compare_digest(sig, sign_relation(relation, key))


def entity_signature_status(
    store: Store, project_id: str, ids: Iterable[str], key: bytes | str
) -> dict[str, str]:
    """id -> "valid", "invalid" (tampered), "unsigned", or "not_entity" (an event, a gone id)."""
    wanted = list(dict.fromkeys(ids))
    found = {e.id: e for e in store.get_entities(project_id, wanted, include_inactive=True)}
    status: dict[str, str] = {}
    for node_id in wanted:
        entity = found.get(node_id)
        if entity is None:
            status[node_id] = "not_entity"
        elif SIGNATURE_PROPERTY not in entity.properties:
            status[node_id] = "unsigned"
        else:
            status[node_id] = "valid" if verify_entity(entity, key) else "invalid"
    return status


def filter_signed(
    candidates: Sequence[_C],
    key: bytes | str,
    store: Store,
    project_id: str,
    *,
    require_signature: bool = True,
) -> tuple[list[_C], list[str]]:
    """Drop search candidates whose entity fails its signature: (kept, tampered ids).

    With `require_signature`, unsigned entities are dropped too (but not reported as
    tampered); events always pass. For the search or assembly layer to call on its results.
    """
    owners = [c.item.owner_id for c in candidates]
    status = entity_signature_status(store, project_id, owners, key)
    kept: list[_C] = []
    tampered: list[str] = []
    for cand in candidates:
        verdict = status.get(cand.item.owner_id, "not_entity")
        if verdict == "invalid":
            if cand.item.owner_id not in tampered:
                tampered.append(cand.item.owner_id)
            continue
        if verdict == "unsigned" and require_signature:
            continue
        kept.append(cand)
    return kept, tampered


def verify_results(
    cb: ContextBase,
    results: Sequence[_HasItem] | Any,
    key: bytes | str | None = None,
    *,
    project: str | None = None,
) -> list[str]:
    """Ids of entities among search results (a SearchResponse or candidates) that were
    tampered with; `key` defaults to the project's configured key."""
    pid = cb.resolve_project(project)
    resolved = project_key(pid, key)
    if resolved is None:
        raise ValueError(f"no HMAC key for project {pid!r}: pass one or set {key_env_var(pid)}")
    items = getattr(results, "results", results)
    _, tampered = filter_signed(list(items), resolved, cb.store, pid, require_signature=False)
    return tampered


def sign_stored_entities(
    cb: ContextBase, ids: Sequence[str], key: bytes | str, *, project: str | None = None
) -> int:
    """Sign entities already stored; their vectors are kept (signing changes no text)."""
    from ..retrieve.indexing import entity_items
    from .entities import read_vectors, restore_vectors, write_entity

    pid = cb.resolve_project(project)
    entities = cb.store.get_entities(pid, list(ids), include_inactive=True)
    item_ids = [it.item_id for e in entities for it in entity_items(e)]
    vectors = read_vectors(cb, pid, item_ids)
    for entity in entities:
        write_entity(cb, signed_entity(entity, key), notify=False)
    restore_vectors(cb, pid, vectors)
    return len(entities)
