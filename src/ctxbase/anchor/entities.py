"""Typed entities from parsed units, and versioned upserts that keep superseded versions.

Entity types form an open registry: the built-in ones below, plus whatever a project adds with
`register_entity_type`. Relation types are open the same way (`register_relation_type`).

Versioning: the stable id of an entity (`make_entity_id(type, "path#qualname")`) always holds
the latest version, so every edge pointing at it follows the newest code or document. When
the content behind a stable id changes, the previous version is first copied to
`<id>@v<version>` with `latest=False` (its search units too, so `SearchConfig.latest_only`
hides them), then the stable id is rewritten with `version + 1` and an edge
`<id> -MODIFIES-> <id>@v<old>` (source `auto:version`) is added. The previous such edge is
moved to start from the archived copy, so the versions form a chain newest -> oldest. The
archived copy takes over the old vectors, so keeping history costs no embedding work.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from ..capture.events import check_json, check_text
from ..components import Components, ComponentsSource, components_of
from ..errors import ValidationError
from ..model import Entity, Relation, check_id, make_entity_id
from ..store.base import Store
from .parsed import ParsedUnit, ParseResult, thaw

__all__ = [
    "BUILTIN_ENTITY_TYPES",
    "BUILTIN_RELATION_TYPES",
    "EntitySpec",
    "VersionedWrite",
    "archive_version",
    "archived_id",
    "chain_versions",
    "content_hash",
    "entity_type_for_unit",
    "entity_types",
    "is_entity_type",
    "is_test_path",
    "read_vectors",
    "register_entity_type",
    "register_relation_type",
    "relation_types",
    "restore_vectors",
    "specs_from_result",
    "unit_entity_id",
    "unit_vectors",
    "upsert_versioned",
    "write_entity",
]

BUILTIN_ENTITY_TYPES: dict[str, str] = {
    "document": "a whole document: title, version, source path, key terms",
    "section": "the text under one heading of a document (or one chunk of a plain text)",
    "code": "a code symbol (module, class, function, method) or code chunk, with line range",
    "sql": "one SQL statement, with the tables it reads and writes",
    "table": "a SQL table or view, defined by CREATE TABLE / CREATE VIEW",
    "requirement": "what a user asked for, in a session",
    "decision": "a choice stated in a message (we decided / 决定 ...)",
    "mention": "a file, table, API route or person named in messages (properties.kind)",
    "test_case": "a test function or test class",
    "file": "one ingested file: content hash, parser, the units it holds",
}
BUILTIN_RELATION_TYPES: dict[str, str] = {
    "REFERENCES": "names or uses another node",
    "MODIFIES": "a newer version of a node (newest -> older)",
    "VALIDATES": "a test exercising code",
    "FOLLOWS": "a requirement citing a document it must follow",
    "GENERATES": "produced code (an event or a requirement's session)",
    "MUST_CACHE": "a document requiring that code caches its results",
    "CALLS": "code calling a function",
    "IMPORTS": "code importing a module or a name",
    "INHERITS": "a class extending another",
    "CONTAINS": "a file or document holding a unit",
    "MENTIONS": "an event naming a file, table, API route or person",
}
_entity_types: dict[str, str] = dict(BUILTIN_ENTITY_TYPES)
_relation_types: dict[str, str] = dict(BUILTIN_RELATION_TYPES)
_registry_lock = threading.Lock()

# Unit kinds -> the entity type they are stored as (test code is decided by its path).
_UNIT_TYPES = {
    "module": "code",
    "class": "code",
    "function": "code",
    "method": "code",
    "sql_statement": "sql",
    "table": "table",
    "view": "table",
    "document": "document",
    "section": "section",
    "code_block": "code",
    "text_chunk": "section",
}
_TEST_PATH = re.compile(r"(^|/)(tests?|testing|__tests__|spec)/|(^|/)test_[^/]*$|_test\.\w+$")


def register_entity_type(name: str, description: str = "") -> None:
    """Allow a new entity type (e.g. "api_endpoint"); names are lower_snake_case."""
    if not isinstance(name, str) or not re.fullmatch(r"[a-z][a-z0-9_]{0,63}", name):
        raise ValidationError("type", f"entity type names are lower_snake_case (got {name!r})")
    with _registry_lock:
        _entity_types[name] = description or _entity_types.get(name, "")


def is_entity_type(name: str) -> bool:
    return name in _entity_types


def entity_types() -> dict[str, str]:
    """Known entity types and what they hold."""
    with _registry_lock:
        return dict(_entity_types)


def register_relation_type(name: str, description: str = "") -> None:
    """Allow a new relation type (e.g. "MUST_CACHE"); names are UPPER_SNAKE_CASE."""
    if not isinstance(name, str) or not re.fullmatch(r"[A-Z][A-Z0-9_]{0,63}", name):
        raise ValidationError("type", f"relation types are UPPER_SNAKE_CASE (got {name!r})")
    with _registry_lock:
        _relation_types[name] = description or _relation_types.get(name, "")


def relation_types() -> dict[str, str]:
    with _registry_lock:
        return dict(_relation_types)


def content_hash(*parts: Any) -> str:
    """A short, stable digest of JSON-ready parts (used to skip unchanged files and units)."""
    raw = json.dumps(parts, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()[:32]


def is_test_path(path: str | None) -> bool:
    return bool(path) and _TEST_PATH.search((path or "").replace("\\", "/")) is not None


def entity_type_for_unit(unit: ParsedUnit, path: str | None) -> str:
    """The entity type a parsed unit is stored as; tests in test files become `test_case`."""
    base = _UNIT_TYPES.get(unit.kind, "code")
    testable = base == "code" and unit.kind in ("function", "method", "class")
    if testable and unit.name.startswith(("test", "Test")) and is_test_path(path):
        return "test_case"
    return base


def unit_entity_id(entity_type: str, key: str, qualname: str) -> str:
    """Stable id of a unit: its type and where it lives (`path#qualname` or `event#b1/q`)."""
    return make_entity_id(entity_type, f"{key}#{qualname}")


def archived_id(entity_id: str, version: int) -> str:
    return f"{entity_id}@v{version}"


@dataclass(frozen=True)
class EntitySpec:
    """An entity to write, before storage: what ingestion and message anchoring produce.

    `unit_hash` covers what the search units are made of (name, title, text), so an unchanged
    unit is never re-upserted (its vector would be lost); `place_hash` covers where it sits
    (line range), which may change without the content changing.
    """

    id: str
    type: str
    name: str
    text: str
    qualname: str
    kind: str
    properties: Mapping[str, Any] = field(default_factory=dict)
    parent_qualname: str | None = None

    @property
    def unit_hash(self) -> str:
        return content_hash(self.type, self.name, self.properties.get("title"), self.text)

    @property
    def place_hash(self) -> str:
        return content_hash(
            self.properties.get("path"),
            self.properties.get("line_start"),
            self.properties.get("line_end"),
        )


def _own_text(unit: ParsedUnit, children: Sequence[ParsedUnit], lines: list[str]) -> str:
    """A unit's text without its children's bodies: each child keeps its first line only.

    A class would otherwise repeat every method, and a module the whole file: each line of
    code belongs to exactly one search unit (signatures aside), so nothing is embedded twice.
    """
    if not children or not lines:
        return unit.text
    hidden: set[int] = set()
    keep: set[int] = set()
    for child in children:
        def_line = child.properties.get("def_line")
        head = def_line if isinstance(def_line, int) else child.start_line
        keep.add(head)
        hidden.update(range(child.start_line, child.end_line + 1))
    out: list[str] = []
    for number in range(unit.start_line, unit.end_line + 1):
        if number in hidden and number not in keep:
            if out and out[-1].strip() != "...":
                indent = len(lines[number - 1]) - len(lines[number - 1].lstrip())
                out.append(" " * indent + "...")
            continue
        if 0 < number <= len(lines):
            out.append(lines[number - 1])
    return "\n".join(out).strip("\n")


_CARRIED_UNIT_PROPS = (
    "signature",
    "parameters",
    "returns",
    "bases",
    "decorators",
    "is_async",
    "statement_kind",
    "dialect",
    "tables_read",
    "tables_written",
    "columns",
    "where",
    "primary_key",
    "foreign_tables",
    "heading",
    "heading_path",
    "level",
    "imports",
    "title",
    "version",
)


def specs_from_result(
    result: ParseResult,
    *,
    key: str,
    source_text: str,
    base_properties: Mapping[str, Any],
    line_offset: int = 0,
    skip_kinds: Iterable[str] = (),
    clean: bool = False,
    chunk_type: str = "section",
) -> list[EntitySpec]:
    """One EntitySpec per parsed unit, ids keyed by `key` (a file path or an event anchor).

    `line_offset` shifts line numbers (a code block's position inside its message or
    document); `clean` runs documents.clean_text on prose units before indexing;
    `chunk_type` is the entity type of plain-text chunks (`code` for unparsed source).
    """
    from .documents import clean_text

    skipped = set(skip_kinds)
    lines = source_text.splitlines()
    by_parent: dict[str, list[ParsedUnit]] = {}
    for unit in result.units:
        if unit.parent is not None:
            by_parent.setdefault(unit.parent, []).append(unit)
    specs: list[EntitySpec] = []
    for unit in result.units:
        if unit.kind in skipped:
            continue
        etype = entity_type_for_unit(unit, result.path)
        if unit.kind == "text_chunk":
            etype = chunk_type
        children = [c for c in by_parent.get(unit.qualname, []) if c.kind not in ("code_block",)]
        code_like = unit.kind in ("module", "class", "function", "method")
        text = _own_text(unit, children, lines) if code_like else unit.text
        if clean and unit.kind in ("section", "text_chunk", "document"):
            text = clean_text(text)
        props: dict[str, Any] = dict(base_properties)
        props.update(
            {
                "kind": unit.kind,
                "symbol": unit.qualname,
                "language": unit.language,
                "line_start": unit.start_line + line_offset,
                "line_end": unit.end_line + line_offset,
                "parser": result.parser,
            }
        )
        if result.fallback:
            props["fallback"] = True
        if unit.docstring:
            props["docstring"] = unit.docstring[:500]
        if unit.kind in ("function", "method", "class", "table", "view"):
            props["title"] = unit.name  # the bare name is what people write
        for name in _CARRIED_UNIT_PROPS:
            value = unit.properties.get(name)
            if value not in (None, (), ""):
                props[name] = thaw(value)
        name = unit.qualname if code_like else unit.name
        if unit.kind in ("section", "text_chunk") and result.path:
            name = f"{result.path} > {unit.name}"
        specs.append(
            EntitySpec(
                id=unit_entity_id(etype, key, unit.qualname),
                type=etype,
                name=(name or unit.kind)[:500],
                text=text,
                qualname=unit.qualname,
                kind=unit.kind,
                properties=props,
                parent_qualname=unit.parent,
            )
        )
    return specs


# -- writing -------------------------------------------------------------------------------


@dataclass(frozen=True)
class VersionedWrite:
    """What `upsert_versioned` did: the stored entity, and the archived copy if any."""

    entity: Entity
    changed: bool
    archived_id: str | None = None


def _notify(cb: Components) -> None:
    # Wake the embedding worker the way ContextBase's own writes do.
    cb.notify_embedder()


def write_entity(cb: ComponentsSource, entity: Entity, *, notify: bool = True) -> Entity:
    """Store an entity as given (including `latest`), with its search units."""
    cb = components_of(cb)
    check_id("id", entity.id)
    check_text("text", entity.text)
    check_text("name", entity.name)
    check_json("properties", entity.properties)
    stored = cb.store.upsert_entity(entity, cb.entity_items(entity))
    if notify:
        _notify(cb)
    return stored


def _model_name(cb: Components) -> str | None:
    if not cb.embeds:
        return None
    embedder = cb.embedder
    return embedder.name if embedder is not None else None


def read_vectors(
    cb: ComponentsSource, project_id: str, item_ids: Iterable[str]
) -> dict[str, npt.NDArray[np.float32]]:
    """Current-model vectors of these items (to carry over to rewritten units)."""
    cb = components_of(cb)
    wanted = set(item_ids)
    model = _model_name(cb)
    if not wanted or model is None:
        return {}
    store: Store = cb.store
    direct = getattr(store, "get_vectors", None)
    if callable(direct):  # a backend that can fetch by id avoids the scan below
        found = direct(project_id, model, sorted(wanted))
        return {str(k): np.asarray(v, dtype=np.float32) for k, v in dict(found).items()}
    out: dict[str, npt.NDArray[np.float32]] = {}
    for batch in store.iter_vectors(project_id, model):
        for row in batch:
            if row.item_id in wanted:
                out[row.item_id] = row.vector
    return out


def unit_vectors(
    cb: ComponentsSource, project_id: str, entities: Iterable[Entity]
) -> dict[str, npt.NDArray[np.float32]]:
    """Current-model vectors of the entities' search units as this base cuts them, to carry
    over when they are written again with the same text. A unit stored under the same id
    with another text (cut by another chunking setting) gives none: its vector is of that
    text, so the unit is embedded again."""
    cb = components_of(cb)
    if not cb.embeds:
        return {}
    units = {u.item_id: u.text for e in entities for u in cb.entity_items(e)}
    stored = cb.store.get_items(project_id, list(units)) if units else []
    recut = {it.item_id for it in stored if it.text != units[it.item_id]}
    return read_vectors(cb, project_id, [i for i in units if i not in recut])


def restore_vectors(
    cb: ComponentsSource,
    project_id: str,
    vectors: Mapping[str, npt.NDArray[np.float32]],
    renames: Mapping[str, str] | None = None,
) -> int:
    """Put vectors back for items whose text did not change (optionally under new ids)."""
    cb = components_of(cb)
    model = _model_name(cb)
    if model is None or not vectors:
        return 0
    rows: list[tuple[str, str, npt.NDArray[np.float32]]] = []
    for item_id, vec in vectors.items():
        target = (renames or {}).get(item_id, item_id)
        rows.append((project_id, target, vec))
    return cb.store.put_vectors(model, rows)


def _item_ids(cb: Components, entity: Entity) -> list[str]:
    return [item.item_id for item in cb.entity_items(entity)]


def upsert_versioned(
    cb: ComponentsSource,
    spec: EntitySpec,
    *,
    project: str | None = None,
    keep_history: bool = True,
    sign_key: bytes | None = None,
    notify: bool = True,
    prefetched: Mapping[str, npt.NDArray[np.float32]] | None = None,
) -> VersionedWrite:
    """Upsert by id; when the content changed, keep the old version (see the module doc).

    When only properties changed (a line range moved), the entity is rewritten in place and
    its vectors are carried over, so nothing is re-embedded. `prefetched` holds vectors read
    beforehand with `unit_vectors` (one pass for a whole batch instead of one per entity).
    """
    cb = components_of(cb)
    from .signing import sign_entity

    pid = cb.resolve_project(project)
    old_rows = cb.store.get_entities(pid, [spec.id], include_inactive=True)
    old = old_rows[0] if old_rows else None
    now = time.time()
    props = dict(spec.properties)
    props["unit_hash"] = spec.unit_hash
    content_changed = old is None or old.properties.get("unit_hash") != spec.unit_hash
    if old is not None and not content_changed and old.type == spec.type:
        props_same = {k: v for k, v in old.properties.items() if k != "_sig"} == props
        if props_same and old.active and old.latest:
            return VersionedWrite(old, changed=False)
    version = 1 if old is None else (old.version + 1 if content_changed else old.version)
    entity = Entity(
        id=spec.id,
        project_id=pid,
        type=spec.type,
        name=spec.name,
        text=spec.text,
        properties=props,
        version=version,
        created_at=old.created_at if old is not None else now,
        updated_at=now,
    )
    if sign_key is not None:
        entity = entity.model_copy(
            update={"properties": {**props, "_sig": sign_entity(entity, sign_key)}}
        )
    archived: str | None = None
    old_vectors: dict[str, npt.NDArray[np.float32]] = {}
    if old is not None:
        ids = _item_ids(cb, old)
        if prefetched is not None:
            old_vectors = {i: prefetched[i] for i in ids if i in prefetched}
        else:
            old_vectors = unit_vectors(cb, pid, [old])
    if old is not None and content_changed and keep_history and old.active:
        archived = archive_version(cb, old, now=now, vectors=old_vectors, sign_key=sign_key)
    stored = write_entity(cb, entity, notify=False)
    if old is not None and not content_changed:
        restore_vectors(cb, pid, old_vectors)
    if archived is not None and old is not None:
        chain_versions(cb, pid, spec.id, archived, old.version, sign_key)
    if notify:
        _notify(cb)
    return VersionedWrite(stored, changed=True, archived_id=archived)


def archive_version(
    cb: ComponentsSource,
    old: Entity,
    *,
    now: float,
    vectors: Mapping[str, npt.NDArray[np.float32]],
    sign_key: bytes | None = None,
) -> str:
    """Copy the stored `old` to `<id>@v<version>` with `latest=False` (its search units too,
    taking over `vectors`, the old units' vectors, so nothing is embedded again); returns
    the copy's id. Once the new version is written, `chain_versions` links the two."""
    from .signing import sign_entity

    cb = components_of(cb)
    archived = archived_id(old.id, old.version)
    old_props = {k: v for k, v in old.properties.items() if k != "_sig"}
    old_props.update({"archived_from": old.id, "superseded_at": now})
    copy = old.model_copy(update={"id": archived, "latest": False, "properties": old_props})
    if sign_key is not None:
        signed = {**old_props, "_sig": sign_entity(copy, sign_key)}
        copy = copy.model_copy(update={"properties": signed})
    write_entity(cb, copy, notify=False)
    renames = dict(zip(_item_ids(cb, old), _item_ids(cb, copy), strict=True))
    restore_vectors(cb, old.project_id, vectors, renames)
    return archived


def chain_versions(
    cb: ComponentsSource,
    pid: str,
    entity_id: str,
    archived: str,
    version: int,
    sign_key: bytes | None = None,
) -> None:
    """`id -MODIFIES-> id@vN`, and the previous head edge re-anchored at `id@vN` (signed
    with `sign_key`, like the entities they join)."""
    from .signing import SIGNATURE_PROPERTY, signed_relation

    cb = components_of(cb)
    previous = cb.store.list_relations(pid, [entity_id], direction="out", types=["MODIFIES"])
    rels: list[Relation] = []
    for rel in previous:
        if rel.source != "auto:version" or rel.to_id == archived:
            continue
        cb.store.close_relation(pid, rel.id, time.time())
        rels.append(
            Relation(
                project_id=pid,
                from_id=archived,
                type="MODIFIES",
                to_id=rel.to_id,
                confidence=1.0,
                source="auto:version",
                properties={k: v for k, v in rel.properties.items() if k != SIGNATURE_PROPERTY},
            )
        )
    rels.append(
        Relation(
            project_id=pid,
            from_id=entity_id,
            type="MODIFIES",
            to_id=archived,
            confidence=1.0,
            source="auto:version",
            properties={"previous_version": version},
        )
    )
    if sign_key is not None:
        rels = [signed_relation(r, sign_key) for r in rels]
    cb.store.upsert_relations(rels)
