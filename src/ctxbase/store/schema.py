"""Schema migrations for every backend, from one place.

Each migration is a list of statements in a neutral dialect with a few placeholders that
backends fill in ({json}, {blob}, {float}, {vector}); statements that only make sense for one
backend (FTS5 tables, tsvector columns, vector indexes) come from the backend's own list.
Every table's primary key starts with project_id, so a distributed PostgreSQL can shard all
tables by project with co-location.
"""

from __future__ import annotations

import logging

from ..errors import StorageError
from .base import SCHEMA_VERSION, TOOL_CALL_TEXTS

__all__ = [
    "COLUMNS",
    "FORGET_TABLES",
    "GLOBAL_TABLES",
    "JSON_COLUMNS",
    "KEYS",
    "MIGRATIONS",
    "TABLES",
    "UPGRADE_PREFIX",
    "VERSION_TABLE",
    "note_upgrade",
    "pending_migrations",
    "render",
]

# Where a store says it upgraded a database (a WARNING: an upgraded database no longer opens
# with the ctxbase that wrote it, so a user hears of it; without logging configured Python
# prints it on stderr).
log = logging.getLogger("ctxbase.store")

# meta keys of the upgrade steps still pending ("upgrade:<name>", base.TOOL_CALL_TEXTS).
UPGRADE_PREFIX = "upgrade:"

# Tables in the order a whole-project copy or forget walks them (children last).
TABLES = (
    "projects",
    "sessions",
    "tasks",
    "events",
    "entities",
    "relations",
    "items",
    "item_vectors",
    "state",
    "state_history",
    "traces",
    "tombstones",
)

# Tables a whole-project forget empties, children first (tombstones stay).
FORGET_TABLES = (
    "items",
    "item_vectors",
    "relations",
    "events",
    "entities",
    "state",
    "state_history",
    "traces",
    "event_aliases",
    "tasks",
    "sessions",
    "projects",
)

