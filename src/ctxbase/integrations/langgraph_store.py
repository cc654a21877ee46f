"""A LangGraph `BaseStore` over ctxbase: long-term memory for LangGraph agents that other
agents (and `ctxbase search`) can see.

    from ctxbase.integrations.langgraph_store import CtxbaseStore
    store = CtxbaseStore(ctxbase.open("memory.db", project="shop"))
    agent = create_react_agent(model, tools, store=store)

Each item is one ctxbase entity (type `langgraph_item`, one per namespace and key) whose
text is the item's indexed fields, so `search(query=...)` runs ctxbase's hybrid search
(keywords with Chinese segmentation, embeddings, graph) and the items show up in assembled
contexts. Filters, namespace listing and TTL follow LangGraph's `InMemoryStore` (an item
past its TTL is out of ctxbase's searches and assemblies too: its entity's `expires_at`
is honoured there); without a query, results are most recently updated first (as
LangGraph's PostgresStore). Listing and filtering read every item of the project's store,
which suits agent memories (thousands), not bulk data.

`delete` (and `sweep_ttl`, and a put of None) hides the item, as `cb.soft_delete` does: it
leaves get, search, namespace listings and every ctxbase search and assembly, a later put
to the key stores it afresh, and over the server a `write` key may do it. With
`hard_delete=True` the item is forgotten for good instead (`cb.forget`: an `admin` key over
the server).
"""

from __future__ import annotations

import asyncio
import json
import math
import threading
import time
from collections.abc import Iterable, Sequence
from contextlib import suppress
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from . import require

require("langgraph.store.base", "langgraph")

from langgraph.store.base import (  # noqa: E402  # after the install hint
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
    get_text_at_path,
    tokenize_path,
)

from ..errors import ConflictError, NotFoundError, ValidationError  # noqa: E402
from ..model import Entity, make_entity_id  # noqa: E402
from ..store.base import ItemFilter  # noqa: E402

if TYPE_CHECKING:
    from ..contextbase import ContextBase
    from ..serve.sdk import Client

__all__ = ["ITEM_TYPE", "CtxbaseStore"]

ITEM_TYPE = "langgraph_item"
MAX_RANKED = 1000  # search's own cap; further matches follow unranked, newest first


def _when(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, tz=UTC)


# A put reads the item's version and writes the next one; written meanwhile by another
# put or a read's refresh, it reads again (the last put wins, as BaseStore says)
_PUT_TRIES = 8


class _Stored:
    """One item as kept in an entity's properties."""

    __slots__ = ("created_at", "entity", "expires_at", "key", "namespace", "ttl", "updated_at")

    def __init__(self, entity: Entity) -> None:
        p = entity.properties
        self.entity = entity
        self.namespace: tuple[str, ...] = tuple(p["namespace"])
        self.key: str = p["key"]
        self.created_at: float = p["created_at"]
        self.updated_at: float = p["updated_at"]
        self.ttl: float | None = p.get("ttl")
        self.expires_at: float | None = p.get("expires_at")

    @property
    def entity_id(self) -> str:
        return self.entity.id

    @property
    def value(self) -> dict[str, Any]:
        return dict(self.entity.properties["value"])

    def expired(self, now: float) -> bool:
        return self.expires_at is not None and self.expires_at <= now

    def item(self, score: float | None = None, *, search: bool = False) -> Item:
        common: dict[str, Any] = {
            "namespace": self.namespace,
            "key": self.key,
            "value": self.value,
            "created_at": _when(self.created_at),
            "updated_at": _when(self.updated_at),
        }
        return SearchItem(**common, score=score) if search else Item(**common)


