"""Relationship weaving without a model: rules that turn names into typed, scored edges.

Every edge carries `source="auto:<rule>"` (`ctxbase:<rule>` when capture anchoring wrote
it, capture_anchor.py) and a confidence that says how good the match was:

- `mentions`: text (an event, a document, a requirement) REFERENCES a named entity:
  exact qualified name 0.95, dotted suffix 0.9, distinctive bare identifier 0.85, table 0.8,
  a word in backticks 0.75, an ambiguous name (2-3 owners) 0.6 each.
- `calls`, `imports`, `inherits`: code CALLS / IMPORTS / INHERITS code: 0.95 resolved
  exactly, 0.9 through a package re-export, 0.6 by a distinctive last name only.
- `test_calls`, `test_imports`: a test VALIDATES the code it calls or imports (as above).
- `sql_table`: a SQL statement REFERENCES a table it reads or writes that is defined
  elsewhere: 0.8 (0.9 schema-qualified). `foreign_key`: table REFERENCES table, 0.9.
- `cites`: a document REFERENCES the file it links to, 0.9.
- `cites_document`: a requirement FOLLOWS a document it names: 0.9 title, 0.85 path.
- `session_code`: a requirement GENERATES code produced in its session, 0.7.
- `contains`: a file or a parent unit CONTAINS its units, 1.0.
- `version` (entities.py): the newest version MODIFIES the previous one, 1.0.

One edge is written per (from, type, to): when several rules find it, the most confident
one names its source; on a tie a rule that only saw a name (`mentions`, `cites_document`)
yields to the other (a spec phrase, a link, a SQL statement).

Names are matched as whole identifiers (ASCII word boundaries, so Chinese text around them
does not matter); common words are not names: a bare word matches only when it is
distinctive (snake_case, CamelCase, digits) or written in backticks, and a plain-word table
name (`orders`) only next to "table"/"表" or a SQL keyword.
"""

from __future__ import annotations

import posixpath
import re
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..components import Components, ComponentsSource, components_of
from ..model import Entity, Relation
from ..store.base import Store

__all__ = [
    "NAME_RULES",
    "Link",
    "Mention",
    "StoredRef",
    "SymbolIndex",
    "SymbolIndexCache",
    "find_mentions",
    "is_distinctive",
    "links_for_refs",
    "preferred",
    "title_named",
    "weave_event",
    "weave_requirement",
    "weave_text",
    "write_links",
]

_IDENT = re.compile(
    r"(?<![A-Za-z0-9_.$])([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)(?![A-Za-z0-9_])"
)
_PATH = re.compile(
    r"(?<![\w/.-])((?:[\w.-]+/)*[\w-][\w.-]*\.(?:py|pyi|sql|md|txt|rst|ts|tsx|js|go|java|"
    r"ya?ml|toml|json))(?![\w/])"
)
_TABLE_CONTEXT = re.compile(
    r"(?:\b(?:from|join|into|update|table|tables)\s+[`\"\[]?$)|(?:表\s*$)", re.IGNORECASE
)
_TABLE_AFTER = re.compile(r"^[`\"\]]?\s*(?:(?:table|tables)\b|表|数据表)", re.IGNORECASE)
_GENERIC = frozenset(
    {
        "self",
        "cls",
        "main",
        "run",
        "get",
        "set",
        "put",
        "open",
        "close",
        "start",
        "stop",
        "setup",
        "setUp",
        "tearDown",
        "to_dict",
        "from_dict",
        "to_json",
        "from_json",
        "kwargs",
        "args",
        "None",
        "True",
        "False",
        "e.g",
        "i.e",
    }
)
_CODE_TYPES = frozenset({"code", "test_case"})
# What conversations produce in numbers (one per statement or mention): no name of theirs is
# matched, so reading them would make each anchoring batch cost the conversation's length.
_UNMATCHED_TYPES = ("decision", "mention", "requirement")
_MENTIONABLE_KINDS = frozenset({"module", "class", "function", "method"})


def is_distinctive(name: str) -> bool:
    """A bare identifier specific enough to name one thing (not an ordinary word)."""
    if len(name) < 4 or name in _GENERIC or (name.startswith("__") and name.endswith("__")):
        return False
    core = name.strip("_")
    if "_" in core:
        return True
    has_inner_upper = any(c.isupper() for c in core[1:])
    has_lower = any(c.islower() for c in core)
    return (has_inner_upper and has_lower) or any(c.isdigit() for c in core[1:])


