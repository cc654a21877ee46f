"""Row -> model converters and pure write-side rules shared by every backend.

Both backends select the same column orders (`EVENT_COLS`, `ITEM_COLS` and the SELECT lists
of the store modules). JSON columns arrive as text from SQLite and as Python values from
psycopg: each converter takes the backend's `load` for them (identity by default).
Nothing here opens a connection or writes SQL.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any

from ..errors import ValidationError
from ..model import Entity, Event, Relation, SessionInfo, StateFact, TaskInfo
from .base import KeywordRow, TombstoneKind
from .records import ApiKeyRecord, SearchItem, StateChange

__all__ = [
    "ALIAS_INSERT",
    "EVENT_COLS",
    "EVENT_EDGE_SOURCE",
    "ITEM_COLS",
    "KEYWORD_ROW_COLS",
    "Load",
    "api_key_row",
    "as_is",
    "check_direction",
    "check_event_ids",
    "check_per_node",
    "deliberate_sql",
    "entity_row",
    "event_edges",
    "event_links",
    "event_row",
    "generation_key",
    "import_aliases",
    "is_deliberate",
    "item_row",
    "keyword_rows",
    "merged_ids",
    "next_version",
    "relation_row",
    "session_row",
    "stamp",
    "state_change_row",
    "state_fact_row",
    "task_row",
    "tombstone_hash",
    "trace_keys",
    "types_at_node_sql",
    "without_forgotten_links",
]

EVENT_COLS = (
    "event_id, session_id, task_id, seq, agent_id, agent_role, type, text, data, ts, "
    "importance, metadata, active, project_id"
)
ITEM_COLS = (
    "item_id, owner_id, kind, type, text, terms, ts, session_id, agent_id, agent_role, "
    "path, line_start, line_end, latest, importance, context_terms, context_id, repo"
)

# What keyword_changes reads per item: the indexed terms (the context's only while it is
# shown), then the attributes filters read (see KeywordRow); each backend adds the row's
# change number last.
KEYWORD_ROW_COLS = (
    "item_id, terms, CASE WHEN context_hidden = 0 THEN context_terms ELSE '' END, "
    "kind, type, session_id, agent_id, agent_role, ts, latest"
)

# How a backend turns a stored JSON column into a Python value.
Load = Callable[[Any], Any]


def as_is(value: Any) -> Any:
    """The `load` of a driver that decodes JSON columns itself."""
    return value


def stamp(value: Any) -> float:
    """A stored time as a finite float. Versions before input validation could store NaN
    or Infinity (SQLite keeps NaN as NULL), which no JSON client can read back: such rows
    read as 0.0 (the epoch), a visible placeholder."""
    if value is None:
        return 0.0
    number = float(value)
    return number if math.isfinite(number) else 0.0


def tombstone_hash(item_id: str, kind: TombstoneKind = "event") -> str:
    """Tombstones keep only a hash, so a forgotten id leaves no readable trace. An event's
    is the bare hex digest (as every tombstone was before entities and sessions had them);
    any other kind's is prefixed with its kind ("session:<digest>", "repo:<digest>"), so the same
    id forgotten as two kinds keeps two tombstones and one never reads as the other (a
    digest is hex: no prefix can make it one)."""
    digest = hashlib.sha256(item_id.encode("utf-8")).hexdigest()
    return digest if kind == "event" else f"{kind}:{digest}"


def generation_key(row: Sequence[Any] | None) -> int:
    """`index_generation` from a project's (generation, created_at) row (None: no project).

    The write count offset by the creation time in microseconds: a whole-project forget
    drops the row, and the project written again counts from 0, so after as many writes the
    count alone would repeat the one a reader (another process) cached before the forget,
    and the reader would keep the forgotten rows and miss the new ones."""
    if not row:
        return 0
    return int(row[0]) + round(float(row[1]) * 1_000_000)


def next_version(last: Sequence[Any] | None) -> int:
    """A state fact's next version from the `max(version)` row of its history."""
    return int(last[0] or 0) + 1 if last else 1