def _value_lines(value: Any, path: str = "") -> list[str]:
    """A value as the lines `path: text` that searches and assembled prompts show (an item's
    whole value when no index fields are named): `food: pizza`, `meta.source: chat`, a list
    of plain values on one line (`tags: food, spicy`), not its JSON."""
    if isinstance(value, dict):
        if not value:
            return []
        return [
            line
            for k, v in value.items()
            for line in _value_lines(v, f"{path}.{k}" if path else str(k))
        ]
    if isinstance(value, list):
        if all(not isinstance(v, dict | list) for v in value):
            shown = ", ".join(_plain(v) for v in value)
            return [f"{path}: {shown}" if path else shown] if value else []
        return [line for i, v in enumerate(value) for line in _value_lines(v, f"{path}[{i}]")]
    return [f"{path}: {_plain(value)}" if path else _plain(value)]


def _plain(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _apply_operator(value: Any, operator: str, expected: Any) -> bool:
    if operator == "$eq":
        return bool(value == expected)
    if operator == "$ne":
        return bool(value != expected)
    if value is None:
        return False
    if operator == "$gt":
        return float(value) > float(expected)
    if operator == "$gte":
        return float(value) >= float(expected)
    if operator == "$lt":
        return float(value) < float(expected)
    if operator == "$lte":
        return float(value) <= float(expected)
    raise ValueError(f"unsupported filter operator {operator!r}")


def _matches(value: Any, expected: Any) -> bool:
    """LangGraph's filter semantics: equality, nested objects, $eq/$ne/$gt/$gte/$lt/$lte."""
    if isinstance(expected, dict):
        if any(str(k).startswith("$") for k in expected):
            return all(_apply_operator(value, k, v) for k, v in expected.items())
        return isinstance(value, dict) and all(
            _matches(value.get(k), v) for k, v in expected.items()
        )
    if isinstance(expected, list | tuple):
        return (
            isinstance(value, list | tuple)
            and len(value) == len(expected)
            and all(_matches(a, b) for a, b in zip(value, expected, strict=True))
        )
    return bool(value == expected)


def _namespace_matches(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    path = condition.path
    if len(namespace) < len(path):
        return False
    pairs = (
        zip(namespace, path, strict=False)
        if condition.match_type == "prefix"
        else zip(reversed(namespace), reversed(path), strict=False)
    )
    return all(p == "*" or n == p for n, p in pairs)


class CtxbaseStore(BaseStore):
    """LangGraph's key-value memory store, kept in a ctxbase project."""

    supports_ttl: bool = True

    def __init__(
        self,
        cb: ContextBase | Client,
        *,
        project: str | None = None,
        ttl: TTLConfig | None = None,
        index_fields: Sequence[str] | None = None,
        search_preset: str = "hybrid",
        hard_delete: bool = False,
    ) -> None:
        """`index_fields`: the value paths whose text is searched (default: the whole value,
        as `path: text` lines); `ttl`: LangGraph's TTLConfig (default_ttl in minutes,
        refresh_on_read); `hard_delete`: a delete forgets the item for good (needs an
        admin key over the server) instead of hiding it (restorable with `cb.restore`,
        purged by `cb.purge_soft_deleted`)."""
        self.cb = cb
        self.hard_delete = hard_delete
        self.project = project or cb.project
        self.ttl_config = ttl
        self.index_fields = list(index_fields) if index_fields is not None else None
        self.search_preset = search_preset
        self._lock = threading.Lock()  # a batch's reads and writes are not interleaved

    # -- storage -----------------------------------------------------------------------------
    @staticmethod
    def _entity_id(namespace: tuple[str, ...], key: str) -> str:
        return make_entity_id(ITEM_TYPE, json.dumps([*namespace, key], ensure_ascii=False))

    def _load(self, namespace: tuple[str, ...], key: str) -> _Stored | None:
        try:
            entity = self.cb.get_entity(self._entity_id(namespace, key), project=self.project)
        except NotFoundError as exc:
            if exc.kind == "project":  # a project the key may not see is no empty store
                raise
            return None
        return _Stored(entity)

    def _all(self) -> list[_Stored]:
        # the store's own project: empty before its first put
        entities = self.cb.list_entities(type=ITEM_TYPE, project=self.project, new_project=True)
        return [_Stored(e) for e in entities]

    def _text(self, value: dict[str, Any], index: Any) -> str:
        if index is False:
            return ""
        fields = list(index) if isinstance(index, list) else self.index_fields
        if fields is None:
            return "\n".join(_value_lines(value))
        texts: list[str] = []
        for field in fields:
            texts.extend(get_text_at_path(value, tokenize_path(field)))
        return "\n".join(texts)

    def _write(
        self,
        namespace: tuple[str, ...],
        key: str,
        value: dict[str, Any],
        *,
        text: str,
        created_at: float,
        ttl: float | None,
        version: int | None,
    ) -> None:
        now = time.time()
        self.cb.upsert_entity(
            ITEM_TYPE,
            json.dumps([*namespace, key], ensure_ascii=False),
            text,
            id=self._entity_id(namespace, key),
            properties={
                "namespace": list(namespace),
                "key": key,
                "value": value,
                "created_at": created_at,
                "updated_at": now,
                "ttl": ttl,
                "expires_at": None if ttl is None else now + ttl * 60.0,
            },
            project=self.project,
            keep_history=False,  # a put overwrites, as BaseStore says
            version=version,  # one past the version read: a write since is a ConflictError
        )

    def _delete(self, entity_ids: list[str]) -> None:
        if not entity_ids:
            return
        # deleting a key that is not there (or deleted already) is no error for a BaseStore;
        # a project the key may not see is
        try:
            if self.hard_delete:
                self.cb.forget(entity_ids=entity_ids, project=self.project)
            else:
                self.cb.set_hidden(entity_ids, True, project=self.project)
        except NotFoundError as exc:
            if exc.kind == "project":
                raise

    def _refresh(self, stored: _Stored, refresh: bool) -> None:
        """Push the expiry of an item with a TTL out again, as reading it counts as use.
        `refresh` is the op's, in which BaseStore already read `refresh_on_read`.

        The item is written back as it was read, one version on, on condition: a put (or
        another read's refresh) since then keeps its value, and its own expiry. A key that
        may only read leaves the expiry as it is: the read itself still answers."""
        if not refresh or stored.ttl is None:
            return
        entity = stored.entity
        props = {**entity.properties, "expires_at": time.time() + stored.ttl * 60.0}
        from ..serve.errors import PermissionDeniedError

        with suppress(ConflictError, PermissionDeniedError):
            self.cb.upsert_entity(
                ITEM_TYPE,
                entity.name,
                entity.text,
                id=entity.id,
                properties=props,
                project=self.project,
                keep_history=False,  # only the expiry moved
                version=entity.version + 1,
            )

    def sweep_ttl(self) -> int:
        """Delete (hide, or with `hard_delete` forget) every expired item now; returns how
        many went. Expired items are out of every read before that: the store's, and (by
        their entity's `expires_at`, retrieve/expiry.py) ctxbase's searches and assemblies."""
        now = time.time()
        expired = [s.entity_id for s in self._all() if s.expired(now)]
        self._delete(expired)
        return len(expired)

    # -- operations --------------------------------------------------------------------------
    def _get(self, op: GetOp, now: float) -> Item | None:
        stored = self._load(op.namespace, op.key)
        if stored is None or stored.expired(now):
            return None
        self._refresh(stored, op.refresh_ttl)
        return stored.item()

    def _search(self, op: SearchOp, now: float) -> list[SearchItem]:
        prefix = tuple(op.namespace_prefix)
        everything = self._all()
        candidates = {
            s.entity_id: s
            for s in everything
            if s.namespace[: len(prefix)] == prefix
            and not s.expired(now)
            and all(_matches(s.value.get(k), v) for k, v in (op.filter or {}).items())
        }
        ranked: list[tuple[_Stored, float | None]] = []
        if op.query and op.query.strip() and candidates:  # blank: no query, as LangGraph
            response = self.cb.search(
                op.query,
                project=self.project,
                preset=self.search_preset,
                filters=ItemFilter(types=(ITEM_TYPE,)),
                # Other namespaces' items compete in the ranking: ask for all of them.
                top_k=min(MAX_RANKED, len(everything)),
            )
            for c in response.results:
                found = candidates.pop(c.item.owner_id, None)
                if found is not None:
                    ranked.append((found, c.score))
        # Unranked (no query, or no match for it): most recently updated first.
        rest = sorted(candidates.values(), key=lambda s: -s.updated_at)
        ranked.extend((s, None) for s in rest)
        page = ranked[op.offset : op.offset + op.limit]
        for stored, _ in page:
            self._refresh(stored, op.refresh_ttl)
        return [s.item(score, search=True) for s, score in page]  # type: ignore[misc]

    def _list_namespaces(self, op: ListNamespacesOp, now: float) -> list[tuple[str, ...]]:
        namespaces = {s.namespace for s in self._all() if not s.expired(now)}
        if op.match_conditions:
            namespaces = {
                ns
                for ns in namespaces
                if all(_namespace_matches(c, ns) for c in op.match_conditions)
            }
        if op.max_depth is not None:
            namespaces = {ns[: op.max_depth] for ns in namespaces}
        return sorted(namespaces)[op.offset : op.offset + op.limit]

    def _put(self, op: PutOp) -> None:
        if op.value is None:
            self._delete([self._entity_id(op.namespace, op.key)])
            return
        # BaseStore.put puts the default_ttl into an op that names no ttl; None here is
        # "no expiration", as LangGraph's own stores read it
        ttl = op.ttl
        if ttl is not None and (
            isinstance(ttl, bool) or not isinstance(ttl, int | float) or not 0 < ttl < math.inf
        ):  # a ttl of -1 would write an item that has expired already
            raise ValidationError("ttl", f"must be a positive number of minutes (got {ttl!r})")
        value = dict(op.value)
        try:  # stored as JSON: a date, bytes or NaN is named here, not by a TypeError
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise ValidationError("value", f"must be JSON data: {exc}") from None
        text = self._text(value, op.index)
        for attempt in range(_PUT_TRIES):
            old = self._load(op.namespace, op.key)
            fresh = old is None or old.expired(time.time())  # an expired item is put afresh
            try:
                self._write(
                    op.namespace,
                    op.key,
                    value,
                    text=text,
                    created_at=time.time() if fresh or old is None else old.created_at,
                    ttl=ttl,
                    version=None if old is None else old.entity.version + 1,
                )
                return
            except ConflictError:  # written since it was read (a put, a read's refresh)
                if attempt == _PUT_TRIES - 1:
                    raise
            except ValidationError as exc:  # the item's limits are its value's
                raise _as_value_error(exc) from None

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Reads see the state before the batch's writes; of several puts to one key the
        last wins (as in LangGraph's InMemoryStore)."""
        results: list[Result] = []
        puts: dict[tuple[tuple[str, ...], str], PutOp] = {}
        now = time.time()
        with self._lock:
            for op in ops:
                if isinstance(op, GetOp):
                    results.append(self._get(op, now))
                elif isinstance(op, SearchOp):
                    results.append(self._search(op, now))
                elif isinstance(op, ListNamespacesOp):
                    results.append(self._list_namespaces(op, now))
                elif isinstance(op, PutOp):
                    puts[(tuple(op.namespace), op.key)] = op
                    results.append(None)
                else:
                    raise ValueError(f"unknown store operation: {type(op).__name__}")
            for put in puts.values():
                self._put(put)
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await asyncio.to_thread(self.batch, list(ops))


def _as_value_error(exc: ValidationError) -> ValidationError:
    """An entity's `properties` error as the store's caller wrote it: `value` (the
    properties hold the value under "value", and the sizes count it)."""
    field = exc.field
    if field.startswith("properties.value"):
        field = "value" + field[len("properties.value") :]
    elif field == "properties":
        field = "value"
    return exc if field == exc.field else ValidationError(field, exc.message)