_V1 = [
    """CREATE TABLE IF NOT EXISTS projects (
        project_id TEXT NOT NULL,
        created_at {float} NOT NULL,
        settings {json},
        generation BIGINT NOT NULL DEFAULT 0,
        PRIMARY KEY (project_id))""",
    """CREATE TABLE IF NOT EXISTS sessions (
        project_id TEXT NOT NULL, session_id TEXT NOT NULL,
        status TEXT NOT NULL, title TEXT,
        created_at {float} NOT NULL, updated_at {float} NOT NULL,
        metadata {json}, last_seq BIGINT NOT NULL DEFAULT 0, last_event_id TEXT,
        PRIMARY KEY (project_id, session_id))""",
    """CREATE TABLE IF NOT EXISTS tasks (
        project_id TEXT NOT NULL, task_id TEXT NOT NULL, session_id TEXT NOT NULL,
        parent_task_id TEXT, title TEXT, status TEXT NOT NULL,
        created_at {float} NOT NULL, updated_at {float} NOT NULL, metadata {json},
        PRIMARY KEY (project_id, task_id))""",
    """CREATE TABLE IF NOT EXISTS events (
        project_id TEXT NOT NULL, event_id TEXT NOT NULL, session_id TEXT NOT NULL,
        task_id TEXT, seq BIGINT NOT NULL, agent_id TEXT NOT NULL, agent_role TEXT,
        type TEXT NOT NULL, text TEXT, data {json}, ts {float} NOT NULL,
        importance {float} NOT NULL, metadata {json}, active SMALLINT NOT NULL DEFAULT 1,
        PRIMARY KEY (project_id, event_id))""",
    "CREATE INDEX IF NOT EXISTS events_session_seq ON events (project_id, session_id, seq)",
    "CREATE INDEX IF NOT EXISTS events_ts ON events (project_id, ts)",
    """CREATE TABLE IF NOT EXISTS entities (
        project_id TEXT NOT NULL, entity_id TEXT NOT NULL, type TEXT NOT NULL,
        name TEXT NOT NULL, text TEXT, properties {json}, version BIGINT NOT NULL,
        latest SMALLINT NOT NULL DEFAULT 1, active SMALLINT NOT NULL DEFAULT 1,
        created_at {float} NOT NULL, updated_at {float} NOT NULL,
        PRIMARY KEY (project_id, entity_id))""",
    "CREATE INDEX IF NOT EXISTS entities_type_name ON entities (project_id, type, name)",
    """CREATE TABLE IF NOT EXISTS relations (
        project_id TEXT NOT NULL, relation_id TEXT NOT NULL, from_id TEXT NOT NULL,
        type TEXT NOT NULL, to_id TEXT NOT NULL, confidence {float} NOT NULL,
        source TEXT NOT NULL, created_at {float} NOT NULL, valid_from {float} NOT NULL,
        valid_to {float}, properties {json},
        PRIMARY KEY (project_id, relation_id))""",
    "CREATE INDEX IF NOT EXISTS relations_from ON relations (project_id, from_id, type)",
    "CREATE INDEX IF NOT EXISTS relations_to ON relations (project_id, to_id, type)",
    """CREATE TABLE IF NOT EXISTS items (
        project_id TEXT NOT NULL, item_id TEXT NOT NULL, owner_id TEXT NOT NULL,
        kind TEXT NOT NULL, type TEXT NOT NULL, text TEXT NOT NULL, terms TEXT NOT NULL,
        ts {float} NOT NULL, session_id TEXT, agent_id TEXT, agent_role TEXT, path TEXT,
        line_start BIGINT, line_end BIGINT, latest SMALLINT NOT NULL DEFAULT 1,
        importance {float} NOT NULL DEFAULT 0.5, active SMALLINT NOT NULL DEFAULT 1,
        embedded_model TEXT,
        context_terms TEXT NOT NULL DEFAULT '', context_id TEXT,
        context_hidden SMALLINT NOT NULL DEFAULT 0,
        PRIMARY KEY (project_id, item_id))""",
    "CREATE INDEX IF NOT EXISTS items_owner ON items (project_id, owner_id)",
    "CREATE INDEX IF NOT EXISTS items_pending ON items (embedded_model, active)",
    """CREATE TABLE IF NOT EXISTS item_vectors (
        project_id TEXT NOT NULL, item_id TEXT NOT NULL, model TEXT NOT NULL,
        dim INTEGER NOT NULL, vec {vector} NOT NULL,
        PRIMARY KEY (project_id, item_id, model))""",
    """CREATE TABLE IF NOT EXISTS state (
        project_id TEXT NOT NULL, scope TEXT NOT NULL, scope_id TEXT NOT NULL,
        key TEXT NOT NULL, value {json}, version BIGINT NOT NULL, cause TEXT,
        updated_at {float} NOT NULL,
        PRIMARY KEY (project_id, scope, scope_id, key))""",
    """CREATE TABLE IF NOT EXISTS state_history (
        project_id TEXT NOT NULL, scope TEXT NOT NULL, scope_id TEXT NOT NULL,
        key TEXT NOT NULL, version BIGINT NOT NULL, old_value {json}, new_value {json},
        cause TEXT, ts {float} NOT NULL, deleted SMALLINT NOT NULL DEFAULT 0,
        PRIMARY KEY (project_id, scope, scope_id, key, version))""",
    """CREATE TABLE IF NOT EXISTS traces (
        project_id TEXT NOT NULL, context_id TEXT NOT NULL, created_at {float} NOT NULL,
        trace {json} NOT NULL,
        PRIMARY KEY (project_id, context_id))""",
    # Hashes of hard-forgotten ids: a stale retry of a forgotten event must not bring it back,
    # and forgetting an event, entity or session again is "already forgotten". The kind is in
    # the value (rows.tombstone_hash): an event's is the bare digest, as it always was.
    """CREATE TABLE IF NOT EXISTS tombstones (
        project_id TEXT NOT NULL, hashed_id TEXT NOT NULL,
        PRIMARY KEY (project_id, hashed_id))""",
    """CREATE TABLE IF NOT EXISTS api_keys (
        key_id TEXT NOT NULL, key_hash TEXT NOT NULL, name TEXT, role TEXT NOT NULL,
        projects {json} NOT NULL, created_at {float} NOT NULL, revoked_at {float},
        PRIMARY KEY (key_id))""",
]