def check_event_ids(events: Sequence[Event]) -> None:
    """Every event written has an id: an empty one would merge every id-less event of a
    batch into the first (the caller's layer assigns ids, see `ContextBase.record_events`)."""
    for i, event in enumerate(events):
        if not event.id:
            raise ValidationError(f"events[{i}].id", "is empty; an event is stored under an id")


def check_direction(direction: str) -> None:
    """list_relations' direction: "out" (from node), "in" (to node) or "both"."""
    if direction not in ("out", "in", "both"):
        raise ValueError(f"direction must be 'out', 'in' or 'both' (got {direction!r})")


def check_per_node(
    limit: int | None, node_ids: Sequence[str] | None, types: Sequence[str] | None
) -> None:
    """list_relations' limit_per_node: a count, with the nodes and types it applies to."""
    if limit is None:
        return
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise ValueError(f"limit_per_node must be a count >= 0 (got {limit!r})")
    if node_ids is None:
        raise ValueError("limit_per_node needs node_ids")
    if types is not None and not types:
        raise ValueError("limit_per_node needs types, or None for every type")


def types_at_node_sql(side: str, mark: str) -> str:
    """The relation types a node has on one side (`from_id` or `to_id`), read as a loose
    scan of the relations_*_at index: one probe per type, however many edges the node has.
    Arguments: project, node, project, node (`mark` is the dialect's placeholder)."""
    probe = f"SELECT min(type) FROM relations WHERE project_id={mark} AND {side}={mark}"
    return (
        f"WITH RECURSIVE t(type) AS (SELECT ({probe}) UNION ALL "
        f"SELECT ({probe} AND type > t.type) FROM t WHERE t.type IS NOT NULL) "
        "SELECT type FROM t WHERE type IS NOT NULL"
    )


# The source of the event-graph edges the store adds itself.
EVENT_EDGE_SOURCE = "auto:capture"
# Sources of the edges a rule inferred (anchor/weave.py: `auto:<rule>`, `ctxbase:<rule>`
# from capture anchoring or a model). Any other source is a person or an agent linking on
# purpose, and so is an event's REFERS_TO: a reference its caller named.
_INFERRED_PREFIXES = ("auto:", "ctxbase:")


def is_deliberate(rel: Relation) -> bool:
    """An edge someone created on purpose (list_relations' `deliberate_only`)."""
    if rel.source == EVENT_EDGE_SOURCE and rel.type == "REFERS_TO":
        return True
    return not rel.source.startswith(_INFERRED_PREFIXES)


def deliberate_sql(mark: str, alias: str = "") -> tuple[str, list[str]]:
    """The condition `is_deliberate` as SQL (`mark`: the dialect's placeholder, `alias`:
    the relations table's, with its dot) and its arguments."""
    src, typ = f"{alias}source", f"{alias}type"
    sql = (
        f" AND ({src} NOT LIKE {mark} AND {src} NOT LIKE {mark} OR ({src}={mark} AND {typ}={mark}))"
    )
    return sql, [*(f"{p}%" for p in _INFERRED_PREFIXES), EVENT_EDGE_SOURCE, "REFERS_TO"]


def import_aliases(rows: Sequence[Mapping[str, Any]]) -> list[tuple[str, str, str]]:
    """(project, alias, event) of the aggregated events among exported event rows."""
    return [
        (r["project_id"], alias, r["event_id"])
        for r in rows
        for alias in merged_ids(r["event_id"], r.get("data"), r.get("metadata"))
    ]


def event_links(event: Event, prev_id: str | None) -> list[tuple[str, str, str]]:
    """(from_id, type, to_id) of the event-graph edges a stored event adds: NEXT from the
    session's previous event, CAUSED_BY to each parent, REFERS_TO to each reference."""
    links: list[tuple[str, str, str]] = []
    if prev_id:
        links.append((prev_id, "NEXT", event.id))
    links += [(event.id, "CAUSED_BY", p) for p in event.parent_event_ids]
    links += [(event.id, "REFERS_TO", r) for r in event.refers_to]
    return links