@dataclass(frozen=True)
class Mention:
    entity_id: str
    confidence: float
    matched: str
    how: str  # "qualified", "suffix", "bare", "backticked", "table", "path", "title"


# Rules that find an edge because a name appears in the text: the weakest evidence of one.
NAME_RULES = frozenset({"mentions", "cites_document"})


@dataclass(frozen=True)
class Link:
    """An edge to write: `source` is `<origin>:<rule>`."""

    from_id: str
    type: str
    to_id: str
    confidence: float
    rule: str
    properties: Mapping[str, Any] = field(default_factory=dict)
    origin: str = "auto"  # "ctxbase" for what capture anchoring found in messages

    @property
    def source(self) -> str:
        return f"{self.origin}:{self.rule}"


@dataclass
class SymbolIndex:
    """Names of the project's latest entities, for matching code references and mentions."""

    qualified: dict[str, list[str]] = field(default_factory=dict)
    suffixes: dict[str, list[str]] = field(default_factory=dict)
    bare: dict[str, list[str]] = field(default_factory=dict)
    tables: dict[str, list[str]] = field(default_factory=dict)
    paths: dict[str, list[str]] = field(default_factory=dict)
    basenames: dict[str, list[str]] = field(default_factory=dict)
    titles: dict[str, list[str]] = field(default_factory=dict)
    document_titles: dict[str, str] = field(default_factory=dict)  # id -> title (or name)
    types: dict[str, str] = field(default_factory=dict)
    kinds: dict[str, str] = field(default_factory=dict)
    places: dict[str, tuple[str | None, int | None]] = field(default_factory=dict)
    symbols: dict[str, str] = field(default_factory=dict)
    repos: dict[str, str] = field(default_factory=dict)  # ingested entities' repositories

    @classmethod
    def from_entities(cls, entities: Iterable[Entity]) -> SymbolIndex:
        index = cls()
        for entity in entities:
            index.add(entity)
        return index

    @classmethod
    def from_store(cls, store: Store, project_id: str) -> SymbolIndex:
        """The project's latest entities whose names can be matched (code, tables, files,
        documents and any other type), without the statements and mentions of messages."""
        return cls.from_entities(
            store.list_entities(project_id, latest_only=True, exclude_types=_UNMATCHED_TYPES)
        )

    def add(self, entity: Entity) -> None:
        props = entity.properties
        eid = entity.id
        self.types[eid] = entity.type
        repo = props.get("repo")
        if isinstance(repo, str):
            self.repos[eid] = repo
        kind = str(props.get("kind") or "")
        self.kinds[eid] = kind
        path = props.get("path")
        line = props.get("line_start")
        self.places[eid] = (
            path if isinstance(path, str) else None,
            line if isinstance(line, int) else None,
        )
        if entity.type in _CODE_TYPES and kind in _MENTIONABLE_KINDS:
            symbol = str(props.get("symbol") or entity.name)
            _push(self.qualified, symbol, eid)
            self.symbols[eid] = symbol
            parts = symbol.split(".")
            for start in range(1, len(parts) - 1):
                _push(self.suffixes, ".".join(parts[start:]), eid)
            if kind != "module":
                _push(self.bare, parts[-1].split("#")[0], eid)
        elif entity.type == "table":
            name = entity.name.lower()
            _push(self.tables, name, eid)
            if "." in name:
                _push(self.tables, name.rsplit(".", 1)[-1], eid)
        elif entity.type == "file" and isinstance(path, str):
            _push(self.paths, path, eid)
            _push(self.basenames, posixpath.basename(path), eid)
        elif entity.type == "document":
            title = props.get("title")
            self.document_titles[eid] = str(title or entity.name)
            if isinstance(title, str) and len(title.strip()) >= 4:
                _push(self.titles, title.strip().lower(), eid)

    # -- code references -------------------------------------------------------------------
    def near(self, ids: Sequence[str], from_id: str) -> list[str]:
        """`ids` in the repository of `from_id` when there are any, else all of them: two
        ingested repositories may define the same module or file name."""
        repo = self.repos.get(from_id)
        if repo is None:
            return list(ids)
        same = [eid for eid in ids if self.repos.get(eid) == repo]
        return same or list(ids)

    def resolve(self, target: str, from_id: str | None = None) -> list[tuple[str, float, str]]:
        """(entity id, match confidence, how) for a dotted target from a parser; names in
        the repository of `from_id` win over the same names elsewhere."""

        def near(ids: list[str]) -> list[str]:
            return self.near(ids, from_id) if from_id is not None else ids

        exact = near(self.qualified.get(target, []))
        if exact:
            return [(eid, 0.95 if len(exact) == 1 else 0.6, "qualified") for eid in exact[:3]]
        head, _, last = target.rpartition(".")
        last = last.split("#")[0]
        owners = near(self.bare.get(last, []))
        if head and owners:
            # `pkg.name` where the package re-exports `name` from one of its modules.
            prefix = head + "."
            via = [e for e in owners if self._symbol_startswith(e, prefix)]
            if len(via) == 1:
                return [(via[0], 0.9, "reexport")]
        if is_distinctive(last) and len(owners) == 1:
            return [(owners[0], 0.6, "bare")]
        return []

    def _symbol_startswith(self, eid: str, prefix: str) -> bool:
        return self.symbols.get(eid, "").startswith(prefix)

    def table(self, name: str) -> list[str]:
        return self.tables.get(name.lower(), [])