# version -> statements; append new versions, never edit a released one.
# v2: the embedding worker's pending-items read of one project by index; SQLite also counts
# vector removals for in-memory readers (sqlite_base).
_V2 = [
    "CREATE INDEX IF NOT EXISTS items_pending_project "
    "ON items (project_id, embedded_model, active)",
]
# v3: items.repo, the repository of an ingested entity's items (NULL for events and for items
# stored before); each backend adds the column in its own list, so a repeated upgrade is a no-op.
_V3: list[str] = []
# v4: structured filters by type (entities of some types, events of some types) read their
# items by index; without it each such search walked every item of the project.
_V4 = ["CREATE INDEX IF NOT EXISTS items_type ON items (project_id, type)"]
# v5: reads an assembly makes whose cost followed the project's size: the newest entities of
# a type (the project baseline), an agent's last context of a task (consensus), and a node's
# first relations of a type (graph hops bounded per node) read their rows by index. The
# relation indexes gain created_at and replace the v1 ones they extend. Also in v5: readers
# that keep a project's keyword index in memory append the items stored since their last
# read; each backend adds what tells them what changed in its own list.
_V5 = [
    "CREATE INDEX IF NOT EXISTS entities_recent ON entities (project_id, type, updated_at)",
    "CREATE INDEX IF NOT EXISTS traces_by_task "
    "ON traces (project_id, task_id, agent_role, created_at)",
    "CREATE INDEX IF NOT EXISTS relations_from_at ON relations (project_id, from_id, type, "
    "created_at)",
    "CREATE INDEX IF NOT EXISTS relations_to_at ON relations (project_id, to_id, type, created_at)",
    "DROP INDEX IF EXISTS relations_from",
    "DROP INDEX IF EXISTS relations_to",
]
# v6: in-memory keyword readers apply removals in place: per project, the change number of
# each row that left the keyword index (`seq`, a KeywordRow.seq) with the number taken when
# it left (`at`), so a reader asks for those after its marker. `seq` 0 marks where older
# entries were dropped (a reader behind it reloads). Each backend fills it by trigger.
_V6 = [
    "CREATE TABLE IF NOT EXISTS keyword_removed ("
    "project_id TEXT NOT NULL, at BIGINT NOT NULL, seq BIGINT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS keyword_removed_at ON keyword_removed (project_id, at)",
]
# v7: no new tables; each backend rewrites the items' terms in Python (the characters of
# their Chinese words as terms too, ctxbase.cjk_terms), which SQL alone cannot do.
_V7: list[str] = []
# v8: assistant messages made only of tool calls were stored with no text and the data
# {"tool_calls": n}, which was their search text; they now read as their calls. Rendering
# and indexing are above the store: the step is recorded pending (base.TOOL_CALL_TEXTS), and
# only when some event may need it, so a store without any skips it for one read.
_V8 = [
    f"INSERT INTO meta(key, value) SELECT '{UPGRADE_PREFIX}{TOOL_CALL_TEXTS}', '1' "
    "WHERE EXISTS (SELECT 1 FROM events WHERE type = 'assistant_message' "
    "AND (text IS NULL OR text = '') AND data IS NOT NULL AND active = 1) "
    f"AND NOT EXISTS (SELECT 1 FROM meta WHERE key = '{UPGRADE_PREFIX}{TOOL_CALL_TEXTS}')",
]
# v9: tombstones.forgotten_at, when the id was last forgotten (NULL for those kept before):
# a copy from a backup tells a session's forgotten life from the one it began when written
# to again (copy_filter). Each backend adds the column in its own list.
_V9: list[str] = []
# v10: the events stored but not yet anchored (capture anchoring runs off the writer's
# thread): written with the events, deleted once anchored, so the next base opened on the
# project anchors what a process left at exit (anchor/capture_anchor.py). Bookkeeping, not
# data: not in TABLES (a copy carries it apart: store/transfer.py).
_V10 = [
    "CREATE TABLE IF NOT EXISTS anchor_backlog ("
    "project_id TEXT NOT NULL, event_id TEXT NOT NULL, PRIMARY KEY (project_id, event_id))",
]
# v11: the ids of the events the capture bus merged into an aggregated one (the parts of
# its data["aggregated"] other than its own, rows.merged_ids) name it: a read, a parent
# link or a chain of such an id resolves to the stored event. Written with the event,
# removed with it; not copied by migrate-data (an import of the events rebuilds it). Each
# backend fills it from the events already stored in its own list.
_V11 = [
    """CREATE TABLE IF NOT EXISTS event_aliases (
        project_id TEXT NOT NULL, alias_id TEXT NOT NULL, event_id TEXT NOT NULL,
        PRIMARY KEY (project_id, alias_id))""",
    "CREATE INDEX IF NOT EXISTS event_aliases_event ON event_aliases (project_id, event_id)",
]
# v12: state.ttl and state_history.ttl, a fact's time to live in seconds (NULL: none): a
# fact not written again within it is out of what serves prompts (assemble/state.py). Each
# backend adds the columns in its own list.
_V12: list[str] = []
MIGRATIONS: dict[int, list[str]] = {
    1: _V1, 2: _V2, 3: _V3, 4: _V4, 5: _V5, 6: _V6, 7: _V7, 8: _V8, 9: _V9, 10: _V10, 11: _V11,
    12: _V12,
}  # fmt: skip

