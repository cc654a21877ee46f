"""What the layers under the facade use: the store, the embedder, the searcher, the default
project and the write paths the facade composes (capture, checked entity and edge writes).

`ContextBase` builds one `Components` and hands it to anchoring (anchor/) and assembly
(assemble/), so those layers never import the facade: the import graph has no circle. Their
public functions also take anything with a `components` attribute (a `ContextBase`), so
``ingest_path(cb, path)`` and ``ContextManager(cb)`` keep working.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from .errors import NotFoundError, ValidationError
from .model import check_id, id_arg
from .validation import check_query

if TYPE_CHECKING:  # types only: importing this module loads neither retrieval nor a backend
    from .model import Entity, Event, Relation
    from .retrieve.chunking import ChunkingConfig
    from .retrieve.config import SearchConfig
    from .retrieve.embed.base import Embedder
    from .retrieve.search import Searcher, SearchResponse
    from .store.base import ItemFilter, SearchItem, Store

__all__ = [
    "Components",
    "ComponentsSource",
    "HasComponents",
    "RecordEvent",
    "UpsertEntity",
    "UpsertRelationship",
    "components_of",
]


class RecordEvent(Protocol):
    """Synchronous capture: the event is stored (and queued for anchoring) on return."""

    def __call__(
        self,
        type: str,
        *,
        session_id: str,
        text: str | bytes | None = None,
        project: str | None = None,
        **fields: Any,
    ) -> Event: ...


class UpsertEntity(Protocol):
    """An entity write with the public API's checks (validation, signatures) that overwrites
    in place: the layers below keep versions themselves (anchor.entities.upsert_versioned),
    and a LangGraph put overwrites, so the public write's history and conditional
    `version` are not theirs."""

    def __call__(
        self,
        type: str | None = None,
        name: str | None = None,
        text: str = "",
        *,
        id: str | None = None,
        properties: Mapping[str, Any] | None = None,
        project: str | None = None,
        version: int | None = None,
    ) -> Entity: ...


class UpsertRelationship(Protocol):
    """An edge write with the public API's checks (both ends exist, a source is named) that
    updates an edge in place: anchoring re-weighs its own edges, with no copy of each
    earlier confidence as the public write keeps."""

    def __call__(
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
    ) -> Relation: ...


@dataclass(frozen=True)
class Components:
    """The parts of one context base, as the layers under the facade see them."""

    store: Store
    project: str  # the default project of calls that name none
    # the facade's searcher, made on first use: a base that never searches loads no retrieval
    get_searcher: Callable[[], Searcher]
    embedder: Embedder | None
    notify_embedder: Callable[[], None]  # wake the embedding worker after a direct write
    record: RecordEvent
    upsert_entity: UpsertEntity
    upsert_relationship: UpsertRelationship
    session_idle_timeout_s: float | None = None
    # how long texts are cut into search units (None: the defaults, 256 tokens overlapping 64)
    chunking: ChunkingConfig | None = None

    @property
    def components(self) -> Components:
        return self

    def entity_items(self, entity: Entity) -> list[SearchItem]:
        """The search units of an entity, its long text cut by this base's chunking."""
        from .retrieve.indexing import chunker_for, entity_items

        return entity_items(entity, chunker_for(self.chunking))

    @property
    def searcher(self) -> Searcher:
        return self.get_searcher()

    @property
    def embeds(self) -> bool:
        """Whether vectors are computed at all (False without an embedder)."""
        return self.embedder is not None

    def resolve_project(self, project: str | None = None) -> str:
        """The project a call addresses: the given one (checked) or the default."""
        return self.project if project is None else check_id("project", project)

    def get_event(
        self, event_id: str, *, project: str | None = None, include_inactive: bool = False
    ) -> Event:
        """One event; NotFoundError saying when it is hidden (restore brings it back: read
        it with `include_inactive`) or was hard-forgotten, as a chain asked of it says."""
        if not id_arg("event_id", event_id):
            raise ValidationError("event_id", "is empty")  # no event is stored without an id
        pid = self.resolve_project(project)
        found = self.store.get_events(pid, [event_id], include_inactive)
        if found:
            return found[0]
        from .retrieve.causes import missing_event, read_event

        # The id of an event merged into an aggregated one names that one. Hidden ones are
        # read too: what is not returned is said to be hidden.
        held = read_event(self.store, pid, event_id, include_inactive=True)
        if held is not None and held.merged_id is not None and (held.active or include_inactive):
            return held
        raise missing_event(self.store, pid, event_id, hidden=held is not None, found=held)

    def get_entity(self, entity_id: str, *, project: str | None = None) -> Entity:
        entity_id = id_arg("entity_id", entity_id)
        pid = self.resolve_project(project)
        found = self.store.get_entities(pid, [entity_id])
        if not found:
            message = None  # as an event says it: hidden, or forgotten, is no typo
            if self.store.get_entities(pid, [entity_id], include_inactive=True):
                message = f"entity {entity_id!r} is hidden (restore brings it back)"
            elif self.store.forgotten_ids(pid, [entity_id], ("entity",)):
                raise NotFoundError.forgotten("entity", entity_id)
            raise NotFoundError("entity", entity_id, message=message)
        return found[0]

    def search(
        self,
        query: str,
        *,
        config: SearchConfig,
        project: str | None = None,
        filters: ItemFilter | None = None,
    ) -> SearchResponse:
        """A search with the public API's input checks (no signature checks)."""
        check_query(query, filters)
        return self.searcher.search(self.resolve_project(project), query, config, filters)


class HasComponents(Protocol):
    """Anything that hands out its components: a `ContextBase`, or `Components` itself."""

    @property
    def components(self) -> Components: ...


ComponentsSource = Components | HasComponents


def components_of(source: ComponentsSource) -> Components:
    """The components of a context base (or the components given)."""
    return source if isinstance(source, Components) else source.components