class SymbolIndexCache:
    """Projects' symbol indexes kept between anchoring batches. Reading one costs time in
    the project's size (half a second at 9,000 entities), and anchoring reads it inside
    its write transaction: every captured message, and every other writer of the
    database waiting on it, paid that. Kept, an index is read again only in part: the
    entities updated since, when none it holds changed (an ingest adds entities between
    two messages), else whole.

    Use it under the project's write lock (a transaction after `hold_project`): nothing
    commits between its reads."""

    def __init__(self, size: int = 4) -> None:
        self._size = size
        # project -> (entities_fingerprint when the index was read, the index)
        self._kept: dict[str, tuple[tuple[float, ...], SymbolIndex]] = {}
        self._lock = threading.Lock()

    def get(self, store: Store, project_id: str) -> SymbolIndex:
        """The project's index as `SymbolIndex.from_store` reads it now (a caller that adds
        to it and does not commit what it added calls `drop`)."""
        now = store.entities_fingerprint(project_id, _UNMATCHED_TYPES)
        with self._lock:
            kept = self._kept.pop(project_id, None)
        index: SymbolIndex | None = None
        if kept is not None:
            key, index = kept
            if key != now:
                since = key[1]  # the newest update the index holds
                if store.entities_fingerprint(project_id, _UNMATCHED_TYPES, since) == key:
                    for entity in store.list_entities(
                        project_id, exclude_types=_UNMATCHED_TYPES, updated_after=since
                    ):
                        index.add(entity)
                else:  # one it holds changed: hidden, forgotten or a newer version
                    index = None
        if index is None:
            index = SymbolIndex.from_store(store, project_id)
        with self._lock:
            self._kept[project_id] = (now, index)  # the most recently used last
            while len(self._kept) > self._size:
                del self._kept[next(iter(self._kept))]
        return index

    def drop(self, project_id: str) -> None:
        with self._lock:
            self._kept.pop(project_id, None)


def _push(mapping: dict[str, list[str]], key: str, value: str) -> None:
    bucket = mapping.setdefault(key, [])
    if value not in bucket:
        bucket.append(value)


def _scored(ids: Sequence[str], unique: float) -> list[tuple[str, float]]:
    if len(ids) == 1:
        return [(ids[0], unique)]
    if len(ids) <= 3:
        return [(eid, 0.6) for eid in ids]
    return []  # a name that many things carry says nothing


def _ascii_word(char: str) -> bool:
    return char.isascii() and char.isalnum()


