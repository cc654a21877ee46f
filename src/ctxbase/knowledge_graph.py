"""Events, entities and the relations between them (`GraphMethods`, mixed into
ContextBase): reading events and walking the event graph (causes, effects, neighbourhood),
creating and reading typed entities, and the relations that link any two nodes.

Entities are written with their search units (retrieve.indexing); a signed entity cannot be
written back at an older version (anchor.signing). A relation's missing source is the
base's own identity, and both of its ends must exist unless the caller says otherwise.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .aliases import EdgeArgs, EntityArgs, edge_args, entity_args, identity_source
from .errors import ConflictError, NotFoundError, ValidationError
from .known_projects import check_known_project
from .model import Entity, Event, Relation, check_id, id_arg, make_entity_id, relation_id_for
from .read_your_writes import settles_captures
from .retrieve import causes, graph
from .retrieve.retracted import with_marks
from .search_filters import check_repos_held
from .validation import (
    check_entity_properties,
    check_finite,
    check_int64,
    check_json,
    check_name,
    check_names,
    check_text,
    constraint_words,
    is_blank,
)

if TYPE_CHECKING:
    from .components import Components
    from .store.base import Store

__all__ = ["MAX_NEIGHBOURHOOD_HOPS", "GraphMethods"]

# A neighbourhood's hop count: each hop can multiply the nodes read, so one call stays small.
MAX_NEIGHBOURHOOD_HOPS = 5


class GraphMethods:
    """Mixed into `ContextBase`: it supplies `store`, `components`, `agent_id`, `_pid`,
    `_after_write`, `_caught_up` and `_settle` (an event captured a moment ago is found:
    read_your_writes)."""

    store: Store
    components: Components
    project: str
    agent_id: str | None

    def _pid(self, project: str | None) -> str:
        raise NotImplementedError

    def _after_write(self) -> None:
        raise NotImplementedError

    def _caught_up(self) -> None:
        raise NotImplementedError

    def _settle(self, ids: Sequence[str]) -> bool:
        raise NotImplementedError

    # -- events and the event graph ----------------------------------------------------
    @settles_captures
    def get_event(
        self, event_id: str, *, project: str | None = None, include_inactive: bool = False
    ) -> Event:
        """One event, with its `marks` (retracted, rated wrong)."""
        event_id = id_arg("event_id", event_id)
        event = self.components.get_event(
            event_id, project=project, include_inactive=include_inactive
        )
        return with_marks(self.store, event.project_id, [event])[0]

    def last_events(
        self, session_id: str, n: int = 20, *, project: str | None = None
    ) -> list[Event]:
        """The last n events of a session, oldest first (those captured before the call
        included), each with its `marks` (a retracted message, one rated wrong).
        NotFoundError for a session the project does not have (as the timeline and
        `ctxbase events` say), not an empty list."""
        session_id = id_arg("session_id", session_id)
        n = check_int64("n", n)  # 10**30 is an error, not a crash in the database driver
        if n < 0:
            raise ValidationError("n", "must be >= 0")
        self._caught_up()
        pid = self._pid(project)
        events = self.store.list_events(pid, session_id, last_n=n)
        if not events and self.store.get_session(pid, session_id) is None:
            raise NotFoundError("session", session_id)
        return with_marks(self.store, pid, events)

    @settles_captures
    def causal_chain(self, event_id: str, *, project: str | None = None) -> list[Event]:
        """Everything upstream of an event (its causes, their causes...), nearest first.
        A cause soft-deleted is shown by a placeholder marked "hidden" (no text, data or
        metadata) and the chain goes on through it; one hard-forgotten is a placeholder
        marked "forgotten" (or "missing" when not even its tombstone is known) where the
        chain ends (retrieve/causes.py). NotFoundError for an unknown event, saying when it
        is hidden (restore brings it back) or was forgotten."""
        event_id = id_arg("event_id", event_id)
        pid = self._pid(project)
        root = causes.check_chain_root(self.store, pid, event_id)
        return causes.causal_chain(self.store, pid, root)

    @settles_captures
    def effects(self, event_id: str, *, project: str | None = None) -> list[Event]:
        """Everything downstream of an event (what it caused, theirs...), nearest first. An
        effect soft-deleted is shown by a placeholder marked "hidden" (no text, data or
        metadata) and the walk goes on through it, as `causal_chain` does (retrieve/causes.py).
        NotFoundError for an unknown event, saying when it is hidden or was forgotten."""
        event_id = id_arg("event_id", event_id)
        pid = self._pid(project)
        root = causes.check_chain_root(self.store, pid, event_id)
        return causes.effects(self.store, pid, root)

    @settles_captures
    def neighbourhood(
        self,
        node_id: str,
        k: int = 1,
        *,
        project: str | None = None,
        types: Sequence[str] | None = None,
    ) -> list[graph.GraphHit]:
        """Nodes within `k` hops (0 to MAX_NEIGHBOURHOOD_HOPS) of a node, with the edge that
        reached each. NotFoundError when the node is no event or entity of the project and
        no relation touches it."""
        if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k <= MAX_NEIGHBOURHOOD_HOPS:
            raise ValidationError(
                "k", f"must be an integer from 0 to {MAX_NEIGHBOURHOOD_HOPS} (got {k!r})"
            )
        check_id("node_id", node_id)
        check_names("types", types)
        pid = self._pid(project)
        hits = graph.neighbourhood(self.store, pid, node_id, k, types)
        known = bool(hits) or bool(self.store.existing_ids(pid, [node_id]))
        # a relation may name an id that is no stored node (check_nodes=False)
        if not known and not self.store.list_relations(pid, [node_id], include_closed=True):
            raise NotFoundError("node", node_id)
        return hits

    # -- entities and relations ----------------------------------------------------------
    def upsert_entity(
        self,
        type: str | None = None,
        name: str | None = None,
        text: str = "",
        *,
        id: str | None = None,
        properties: Mapping[str, Any] | None = None,
        project: str | None = None,
        version: int | None = None,
        keep_history: bool = True,
        entity_type: str | None = None,
        entity_id: str | None = None,
    ) -> Entity:
        """Create or update a typed entity (document, code, sql, requirement, ...).

        Seed 000's spelling works too: `entity_type`, `entity_id`, and the text given as
        ``properties["content"]``; an entity without a name is named by its id.

        A write that changes the type, name, text or properties raises `version` by one
        (or to the `version` given) and keeps the previous version as ``<id>@v<n>``
        (latest=False: out of searches and assemblies), linked ``<id> -MODIFIES-> <id>@v<n>``
        as ingested units are (anchor/entities.py). The same content again changes nothing.
        A document whose title (without its version) is another current document's, under
        another id, supersedes it, or is superseded by it when its title's version is older
        (anchor/same_name.py): one of them is served, the other kept as history.
        `keep_history=False` overwrites in place instead (the version stays unless given),
        as a key-value put does.

        `version` makes the write conditional (optimistic concurrency): one older than the
        stored version, or equal to it with other content, is a ConflictError naming the
        stored version; read the entity again and send that version + 1. A signed entity
        (properties["_sig"]) must carry a version greater than the stored one: ConflictError
        otherwise (an older signed version written back is a replay)."""
        return self._put_entity(
            entity_args(
                type, name, text, id, properties, entity_type=entity_type, entity_id=entity_id
            ),
            project,
            version,
            keep_history=keep_history,
            checked=True,
        )

    def _upsert_entity_in_place(
        self,
        type: str | None = None,
        name: str | None = None,
        text: str = "",
        *,
        id: str | None = None,
        properties: Mapping[str, Any] | None = None,
        project: str | None = None,
        version: int | None = None,
    ) -> Entity:
        """The write the layers below get (Components.upsert_entity): anchoring, the LangGraph
        store and the outcome loop keep their own versions, so this one overwrites in place
        and takes `version` as given (signed entities are still checked for replays)."""
        args = entity_args(type, name, text, id, properties)
        return self._put_entity(args, project, version, keep_history=False, checked=False)

    def _put_entity(
        self,
        args: EntityArgs,
        project: str | None,
        version: int | None,
        *,
        keep_history: bool,
        checked: bool,
    ) -> Entity:
        pid = self._pid(project)
        type, name, properties = args.type, args.name, args.properties
        if not isinstance(type, str) or is_blank(type):
            raise ValidationError("type", "an entity needs a type")
        if not isinstance(name, str) or is_blank(name):
            raise ValidationError("name", "an entity needs a name")
        if not checked:
            # a name the layers below derive from text (a message's code block, a decision):
            # its NUL becomes U+FFFD, as PostgreSQL keeps text, not a failed anchoring
            type, name = _without_nul(type), _without_nul(name)
        check_name("type", type)
        check_name("name", name)
        check_entity_properties(dict(properties or {}))
        if version is not None and check_int64("version", version) < 1:
            raise ValidationError("version", "must be >= 1")
        body = check_text("text", args.text) or ""
        eid = check_id("id", args.id) if args.id is not None else make_entity_id(type, name)
        draft = Entity(
            id=eid,
            project_id=pid,
            type=type,
            name=name,
            text=body,
            properties=dict(properties or {}),
            version=version or 1,
        )
        if not checked:
            stored = self._write_entity(draft, version, keep_history=False, checked=False)
        else:
            # The stored version is read and replaced in one transaction that another writer
            # of the same entity waits for: of two racing writes, the second sees the first.
            with self.store.transaction():
                self.store.hold_key(pid, f"entity:{eid}")
                stored = self._write_entity(draft, version, keep_history=keep_history, checked=True)
                if keep_history:  # "Redis 规范" again under a new id: one of them is current
                    from .anchor.same_name import supersede_same_name

                    stored = supersede_same_name(self.components, stored)
        self._after_write()
        return stored

    def _write_entity(
        self, draft: Entity, version: int | None, *, keep_history: bool, checked: bool
    ) -> Entity:
        found = self.store.get_entities(draft.project_id, [draft.id], include_inactive=True)
        old = found[0] if found else None
        entity = draft.model_copy(
            update={
                "version": version if version is not None else (old.version if old else 1),
                "created_at": old.created_at if old else time.time(),
            }
        )
        from .anchor.signing import check_signed_write

        check_signed_write(old, entity)  # no replay of a signed version
        same = old is not None and _same_content(old, entity)
        if checked and old is not None and version is not None:
            _check_version(old, version, same)
        if old is None or not keep_history:
            return self._store_entity(entity)
        if same and old.active and old.latest and (version is None or version <= old.version):
            return old  # the same content again: nothing to write
        if same:  # shown again (or asked a higher version) with no new content: no new copy
            return self._store_entity(entity)
        if version is None:
            entity = entity.model_copy(update={"version": old.version + 1})
        return self._store_new_version(old, entity)

    def _store_entity(self, entity: Entity) -> Entity:
        return self.store.upsert_entity(entity, self.components.entity_items(entity))

    def _store_new_version(self, old: Entity, entity: Entity) -> Entity:
        """Write `entity` over `old`, keeping `old` as `<id>@v<n>` as ingest does."""
        from .anchor.entities import archive_version, chain_versions, unit_vectors

        if not old.active:  # a hidden entity is written over, as ingest writes over one
            return self._store_entity(entity)
        now = time.time()
        vectors = unit_vectors(self.components, old.project_id, [old])
        archived = archive_version(self.components, old, now=now, vectors=vectors)
        stored = self._store_entity(entity.model_copy(update={"updated_at": now}))
        chain_versions(self.components, old.project_id, old.id, archived, old.version)
        return stored

    def get_entity(self, entity_id: str, *, project: str | None = None) -> Entity:
        return self.components.get_entity(entity_id, project=project)

    def list_entities(
        self,
        *,
        type: str | None = None,
        name: str | None = None,
        latest_only: bool = True,
        project: str | None = None,
        limit: int | None = None,
        repos: Sequence[str] = (),
        new_project: bool = False,
    ) -> list[Entity]:
        """Active entities by type and name (the latest versions unless `latest_only` is
        False); `repos` keeps those of these ingested repositories (one the project does not
        hold is UnknownReposError, as in a search). Another project than
        the base's own that holds no data is a typo (UnknownProjectError) unless
        `new_project`."""
        check_name("type", type)
        check_name("name", name)
        if limit is not None and check_int64("limit", limit) < 1:
            raise ValidationError("limit", f"must be at least 1, or None for all (got {limit})")
        pid = check_known_project(self.store, self.project, self._pid(project), new_project)
        found = self.store.list_entities(
            pid,
            type=type,
            name=name,
            latest_only=latest_only,
            limit=limit,
            repos=repos,
        )
        if repos:  # a mistyped repository is an error, not an empty list
            check_repos_held(self.store, pid, repos, {e.properties.get("repo") for e in found})
        return found

    def upsert_relationship(
        self,
        from_id: str | None = None,
        type: str | None = None,
        to_id: str | None = None,
        *,
        source: str | None = None,
        confidence: float | None = None,
        properties: Mapping[str, Any] | None = None,
        project: str | None = None,
        check_nodes: bool = True,
        edge_type: str | None = None,
    ) -> Relation:
        """Create or update the edge (from, type, to); never a duplicate open edge. Written
        again with another confidence, source or properties, the edge is updated and its
        earlier assertion kept as a closed copy ``<relation id>@<n>`` (valid_to: when it
        was replaced), read with ``relationships(..., include_closed=True)``.

        Seed 000's spelling works too: `edge_type`, positional ``(from_id, to_id, type)``,
        confidence and source inside `properties`. Without a source, this base's identity
        (``agent:<agent_id>``, else the local user) is the source: it is never empty."""
        args = edge_args(
            from_id,
            type,
            to_id,
            edge_type=edge_type,
            source=source,
            confidence=confidence,
            properties=properties,
            identity=identity_source(self.agent_id),
        )
        return self._put_relationship(args, project, check_nodes, keep_history=True)

    def _upsert_relationship_in_place(
        self,
        from_id: str | None = None,
        type: str | None = None,
        to_id: str | None = None,
        *,
        source: str | None = None,
        confidence: float | None = None,
        properties: Mapping[str, Any] | None = None,
        project: str | None = None,
        check_nodes: bool = True,
    ) -> Relation:
        """The edge write the layers below get (Components.upsert_relationship): anchoring
        re-weighs its own edges as it learns, so it updates them in place."""
        args = edge_args(
            from_id,
            type,
            to_id,
            edge_type=None,
            source=source,
            confidence=confidence,
            properties=properties,
            identity=identity_source(self.agent_id),
        )
        return self._put_relationship(args, project, check_nodes, keep_history=False)

    def _put_relationship(
        self, args: EdgeArgs, project: str | None, check_nodes: bool, *, keep_history: bool
    ) -> Relation:
        pid = self._pid(project)
        check_id("from_id", args.from_id)
        check_id("to_id", args.to_id)
        check_json("properties", args.properties)
        try:  # checked before the store is read with the type
            rel = Relation(
                project_id=pid,
                from_id=args.from_id,
                type=args.type,
                to_id=args.to_id,
                confidence=1.0 if args.confidence is None else args.confidence,
                source=args.source,
                properties=args.properties,
            )
        except Exception as exc:
            raise _as_validation(exc) from exc
        if args.confidence is None:  # the edge's own confidence, when it is asserted again
            existing = self.store.list_relations(
                pid, [args.from_id], direction="out", types=[args.type]
            )
            same = [r for r in existing if r.to_id == args.to_id]
            if same:
                rel = rel.model_copy(update={"confidence": same[0].confidence})
        if check_nodes:
            ends = [args.from_id, args.to_id]
            missing = set(ends) - self.store.existing_ids(pid, ends)
            if missing and self._settle(sorted(missing)):  # an event captured just before
                missing = set(ends) - self.store.existing_ids(pid, ends)
            for field, node in (("from_id", args.from_id), ("to_id", args.to_id)):
                if node in missing:
                    raise ValidationError(field, f"{node!r} does not exist in project {pid!r}")
        if not keep_history:
            return self.store.upsert_relations([rel])[0]
        rid = relation_id_for(pid, rel.from_id, rel.type, rel.to_id)
        with self.store.transaction():  # two writers of one edge keep both assertions
            self.store.hold_key(pid, f"relation:{rid}")
            replaced_at = self._keep_assertion(pid, rid, rel)
            if replaced_at is not None:
                rel = rel.model_copy(update={"valid_from": replaced_at})
            return self.store.upsert_relations([rel])[0]

    def _keep_assertion(self, pid: str, rid: str, new: Relation) -> float | None:
        """Before an open edge is asserted with another confidence, source or properties,
        its current assertion is copied as `<id>@<n>`, closed now; returns when (None when
        nothing changed)."""
        outgoing = self.store.list_relations(pid, [new.from_id], direction="out", types=[new.type])
        current = next((r for r in outgoing if r.id == rid), None)
        if current is None:
            return None
        what = ("confidence", "source", "properties")
        if all(getattr(current, f) == getattr(new, f) for f in what):
            return None
        now = time.time()
        closed = self.store.list_relations(
            pid, [new.from_id], direction="out", types=[new.type], include_closed=True
        )
        n = 1 + sum(1 for r in closed if r.id.startswith(f"{rid}@"))
        copy = current.model_copy(update={"id": f"{rid}@{n}", "valid_to": now})
        self.store.upsert_relations([copy])
        self.store.close_relation(pid, rid, now)  # the new assertion is valid from now
        return now

    create_edge = upsert_relationship

    def close_relationship(
        self, relation_id: str, *, project: str | None = None, at: float | None = None
    ) -> bool:
        """Mark a relation as superseded: it is kept, with its validity closed. False when
        it was closed before; NotFoundError when the project holds no such relation."""
        when = time.time() if at is None else check_finite("at", at)
        pid = self._pid(project)
        if self.store.close_relation(pid, relation_id, when):
            return True
        if not self.store.has_relation(pid, relation_id):  # a typo must not pass for done
            raise NotFoundError("relation", relation_id)
        return False

    def relationships(
        self,
        node_id: str | None = None,
        *,
        direction: str = "both",
        types: Sequence[str] | None = None,
        include_closed: bool = False,
        project: str | None = None,
    ) -> list[Relation]:
        check_names("types", types)
        if direction not in ("out", "in", "both"):  # bad input, as over REST
            raise ValidationError("direction", f"must be one of out, in, both (got {direction!r})")
        return self.store.list_relations(
            self._pid(project),
            None if node_id is None else [node_id],
            direction=direction,
            types=types,
            include_closed=include_closed,
        )


def _without_nul(text: str) -> str:
    return text.replace("\x00", "\ufffd")


def _same_content(old: Entity, new: Entity) -> bool:
    """Whether a write holds what is stored: type, name, text and properties (a signature
    aside: it signs the version too)."""

    def unsigned(e: Entity) -> dict[str, Any]:
        return {k: v for k, v in e.properties.items() if k != "_sig"}

    fields = ("type", "name", "text")
    return all(getattr(old, f) == getattr(new, f) for f in fields) and unsigned(old) == unsigned(
        new
    )


def _check_version(old: Entity, version: int, same: bool) -> None:
    """A conditional write: refused when it was made from a version older than the stored
    one (another writer got there first)."""
    if version > old.version or (version == old.version and same):
        return
    why = "is older" if version < old.version else "holds other content"
    conflict = ConflictError(
        f"entity {old.id!r} is at version {old.version}, and version={version} {why}: "
        f"another write came first; read it again and send version={old.version + 1} "
        "with your change (or no version to write over it)"
    )
    conflict.field = "version"
    raise conflict


def _as_validation(exc: Exception) -> ValidationError:
    if isinstance(exc, ValidationError):
        return exc
    errors = getattr(exc, "errors", None)
    if callable(errors):
        err = errors()[0]
        ctx_error = err.get("ctx", {}).get("error")
        if isinstance(ctx_error, ValidationError):
            return ctx_error
        words = constraint_words(err) or str(err["msg"])
        return ValidationError(".".join(str(p) for p in err["loc"]), words)
    return ValidationError("input", str(exc))