# An aggregated event's aliases (merged_ids), written with it (`?` placeholders).
ALIAS_INSERT = (
    "INSERT INTO event_aliases(project_id, alias_id, event_id) VALUES (?,?,?) "
    "ON CONFLICT (project_id, alias_id) DO NOTHING"
)


def merged_ids(event_id: str, data: Any, metadata: Any) -> list[str]:
    """The ids of the events the capture bus merged into this stored one (its
    `data["aggregated"]` parts, data holding nothing else, counted in
    `metadata["aggregated_count"]`), its own left out: the aliases the store resolves to
    it. Any other event has none."""
    parts = data.get("aggregated") if isinstance(data, dict) and len(data) == 1 else None
    if not isinstance(parts, list) or not isinstance(metadata, dict):
        return []
    if len(parts) < 2 or metadata.get("aggregated_count") != len(parts):
        return []  # a burst is two events or more, all counted
    ids = (p.get("id") for p in parts if isinstance(p, dict))
    return list(dict.fromkeys(i for i in ids if isinstance(i, str) and i and i != event_id))


def without_forgotten_links(
    pairs: Sequence[tuple[Event, Sequence[SearchItem]]],
    tombstoned: Callable[[str, list[str]], set[str]],
) -> list[tuple[Event, Sequence[SearchItem]]]:
    """The events (with their units) without the parents and references their project
    forgot after the caller checked them and before the write (`tombstoned(project, ids)`,
    read under the write lock). A forget takes those edges from the events stored before
    it; one written after it must not bring them back."""
    gone: set[str] = set()
    for pid in dict.fromkeys(e.project_id for e, _ in pairs):
        named = (i for e, _ in pairs if e.project_id == pid for i in _links_of(e))
        if wanted := list(dict.fromkeys(named)):
            gone |= tombstoned(pid, wanted)
    return [(_without(e, gone), units) for e, units in pairs]


def _links_of(event: Event) -> tuple[str, ...]:
    return (*event.parent_event_ids, *event.refers_to)


def _without(event: Event, gone: Collection[str]) -> Event:
    if not gone or not set(_links_of(event)) & set(gone):
        return event
    return event.model_copy(
        update={
            "parent_event_ids": [p for p in event.parent_event_ids if p not in gone],
            "refers_to": [r for r in event.refers_to if r not in gone],
        }
    )


def event_edges(event: Event, prev_id: str | None) -> list[Relation]:
    """The event-graph edges of `event_links` as relations, created at the event's time
    (confidence 1, no properties, open)."""
    return [
        Relation(
            project_id=event.project_id,
            from_id=from_id,
            type=rtype,
            to_id=to_id,
            source=EVENT_EDGE_SOURCE,
            created_at=event.ts,
            valid_from=event.ts,
        )
        for from_id, rtype, to_id in event_links(event, prev_id)
    ]


def event_row(row: Sequence[Any], links: Sequence[Sequence[Any]], load: Load = as_is) -> Event:
    """An EVENT_COLS row with its (type, to_id) CAUSED_BY / REFERS_TO links, in order."""
    return Event(
        id=row[0],
        session_id=row[1],
        task_id=row[2],
        seq=row[3],
        agent_id=row[4],
        agent_role=row[5],
        type=row[6],
        text=row[7],
        data=load(row[8]),
        ts=stamp(row[9]),
        importance=row[10],
        metadata=load(row[11]) or {},
        active=bool(row[12]),
        project_id=row[13],
        parent_event_ids=[t for r, t in links if r == "CAUSED_BY"],
        refers_to=[t for r, t in links if r == "REFERS_TO"],
    )


def session_row(row: Sequence[Any], load: Load = as_is) -> SessionInfo:
    return SessionInfo(
        project_id=row[0],
        session_id=row[1],
        status=row[2],
        title=row[3],
        created_at=row[4],
        updated_at=row[5],
        metadata=load(row[6]) or {},
    )


def task_row(row: Sequence[Any], load: Load = as_is) -> TaskInfo:
    return TaskInfo(
        project_id=row[0],
        task_id=row[1],
        session_id=row[2],
        parent_task_id=row[3],
        title=row[4] or "",
        status=row[5],
        created_at=row[6],
        updated_at=row[7],
        metadata=load(row[8]) or {},
    )