def title_named(lowered: str, title: str) -> bool:
    """Whether a lower-cased text names a (lower-cased) title as a whole: "Doc 1" is not
    named by "Doc 100", nor "Retry" by "Retrying". Only Latin letters and digits bound a
    word; a Chinese title is found wherever its characters stand (no spaces to bound it)."""
    start = lowered.find(title)
    while start >= 0:
        end = start + len(title)
        before = lowered[start - 1] if start > 0 else ""
        after = lowered[end] if end < len(lowered) else ""
        # "doc 1.5" goes on past "doc 1": a decimal point between digits joins them
        decimal = title[-1].isdigit() and after == "." and lowered[end + 1 : end + 2].isdigit()
        if not (
            (before and _ascii_word(before) and _ascii_word(title[0]))
            or (after and _ascii_word(after) and _ascii_word(title[-1]))
            or decimal
        ):
            return True
        start = lowered.find(title, start + 1)
    return False


def find_mentions(text: str, index: SymbolIndex) -> list[Mention]:
    """Entities a text names, best match per entity, strongest first."""
    best: dict[str, Mention] = {}

    def offer(eid: str, conf: float, matched: str, how: str) -> None:
        current = best.get(eid)
        if current is None or conf > current.confidence:
            best[eid] = Mention(eid, conf, matched, how)

    for match in _PATH.finditer(text):
        token = match.group(1).lstrip("./")
        for eid in index.paths.get(token, []):
            offer(eid, 0.9, token, "path")
        if "/" not in token:
            for eid, conf in _scored(index.basenames.get(token, []), 0.8):
                offer(eid, conf, token, "path")
    lowered = text.lower()
    for title, ids in index.titles.items():
        if title_named(lowered, title):
            for eid, conf in _scored(ids, 0.9):
                offer(eid, conf, title, "title")
    for match in _IDENT.finditer(text):
        token = match.group(1)
        start, end = match.span(1)
        ticked = start > 0 and text[start - 1] == "`" and text[end : end + 1] == "`"
        if "." in token:
            exact = index.qualified.get(token)
            if exact:
                for eid, conf in _scored(exact, 0.95):
                    offer(eid, conf, token, "qualified")
                continue
            suffix = index.suffixes.get(token)
            if suffix:
                for eid, conf in _scored(suffix, 0.9):
                    offer(eid, conf, token, "suffix")
                continue
            table = index.table(token)
            if table:
                for eid, conf in _scored(table, 0.9):
                    offer(eid, conf, token, "table")
            continue
        owners = index.bare.get(token, [])
        if owners and is_distinctive(token):
            for eid, conf in _scored(owners, 0.85):
                offer(eid, conf, token, "bare")
        elif owners and ticked and len(token) >= 4 and token not in _GENERIC:
            for eid, conf in _scored(owners, 0.75):
                offer(eid, conf, token, "backticked")
        tables = index.table(token)
        if tables and (
            is_distinctive(token)
            or ticked
            or _TABLE_CONTEXT.search(text[max(0, start - 20) : start])
            or _TABLE_AFTER.match(text[end : end + 12])
        ):
            for eid, conf in _scored(tables, 0.8):
                offer(eid, conf, token, "table")
    return sorted(best.values(), key=lambda m: (-m.confidence, m.entity_id))


# -- code references -------------------------------------------------------------------------


@dataclass(frozen=True)
class StoredRef:
    """A parser reference kept with its file, so edges can be re-woven when targets appear."""

    from_id: str
    from_type: str
    kind: str
    target: str
    confidence: float
    base: str | None = None  # the citing document's folder, to resolve relative links

    def to_json(self) -> list[Any]:
        return [self.from_id, self.from_type, self.kind, self.target, self.confidence, self.base]

    @classmethod
    def from_json(cls, raw: Sequence[Any]) -> StoredRef:
        return cls(str(raw[0]), str(raw[1]), str(raw[2]), str(raw[3]), float(raw[4]), raw[5])


_CODE_EDGES = {"calls": "CALLS", "imports": "IMPORTS", "inherits": "INHERITS"}