# The version table, the same in every backend: one row, key 'schema_version'.
VERSION_TABLE = "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)"

# Tables that are not keyed by project (a distributed database keeps them as reference tables).
GLOBAL_TABLES = ("meta", "api_keys")

# Columns of each project-keyed table in a neutral order: what a copy between backends moves.
COLUMNS: dict[str, tuple[str, ...]] = {
    "projects": ("project_id", "created_at", "settings", "generation"),
    "sessions": (
        "project_id", "session_id", "status", "title", "created_at", "updated_at",
        "metadata", "last_seq", "last_event_id",
    ),
    "tasks": (
        "project_id", "task_id", "session_id", "parent_task_id", "title", "status",
        "created_at", "updated_at", "metadata",
    ),
    "events": (
        "project_id", "event_id", "session_id", "task_id", "seq", "agent_id", "agent_role",
        "type", "text", "data", "ts", "importance", "metadata", "active",
    ),
    "entities": (
        "project_id", "entity_id", "type", "name", "text", "properties", "version", "latest",
        "active", "created_at", "updated_at",
    ),
    "relations": (
        "project_id", "relation_id", "from_id", "type", "to_id", "confidence", "source",
        "created_at", "valid_from", "valid_to", "properties",
    ),
    "items": (
        "project_id", "item_id", "owner_id", "kind", "type", "text", "terms", "ts",
        "session_id", "agent_id", "agent_role", "path", "line_start", "line_end", "latest",
        "importance", "active", "embedded_model", "context_terms", "context_id",
        "context_hidden", "repo",
    ),
    "item_vectors": ("project_id", "item_id", "model", "dim", "vec"),
    "state": (
        "project_id", "scope", "scope_id", "key", "value", "version", "cause", "updated_at",
        "ttl",
    ),
    "state_history": (
        "project_id", "scope", "scope_id", "key", "version", "old_value", "new_value",
        "cause", "ts", "deleted", "ttl",
    ),
    "traces": (
        "project_id", "context_id", "created_at", "trace", "agent_role", "session_id", "task_id",
    ),
    "tombstones": ("project_id", "hashed_id", "forgotten_at"),
}  # fmt: skip

# The primary key of each project-keyed table, after project_id: what names one row (a copy
# finds the destination's row of a source row by it).
KEYS: dict[str, tuple[str, ...]] = {
    "projects": (),
    "sessions": ("session_id",),
    "tasks": ("task_id",),
    "events": ("event_id",),
    "entities": ("entity_id",),
    "relations": ("relation_id",),
    "items": ("item_id",),
    "item_vectors": ("item_id", "model"),
    "state": ("scope", "scope_id", "key"),
    "state_history": ("scope", "scope_id", "key", "version"),
    "traces": ("context_id",),
    "tombstones": ("hashed_id",),
}

# Columns holding JSON: exported as Python values, stored as each backend's JSON type.
JSON_COLUMNS = frozenset(
    {"settings", "metadata", "data", "properties", "value", "old_value", "new_value", "trace"}
)


def render(statement: str, *, json: str, blob: str, float_: str, vector: str | None = None) -> str:
    """Fill the dialect placeholders; `vector` (the embedding column type) defaults to blob."""
    return statement.format(json=json, blob=blob, float=float_, vector=vector or blob)


def pending_migrations(current: int) -> list[int]:
    """The versions of MIGRATIONS a database at schema version `current` still needs, in
    order; StorageError when the database is newer than this ctxbase."""
    if current > SCHEMA_VERSION:
        raise StorageError(
            f"database schema version {current} is newer than this ctxbase "
            f"({SCHEMA_VERSION}); upgrade ctxbase"
        )
    return [version for version in sorted(MIGRATIONS) if version > current]


def note_upgrade(where: str, old: int, new: int) -> None:
    """Say (one WARNING on the `ctxbase.store` logger) that the database `where` names was
    upgraded from schema `old` to `new`. A new database (`old` 0) is not an upgrade."""
    if 0 < old < new:
        log.warning(
            "upgraded %s from schema %d to %d; older versions of ctxbase cannot open it",
            where,
            old,
            new,
        )