def entity_row(row: Sequence[Any], load: Load = as_is) -> Entity:
    return Entity(
        project_id=row[0],
        id=row[1],
        type=row[2],
        name=row[3],
        text=row[4] or "",
        properties=load(row[5]) or {},
        version=row[6],
        latest=bool(row[7]),
        active=bool(row[8]),
        created_at=row[9],
        updated_at=row[10],
    )


def relation_row(row: Sequence[Any], load: Load = as_is, *, validate: bool = False) -> Relation:
    fields: dict[str, Any] = {
        "project_id": row[0],
        "id": row[1],
        "from_id": row[2],
        "type": row[3],
        "to_id": row[4],
        "confidence": row[5],
        "source": row[6],
        "created_at": stamp(row[7]),
        "valid_from": stamp(row[8]),
        "valid_to": row[9],
        "properties": load(row[10]) or {},
    }
    if validate:
        return Relation(**fields)
    # Rows were validated on the way in; skipping validation on the way out keeps graph
    # walks cheap.
    return Relation.model_construct(**fields)


def item_row(row: Sequence[Any]) -> SearchItem:
    return SearchItem(
        item_id=row[0],
        owner_id=row[1],
        kind=row[2],
        type=row[3],
        text=row[4],
        terms=row[5],
        ts=stamp(row[6]),
        session_id=row[7],
        agent_id=row[8],
        agent_role=row[9],
        path=row[10],
        line_start=row[11],
        line_end=row[12],
        latest=bool(row[13]),
        importance=row[14],
        context_terms=row[15] or "",
        context_id=row[16],
        repo=row[17],
    )


def api_key_row(row: Sequence[Any], load: Load = as_is) -> ApiKeyRecord:
    return ApiKeyRecord(
        key_id=row[0],
        key_hash=row[1],
        name=row[2],
        role=row[3],
        projects=tuple(load(row[4]) or ()),
        created_at=row[5],
        revoked_at=row[6],
    )


def state_fact_row(row: Sequence[Any], load: Load = as_is) -> StateFact:
    """project_id, scope, scope_id, key, value, version, cause, updated_at[, ttl]."""
    return StateFact(
        project_id=row[0],
        scope=row[1],
        scope_id=row[2],
        key=row[3],
        value=load(row[4]),
        version=row[5],
        cause=row[6],
        updated_at=row[7],
        ttl=row[8] if len(row) > 8 else None,
    )


def state_change_row(row: Sequence[Any], load: Load = as_is) -> StateChange:
    """key, scope, scope_id, version, old_value, new_value, cause, ts, deleted[, ttl]."""
    r = row
    ttl = r[9] if len(r) > 9 else None
    return StateChange(r[0], r[1], r[2], r[3], load(r[4]), load(r[5]), r[6], r[7], bool(r[8]), ttl)


def trace_keys(trace: Mapping[str, Any]) -> tuple[str | None, str | None, str | None]:
    """The columns a trace is found by: (agent_role, session_id, task_id)."""

    def key(name: str) -> str | None:
        value = trace.get(name)
        return value if isinstance(value, str) else None

    return key("agent_role"), key("session_id"), key("task_id")


def keyword_rows(rows: Iterable[Sequence[Any]]) -> list[KeywordRow]:
    """KeywordRows from rows selected as KEYWORD_ROW_COLS. Repeated attribute strings
    (a session's id on each of its events) are kept once: a million rows read at once
    would otherwise hold a copy of each per row."""
    seen: dict[str, str] = {}
    one = seen.setdefault

    def shared(value: str | None) -> str | None:
        return None if value is None else one(value, value)

    return [
        KeywordRow(
            r[0],
            r[1],
            r[2] or "",
            one(r[3], r[3]),
            one(r[4], r[4]),
            shared(r[5]),
            shared(r[6]),
            shared(r[7]),
            float(r[8]),
            bool(r[9]),
            int(r[10]) if len(r) > 10 else 0,
        )
        for r in rows
    ]