def links_for_refs(refs: Iterable[StoredRef], index: SymbolIndex) -> list[Link]:
    """Edges for parser references whose targets exist in the project."""
    links: list[Link] = []
    for ref in refs:
        if ref.kind in _CODE_EDGES:
            scale = 1.0 if ref.confidence >= 0.8 else ref.confidence / 0.8
            for eid, conf, how in index.resolve(ref.target, ref.from_id):
                if eid == ref.from_id:
                    continue
                score = round(conf * scale, 3)
                props = {"target": ref.target, "match": how}
                links.append(Link(ref.from_id, _CODE_EDGES[ref.kind], eid, score, ref.kind, props))
                tested = index.kinds.get(eid) in ("function", "method", "class")
                from_test = ref.from_type == "test_case" or _is_test_module(ref, index)
                if from_test and tested and ref.kind in ("calls", "imports"):
                    rule = f"test_{ref.kind}"
                    links.append(Link(ref.from_id, "VALIDATES", eid, score, rule, props))
        elif ref.kind in ("reads_table", "writes_table", "references_table"):
            qualified = "." in ref.target
            for eid in index.near(index.table(ref.target), ref.from_id)[:3]:
                if eid == ref.from_id or _same_place(index, ref.from_id, eid):
                    continue
                if ref.kind == "references_table":
                    links.append(Link(ref.from_id, "REFERENCES", eid, 0.9, "foreign_key"))
                else:
                    conf = 0.9 if qualified else 0.8
                    props = {"table": ref.target, "access": ref.kind.split("_")[0]}
                    links.append(Link(ref.from_id, "REFERENCES", eid, conf, "sql_table", props))
        elif ref.kind == "cites":
            target = ref.target.split("#", 1)[0]
            if not target or "://" in target or target.startswith("mailto:"):
                continue
            path = posixpath.normpath(posixpath.join(ref.base or "", target))
            for eid in index.near(index.paths.get(path, []), ref.from_id)[:1]:
                links.append(Link(ref.from_id, "REFERENCES", eid, 0.9, "cites", {"link": target}))
    return links


def _is_test_module(ref: StoredRef, index: SymbolIndex) -> bool:
    from .entities import is_test_path

    path, _ = index.places.get(ref.from_id, (None, None))
    return index.kinds.get(ref.from_id) == "module" and is_test_path(path)


def _same_place(index: SymbolIndex, a: str, b: str) -> bool:
    """A CREATE TABLE statement and the table it defines sit at the same file and line."""
    pa, pb = index.places.get(a), index.places.get(b)
    return pa is not None and pa == pb and pa[0] is not None


# -- writing ----------------------------------------------------------------------------------


def write_links(
    cb: ComponentsSource,
    links: Iterable[Link],
    *,
    project: str | None = None,
    extra_properties: Mapping[str, Any] | None = None,
    sign_key: bytes | None = None,
) -> list[Relation]:
    """Upsert the edges (one per from/type/to: the highest confidence wins)."""
    cb = components_of(cb)
    from .signing import SIGNATURE_PROPERTY, sign_relation

    pid = cb.resolve_project(project)
    relations: list[Relation] = []
    for link in preferred(links):
        rel = Relation(
            project_id=pid,
            from_id=link.from_id,
            type=link.type,
            to_id=link.to_id,
            confidence=max(0.0, min(1.0, link.confidence)),
            source=link.source,
            properties={**dict(link.properties), **dict(extra_properties or {})},
        )
        if sign_key is not None:
            signed = {**rel.properties, SIGNATURE_PROPERTY: sign_relation(rel, sign_key)}
            rel = rel.model_copy(update={"properties": signed})
        relations.append(rel)
    return cb.store.upsert_relations(relations) if relations else []


def preferred(links: Iterable[Link]) -> list[Link]:
    """One link per (from, type, to): the most confident, on a tie not a name match
    (NAME_RULES), else the first."""
    best: dict[tuple[str, str, str], Link] = {}
    for link in links:
        key = (link.from_id, link.type, link.to_id)
        old = best.get(key)
        if old is None or _strength(link) > _strength(old):
            best[key] = link
    return list(best.values())


def _strength(link: Link) -> tuple[float, bool]:
    return link.confidence, link.rule not in NAME_RULES


