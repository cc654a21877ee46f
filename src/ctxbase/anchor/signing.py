"""HMAC-signed metadata (seed 002): detect entities and relations changed behind our back.

What is signed. An entity's signature is HMAC-SHA256 over a canonical JSON of what it says:
project, id, type, name, version, properties without `_sig`, and a digest of its text; it is
stored in `properties["_sig"]`. Relations are signed over project, ends, type, confidence,
source and properties. Storage bookkeeping (`latest`, `active`, timestamps) is not signed:
the system changes it itself when a version is superseded or soft-deleted. The payload has
always held project, id and version, so signatures made before the checks below still verify.

What is verified is what is served. Search returns search units (items), not entity rows, and
a unit's text and keyword-index row live apart from the entity; so `require_signature` checks
each unit against its verified entity (`SignatureCheck`): a short entity's unit must hold
exactly the entity's search text, a long entity's chunks must be verbatim spans of it, and
type, path and lines must be the entity's. Units are not signed themselves: where a long text
is cut depends on the token counter of whichever process wrote it (a client may sign and a
server index), while "identical to, or a span of, signed text" needs no re-cutting. A unit
that fails is dropped and its owner named in `tampered`. In a search a unit is exempt when its
owner is a stored event; a unit claiming an entity or an owner that does not exist is refused.

Events. A capture is signed as it is stored whenever its project has a key configured
(`ContextBase` signs each batch it writes: `signed_event`), over project, id, session, type,
agent, role, a digest of its text, its data and its metadata without `_sig` (stored in
`metadata["_sig"]`). An assembly with `require_signature` verifies every event it would
show, the history's turns as well as recalled memory: an event with no signature (captured
where no key was configured, or written around ctxbase) is left out with reason
"unsigned", one whose signature does not match with "tampered"; the caller's own latest
input is not stored text and is exempt.

Relations are verified where they are used: graph expansion and the session window in
search, edges followed in assembly and the `relationships` of an assembled context. Unsigned
or tampered relations are not followed or shown; tampered ones are named in `tampered` next
to the entities (relation ids start with `rel_`). The event-graph edges the store adds itself
(NEXT, CAUSED_BY, REFERS_TO from an event, source `auto:capture`) are exempt, like events.

Replays. A signature stays valid forever, so writing back an older signed version would pass
verification; `check_signed_write` refuses (ConflictError, 409 over REST) a signed entity whose
version is not greater than the stored one, unless it is the stored entity unchanged (a retry).
Whoever can write the database itself can still restore an old row: no signature can tell an
old valid version from the current one without state outside the database.

Keys are per project and never come from a remote client: pass one explicitly (library), or
set `CTXBASE_HMAC_KEY_<PROJECT>` (the project id upper-cased, every character that is not a
letter or digit turned into `_`), or `CTXBASE_HMAC_KEY` for all projects. `project_key`
resolves them in that order. Writing follows the same key: ingest and anchoring sign what
they store whenever a key is configured (`sign=None`, the default; `resolve_sign_key`),
`sign=False` stores unsigned, and `sign=True` refuses to write without a key.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from ..components import ComponentsSource, components_of
from ..errors import ConflictError, ValidationError
from ..model import EVENT_GRAPH_RELATIONS, Entity, Event, Relation
from ..retrieve.indexing import entity_unit_matches
from ..store.base import ItemFilter, SearchItem, Store
from ..store.rows import EVENT_EDGE_SOURCE

if TYPE_CHECKING:
    from ..retrieve.config import SearchConfig
    from ..retrieve.search import SearchResponse

__all__ = [
    "SIGNATURE_PROPERTY",
    "SignatureCheck",
    "check_signed_write",
    "checked_search",
    "entity_signature_status",
    "event_verdict",
    "filter_signed",
    "key_env_var",
    "project_key",
    "resolve_sign_key",
    "sign_entity",
    "sign_event",
    "sign_relation",
    "sign_stored_entities",
    "signed_entity",
    "signed_event",
    "signed_events",
    "signed_relation",
    "verify_entity",
    "verify_event",
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


def resolve_sign_key(
    project: str, sign: bool | None = None, key: bytes | str | None = None
) -> bytes | None:
    """The key a write (ingest, anchoring) signs with, or None to store unsigned.

    `sign=None` signs whenever a key is given or configured (`project_key`); `sign=True`
    raises ValidationError when there is none; `sign=False` never signs (a key given as
    well is a contradiction, refused)."""
    if sign is not None and not isinstance(sign, bool):
        raise ValidationError("sign", f"must be true, false or None (got {sign!r})")
    if sign is False:
        if key is not None:
            raise ValidationError("sign", "sign=False and a sign_key contradict each other")
        return None
    resolved = project_key(project, key)
    if resolved is None:
        if sign:
            raise ValidationError(
                "sign",
                f"no HMAC key for project {project!r}: pass sign_key, or set "
                f"{key_env_var(project)} or CTXBASE_HMAC_KEY",
            )
        return None
    return _as_key(resolved)


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


def signed_relation(relation: Relation, key: bytes | str) -> Relation:
    """A copy of the relation carrying its signature."""
    props = {**_unsigned(relation.properties), SIGNATURE_PROPERTY: sign_relation(relation, key)}
    return relation.model_copy(update={"properties": props})


def verify_relation(relation: Relation, key: bytes | str) -> bool:
    sig = relation.properties.get(SIGNATURE_PROPERTY)
    return isinstance(sig, str) and hmac.compare_digest(sig, sign_relation(relation, key))


def _as_stored(value: Any) -> Any:
    """A JSON value as the store gives it back: tuples as lists, NUL characters as U+FFFD
    (PostgreSQL text cannot hold them), so a signature verifies on either backend."""
    raw = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    return json.loads(raw.replace("\\u0000", "\ufffd"))


def sign_event(event: Event, key: bytes | str) -> str:
    """The signature of a captured event (store it in metadata["_sig"])."""
    text = (event.text or "").replace("\x00", "\ufffd")
    payload = [
        event.project_id,
        event.id,
        event.session_id,
        event.type,
        event.agent_id,
        event.agent_role,
        hashlib.sha256(text.encode("utf-8")).hexdigest(),
        _as_stored(event.data),
        _as_stored(_unsigned(event.metadata)),
    ]
    return _mac(key, payload)


def signed_event(event: Event, key: bytes | str) -> Event:
    """A copy of the event carrying its signature."""
    meta = {**_unsigned(event.metadata), SIGNATURE_PROPERTY: sign_event(event, key)}
    return event.model_copy(update={"metadata": meta})


def signed_events(events: Sequence[Event]) -> list[Event]:
    """The events, each signed with its project's configured key (`project_key`); those of
    a project with none stay as they are."""
    keys: dict[str, bytes | None] = {}
    out: list[Event] = []
    for e in events:
        if e.project_id not in keys:
            keys[e.project_id] = project_key(e.project_id)
        key = keys[e.project_id]
        out.append(e if not key else signed_event(e, key))
    return out


def verify_event(event: Event, key: bytes | str) -> bool:
    sig = event.metadata.get(SIGNATURE_PROPERTY)
    return isinstance(sig, str) and hmac.compare_digest(sig, sign_event(event, key))


def event_verdict(event: Event, key: bytes | str) -> str:
    """The verdict on a captured event: "valid", "invalid" (tampered) or "unsigned"."""
    if SIGNATURE_PROPERTY not in event.metadata:
        return "unsigned"
    return "valid" if verify_event(event, key) else "invalid"


def _entity_verdict(entity: Entity | None, key: bytes | str) -> str:
    if entity is None:
        return "not_entity"
    if SIGNATURE_PROPERTY not in entity.properties:
        return "unsigned"
    return "valid" if verify_entity(entity, key) else "invalid"


def entity_signature_status(
    store: Store, project_id: str, ids: Iterable[str], key: bytes | str
) -> dict[str, str]:
    """id -> "valid", "invalid" (tampered), "unsigned", or "not_entity" (an event, a gone id)."""
    wanted = list(dict.fromkeys(ids))
    found = {e.id: e for e in store.get_entities(project_id, wanted, include_inactive=True)}
    return {node_id: _entity_verdict(found.get(node_id), key) for node_id in wanted}


def _is_event_edge(rel: Relation) -> bool:
    """Shaped like an edge the store adds for a captured event (checked with its source)."""
    return (
        rel.type in EVENT_GRAPH_RELATIONS
        and rel.source == EVENT_EDGE_SOURCE
        and rel.confidence == 1.0
        and not rel.properties
    )


def _relation_label(rel: Relation) -> str:
    return f"relation {rel.from_id} -{rel.type}-> {rel.to_id}"


class SignatureCheck:
    """The signature verdicts of one search or assembly, cached by id (see the module doc).

    `refused` maps every id kept out, in the order found, to (reason, detail): reason
    "tampered" (a signature that does not match, or a unit that is not its entity's text),
    "unsigned", or "no owner" (a unit whose owner is neither an entity nor an event).
    """

    def __init__(self, store: Store, project_id: str, key: bytes | str) -> None:
        self.store, self.project_id, self.key = store, project_id, _as_key(key)
        self._entities: dict[str, Entity | None] = {}
        self._verdicts: dict[str, str] = {}
        self._events: dict[str, bool] = {}
        # entity -> its first unit that is not its signed text: the whole entity is refused
        self._tainted: dict[str, str] = {}
        self.refused: dict[str, tuple[str, str]] = {}
        self.refused_relations: set[str] = set()  # which of `refused` are relations

    @property
    def tampered(self) -> list[str]:
        """Entities and relations whose signature or served text failed."""
        return [i for i, (reason, _) in self.refused.items() if reason == "tampered"]

    @property
    def unsigned(self) -> list[str]:
        """Entities (not relations) left out because they carry no signature."""
        return [
            i
            for i, (reason, _) in self.refused.items()
            if reason == "unsigned" and i not in self.refused_relations
        ]

    def refuse(self, node_id: str, reason: str, detail: str) -> None:
        self.refused.setdefault(node_id, (reason, detail))

    def entity_verdicts(self, ids: Iterable[str]) -> dict[str, str]:
        """id -> "valid", "invalid", "unsigned" or "not_entity" (one read for new ids)."""
        wanted = list(dict.fromkeys(ids))
        todo = [i for i in wanted if i not in self._verdicts]
        if todo:
            found = self.store.get_entities(self.project_id, todo, include_inactive=True)
            by_id = {e.id: e for e in found}
            for node_id in todo:
                self._entities[node_id] = by_id.get(node_id)
                self._verdicts[node_id] = _entity_verdict(by_id.get(node_id), self.key)
        return {i: self._verdicts[i] for i in wanted}

    def entity(self, entity_id: str) -> str:
        """The verdict on one entity; a tampered or unsigned one is recorded as refused."""
        verdict = self.entity_verdicts([entity_id])[entity_id]
        if verdict == "invalid":
            self.refuse(entity_id, "tampered", "its HMAC signature does not match its content")
        elif verdict == "unsigned":
            self.refuse(entity_id, "unsigned", "require_signature: the entity carries no signature")
        return verdict

    def event(self, event: Event | str) -> str:
        """The verdict on a captured event an assembly would show (given, or read by id;
        "no owner" for one not stored); a tampered or unsigned one is recorded as refused."""
        if isinstance(event, str):
            found = self.store.get_events(self.project_id, [event], True)
            if not found:
                self.refuse(event, "no owner", "no stored event has this id")
                return "no owner"
            event = found[0]
        verdict = event_verdict(event, self.key)
        if verdict == "invalid":
            self.refuse(event.id, "tampered", "its HMAC signature does not match its content")
        elif verdict == "unsigned":
            self.refuse(event.id, "unsigned", "require_signature: the event carries no signature")
        return verdict

    def _event_owners(self, ids: Sequence[str]) -> set[str]:
        todo = [i for i in dict.fromkeys(ids) if i not in self._events]
        if todo:
            found = {e.id for e in self.store.get_events(self.project_id, todo, True)}
            self._events.update({i: i in found for i in todo})
        return {i for i in ids if self._events.get(i)}

    def unit_verdicts(self, items: Sequence[SearchItem]) -> list[str]:
        """Per unit: "valid", "invalid", "unsigned", "event" or "no owner"."""
        verdicts = self.entity_verdicts(it.owner_id for it in items)
        events = self._event_owners([o for o, v in verdicts.items() if v == "not_entity"])
        out: list[str] = []
        for it in items:
            verdict = verdicts[it.owner_id]
            if verdict == "not_entity":
                if it.owner_id not in events:
                    verdict = "no owner"
                else:  # an event's units only: a unit labelled as an entity is forged
                    verdict = "event" if it.kind in ("event", "chunk") else "invalid"
            elif verdict == "valid":
                entity = self._entities[it.owner_id]
                if entity is None or not entity_unit_matches(entity, it):
                    self._tainted.setdefault(it.owner_id, it.item_id)
                    self._verdicts[it.owner_id] = "invalid"
                    verdict = "invalid"
            out.append(verdict)
        return out

    def candidates(self, candidates: Sequence[_C], *, require_signature: bool = True) -> list[_C]:
        """The candidates whose unit may be served. Tampered units are always dropped; with
        `require_signature`, unsigned and ownerless ones too (and recorded as refused)."""
        verdicts = self.unit_verdicts([c.item for c in candidates])
        kept: list[_C] = []
        for cand, verdict in zip(candidates, verdicts, strict=True):
            owner = cand.item.owner_id
            if verdict == "invalid" or owner in self._tainted:  # one bad unit: none served
                unit = self._tainted.get(owner)
                detail = (
                    "its HMAC signature does not match its content"
                    if unit is None
                    else f"unit {unit}: its text is not the signed entity's"
                )
                self.refuse(owner, "tampered", detail)
                continue
            if require_signature and verdict == "unsigned":
                self.refuse(owner, "unsigned", "require_signature: the entity carries no signature")
                continue
            if require_signature and verdict == "no owner":
                self.refuse(owner, "no owner", f"unit {cand.item.item_id} has no stored owner")
                continue
            kept.append(cand)
        return kept

    def relations(self, relations: Sequence[Relation]) -> list[Relation]:
        """The relations that verify (or are the store's own event edges); the others are
        recorded as refused."""
        maybe_events = [r.from_id for r in relations if _is_event_edge(r)]
        from_entity = self.entity_verdicts(maybe_events)
        kept: list[Relation] = []
        for rel in relations:
            if _is_event_edge(rel) and from_entity[rel.from_id] == "not_entity":
                kept.append(rel)
            elif not isinstance(rel.properties.get(SIGNATURE_PROPERTY), str):
                self.refuse(rel.id, "unsigned", f"{_relation_label(rel)} carries no signature")
                self.refused_relations.add(rel.id)
            elif not verify_relation(rel, self.key):
                detail = f"{_relation_label(rel)}: its HMAC signature does not match"
                self.refuse(rel.id, "tampered", detail)
                self.refused_relations.add(rel.id)
            else:
                kept.append(rel)
        return kept


# the deepest a checked search goes for `top_k` verified hits (SearchConfig.top_k's bound)
_DEEPEST = 1000


def checked_search(
    cb: ComponentsSource,
    project_id: str,
    query: str,
    config: SearchConfig,
    filters: ItemFilter | None,
    check: SignatureCheck,
) -> SearchResponse:
    """A search that follows only verified relations and returns only units that may be
    served (require_signature); `tampered` names what failed."""
    cb = components_of(cb)
    # The ranking cuts at top_k before what it returns is checked: searched deeper while
    # the verified ones are fewer than asked and deeper holds more (else an unsigned or
    # tampered entity ranked above them took a verified hit's place).
    deeper = config
    while True:
        response = cb.searcher.search(
            project_id, query, deeper, filters, relation_filter=check.relations
        )
        kept = check.candidates(response.results)
        exhausted = len(response.results) < deeper.top_k or deeper.top_k >= _DEEPEST
        if len(kept) >= config.top_k or exhausted:
            break
        deeper = deeper.model_copy(update={"top_k": min(deeper.top_k * 4, _DEEPEST)})
    response.results = kept[: config.top_k]
    response.considered = check.candidates(response.considered)
    response.tampered = check.tampered
    response.unsigned = len(check.unsigned)
    return response


def filter_signed(
    candidates: Sequence[_C],
    key: bytes | str,
    store: Store,
    project_id: str,
    *,
    require_signature: bool = True,
) -> tuple[list[_C], list[str]]:
    """Drop search candidates whose entity fails its signature, or whose unit is not the
    signed entity's text: (kept, tampered ids).

    With `require_signature`, unsigned entities are dropped too (but not reported as
    tampered); events always pass. For the search or assembly layer to call on its results.
    """
    check = SignatureCheck(store, project_id, key)
    kept = check.candidates(candidates, require_signature=require_signature)
    return kept, check.tampered


def check_signed_write(stored: Entity | None, new: Entity) -> None:
    """Refuse a signed entity that would replace a version as new or newer (a replay).

    Writing the stored entity again unchanged (a retried request) is allowed.
    """
    if stored is None or SIGNATURE_PROPERTY not in new.properties:
        return
    if new.version > stored.version:
        return
    fields = ("type", "name", "text", "properties", "version")
    if all(getattr(stored, f) == getattr(new, f) for f in fields):
        return
    raise ConflictError(
        f"entity {new.id!r}: signed version {new.version} is not newer than the stored "
        f"version {stored.version}; a signed write must raise the version"
    )


def verify_results(
    cb: ComponentsSource,
    results: Sequence[_HasItem] | Any,
    key: bytes | str | None = None,
    *,
    project: str | None = None,
) -> list[str]:
    """Ids of entities among search results (a SearchResponse or candidates) that were
    tampered with; `key` defaults to the project's configured key."""
    cb = components_of(cb)
    pid = cb.resolve_project(project)
    resolved = project_key(pid, key)
    if resolved is None:
        raise ValueError(f"no HMAC key for project {pid!r}: pass one or set {key_env_var(pid)}")
    items = getattr(results, "results", results)
    _, tampered = filter_signed(list(items), resolved, cb.store, pid, require_signature=False)
    return tampered


def sign_stored_entities(
    cb: ComponentsSource, ids: Sequence[str], key: bytes | str, *, project: str | None = None
) -> int:
    """Sign entities already stored; their vectors are kept (signing changes no text)."""
    cb = components_of(cb)
    from .entities import restore_vectors, unit_vectors, write_entity

    pid = cb.resolve_project(project)
    entities = cb.store.get_entities(pid, list(ids), include_inactive=True)
    vectors = unit_vectors(cb, pid, entities)
    for entity in entities:
        write_entity(cb, signed_entity(entity, key), notify=False)
    restore_vectors(cb, pid, vectors)
    return len(entities)