def weave_text(
    cb: ComponentsSource,
    node_id: str,
    text: str,
    *,
    project: str | None = None,
    index: SymbolIndex | None = None,
    exclude: Iterable[str] = (),
    min_confidence: float = 0.6,
) -> list[Relation]:
    """`node_id` REFERENCES every entity its text names (rule `mentions`)."""
    cb = components_of(cb)
    pid = cb.resolve_project(project)
    idx = index if index is not None else SymbolIndex.from_store(cb.store, pid)
    skip = {node_id, *exclude}
    links = [
        Link(node_id, "REFERENCES", m.entity_id, m.confidence, "mentions", {"matched": m.matched})
        for m in find_mentions(text, idx)
        if m.entity_id not in skip and m.confidence >= min_confidence
    ]
    return write_links(cb, links, project=pid)


def weave_event(
    cb: ComponentsSource,
    event_id: str,
    *,
    project: str | None = None,
    index: SymbolIndex | None = None,
) -> list[Relation]:
    """Edges from a stored event to the entities its text names."""
    cb = components_of(cb)
    event = cb.get_event(event_id, project=project)
    return weave_text(cb, event.id, event.text or "", project=event.project_id, index=index)


def weave_requirement(
    cb: ComponentsSource,
    requirement_id: str,
    *,
    project: str | None = None,
    index: SymbolIndex | None = None,
    origin: str = "auto",
    found: Sequence[Link] = (),
    session_code: dict[str, list[Entity]] | None = None,
) -> list[Relation]:
    """A requirement FOLLOWS the documents it names, GENERATES its session's code and
    REFERENCES the other entities it names; `origin` prefixes the sources. `found`: edges
    other rules wrote for the same text (capture anchoring's `follows_spec`): an edge among
    them is written again only when this weave's rule is preferred (see `preferred`).
    `session_code` keeps each session's code entities for the next requirement (the
    requirements of one message share them)."""
    cb = components_of(cb)
    pid = cb.resolve_project(project)
    req = cb.get_entity(requirement_id, project=pid)
    idx = index if index is not None else SymbolIndex.from_store(cb.store, pid)
    text = f"{req.name}\n{req.text}"
    links: list[Link] = []
    for m in find_mentions(text, idx):
        if m.entity_id == req.id:
            continue
        etype = idx.types.get(m.entity_id)
        if etype == "document" and m.how == "title":
            links.append(Link(req.id, "FOLLOWS", m.entity_id, m.confidence, "cites_document"))
        elif etype == "file" and m.how == "path":
            docs = _documents_of_file(cb, pid, m.entity_id)
            for doc in docs:
                links.append(Link(req.id, "FOLLOWS", doc, 0.85, "cites_document"))
            links.append(Link(req.id, "REFERENCES", m.entity_id, m.confidence, "mentions"))
        else:
            links.append(Link(req.id, "REFERENCES", m.entity_id, m.confidence, "mentions"))
    session = req.properties.get("session_id")
    if isinstance(session, str):
        code = None if session_code is None else session_code.get(session)
        if code is None:
            code = _session_code(cb, pid, session)
            if session_code is not None:
                session_code[session] = code
        links.extend(session_code_links(cb, pid, [req], session, code))
    links = [replace(link, origin=origin) for link in links]
    mine = {id(link) for link in links}
    return write_links(cb, [k for k in preferred([*found, *links]) if id(k) in mine], project=pid)


def _session_code(cb: Components, project_id: str, session_id: str) -> list[Entity]:
    """The code, SQL, table and test entities anchored from one session."""
    return [
        e
        for etype in ("code", "sql", "table", "test_case")
        for e in cb.store.list_entities(project_id, type=etype, session_id=session_id)
    ]


def session_code_links(
    cb: ComponentsSource,
    project_id: str,
    requirements: Sequence[Entity],
    session_id: str,
    code: Sequence[Entity] | None = None,
) -> list[Link]:
    """Requirements of a session GENERATES the code anchored from that session (`code`,
    when the caller has read it already)."""
    if code is None:
        code = _session_code(components_of(cb), project_id, session_id)
    return [
        Link(req.id, "GENERATES", c.id, 0.7, "session_code", {"session_id": session_id})
        for req in requirements
        for c in code
        if req.properties.get("session_id") == session_id
    ]


def _documents_of_file(cb: Components, project_id: str, file_id: str) -> list[str]:
    rels = cb.store.list_relations(project_id, [file_id], direction="out", types=["CONTAINS"])
    found = cb.store.get_entities(project_id, [r.to_id for r in rels])
    return [e.id for e in found if e.type == "document"]
