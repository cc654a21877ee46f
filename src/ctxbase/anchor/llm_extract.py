"""Entities and relations a chat model finds in an event's text (seed 001: GraphRAG over
prose), added to what the rules found. Off unless configured.

Any OpenAI-compatible `/chat/completions` endpoint works (`LLMExtractConfig`: base URL,
model, the environment variable holding the API key). Only the capture anchoring thread
calls it, after the rules have anchored the event: a capture, a search or an assembly never
waits on it. What it answers is checked item by item: entity types are mapped to the typed
entities (`mention` with a kind, `requirement`, `decision`, or a known table, file, code
symbol or document of that name), relation confidences are clamped to [0, 1], and every edge
has source `ctxbase:llm`. An answer that is not the JSON asked for is ignored with a
warning; a timeout, a refused connection or an HTTP error is counted (`LLMExtractStats`),
logged once per distinct cause, and for `retry_after_s` afterwards events are anchored by
the rules alone, as they are whenever the model fails.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from ..errors import CtxbaseError
from ..model import make_entity_id

if TYPE_CHECKING:  # capture_anchor reads the config: the client and the weaving load on use
    import httpx

    from ..components import Components
    from ..model import Event
    from .weave import Link, SymbolIndex

__all__ = [
    "ENTITY_KINDS",
    "LOGGER_NAME",
    "SYSTEM_PROMPT",
    "ExtractionHTTPError",
    "LLMEntity",
    "LLMExtractConfig",
    "LLMExtractStats",
    "LLMExtraction",
    "LLMExtractor",
    "LLMRelation",
    "MalformedAnswer",
    "entity_kind",
    "llm_links",
    "parse_extraction",
]

LOGGER_NAME = "ctxbase.anchor.llm"
log = logging.getLogger(LOGGER_NAME)

# What the model may call a thing -> the kind it is anchored as: `requirement` and
# `decision` entities, else a known entity of that kind or a `mention` entity of the kind.
_KIND_WORDS: dict[str, tuple[str, ...]] = {
    "person": ("person", "people", "user", "developer", "engineer", "owner", "member", "human"),
    "table": ("table", "database_table", "db_table", "view", "sql_table"),
    "file": ("file", "path", "file_path", "filename"),
    "api": ("api", "endpoint", "route", "api_route", "url"),
    "code": ("code", "function", "class", "method", "module", "symbol", "variable"),
    "document": ("document", "doc", "spec", "specification", "guide", "standard", "manual"),
    "requirement": ("requirement", "constraint", "need"),
    "decision": ("decision", "choice"),
}
ENTITY_KINDS = (*_KIND_WORDS, "concept")  # "concept": anything else (a service, a library...)
_KIND_OF = {word: kind for kind, words in _KIND_WORDS.items() for word in words}
_RELATION_TYPE = re.compile(r"[A-Z][A-Z0-9_]{0,63}")
_MAX_NAME = 200

SYSTEM_PROMPT = (
    "You extract a knowledge graph from one message of a software team's conversation. "
    'Answer with one JSON object and nothing else: {"entities": [{"name": str, "type": '
    'str}], "relations": [{"from": str, "to": str, "type": str, "confidence": number}]}. '
    "Entity types: person, table, file, api, function, class, document, requirement, "
    "decision, or concept. Relation types are UPPER_SNAKE_CASE verbs (USES, READS, WRITES, "
    "OWNS, DEPENDS_ON, FOLLOWS, REFERENCES...); `from` and `to` are entity names; "
    "confidence is between 0 and 1. Only what the message says; no entity, no relation "
    "when unsure."
)


class LLMExtractConfig(BaseModel):
    """Where the extraction model is; see the module doc. Off unless one is given."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    base_url: str = Field(min_length=1)  # the API root, ".../v1"
    model: str = Field(min_length=1)
    # The name of the environment variable holding the key (the key is never stored here).
    api_key_env: str | None = "CTXBASE_EXTRACT_API_KEY"
    timeout_s: float = Field(default=20.0, gt=0)
    # After a failure the endpoint is left alone this long (events get the rules only).
    retry_after_s: float = Field(default=30.0, ge=0)
    max_chars: int = Field(default=6000, ge=100)  # longer texts are cut before sending
    event_types: tuple[str, ...] = ("user_message", "assistant_message", "system")
    json_mode: bool = True  # ask for response_format json_object

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> LLMExtractConfig | None:
        """The endpoint named by CTXBASE_EXTRACT_BASE_URL and CTXBASE_EXTRACT_MODEL (key in
        CTXBASE_EXTRACT_API_KEY), or None: extraction stays off."""
        source = os.environ if env is None else env
        base_url = source.get("CTXBASE_EXTRACT_BASE_URL", "").strip()
        model = source.get("CTXBASE_EXTRACT_MODEL", "").strip()
        if not base_url or not model:
            return None
        return cls(base_url=base_url, model=model)

    def api_key(self) -> str | None:
        """The key, read from `api_key_env` when it is needed (None: no key is sent)."""
        return (os.environ.get(self.api_key_env) or None) if self.api_key_env else None


@dataclass(frozen=True)
class LLMEntity:
    name: str
    kind: str  # one of ENTITY_KINDS
    llm_type: str  # the type the model gave


@dataclass(frozen=True)
class LLMRelation:
    from_name: str
    to_name: str
    type: str
    confidence: float  # clamped to [0, 1]


@dataclass(frozen=True)
class LLMExtraction:
    entities: tuple[LLMEntity, ...]
    relations: tuple[LLMRelation, ...]
    ignored: tuple[str, ...] = ()  # why items of the answer were left out


@dataclass
class LLMExtractStats:
    """Calls to the extraction model: answered, ignored as malformed, failed, skipped."""

    requests: int = 0
    extracted: int = 0  # answers used
    malformed: int = 0  # answers that were not the JSON asked for
    errors: int = 0  # HTTP errors and refused connections
    timeouts: int = 0
    skipped: int = 0  # events anchored by rules alone while the endpoint was left alone
    last_error: str | None = None


def entity_kind(llm_type: str) -> str:
    """The kind an entity type the model gave is anchored as (see ENTITY_KINDS)."""
    word = re.sub(r"[\s-]+", "_", llm_type.strip().lower())
    for candidate in (word, word.rsplit("_", 1)[-1]):  # "API endpoint": an endpoint
        kind = _KIND_OF.get(candidate) or _KIND_OF.get(candidate.removesuffix("s"))
        if kind is not None:
            return kind
    return "concept"


class MalformedAnswer(ValueError):
    """The model's answer is not the JSON object asked for."""


def _json_object(content: str) -> dict[str, Any]:
    text = content.strip()
    fenced = re.fullmatch(r"```(?:json)?\s*(.*?)\s*```", text, re.DOTALL)
    if fenced:
        text = fenced.group(1)
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise MalformedAnswer(f"not JSON ({exc})") from exc
    if not isinstance(value, dict):
        raise MalformedAnswer(f"a JSON {type(value).__name__}, not an object")
    return value


def _name(value: Any) -> str | None:
    if not isinstance(value, str) or not value.strip():
        return None
    return " ".join(value.split())[:_MAX_NAME]


def parse_extraction(content: str) -> LLMExtraction:
    """Entities and relations from the model's answer; items of the wrong shape are left
    out (and said why). MalformedAnswer when the answer is not such an object at all."""
    body = _json_object(content)
    raw_entities, raw_relations = body.get("entities", []), body.get("relations", [])
    if not isinstance(raw_entities, list) or not isinstance(raw_relations, list):
        raise MalformedAnswer("'entities' and 'relations' must be lists")
    ignored: list[str] = []
    entities: dict[str, LLMEntity] = {}
    for n, item in enumerate(raw_entities):
        name = _name(item.get("name")) if isinstance(item, dict) else None
        kind = item.get("type") if isinstance(item, dict) else None
        if name is None or not isinstance(kind, str):
            ignored.append(f"entities[{n}]: needs a name and a type")
            continue
        entities.setdefault(name.casefold(), LLMEntity(name, entity_kind(kind), kind[:64]))
    relations: list[LLMRelation] = []
    for n, item in enumerate(raw_relations):
        if not isinstance(item, dict):
            ignored.append(f"relations[{n}]: not an object")
            continue
        ends = _name(item.get("from")), _name(item.get("to"))
        rtype = re.sub(r"[\s-]+", "_", str(item.get("type") or "").strip()).upper()
        confidence = item.get("confidence", 0.8)
        if ends[0] is None or ends[1] is None or ends[0].casefold() == ends[1].casefold():
            ignored.append(f"relations[{n}]: needs two different entity names")
        elif not _RELATION_TYPE.fullmatch(rtype):
            ignored.append(f"relations[{n}]: type {item.get('type')!r} is not a relation type")
        elif isinstance(confidence, bool) or not isinstance(confidence, int | float):
            ignored.append(f"relations[{n}]: confidence {confidence!r} is not a number")
        elif confidence != confidence:  # NaN
            ignored.append(f"relations[{n}]: confidence is NaN")
        else:
            clamped = max(0.0, min(1.0, float(confidence)))
            relations.append(LLMRelation(ends[0], ends[1], rtype, round(clamped, 3)))
    return LLMExtraction(tuple(entities.values()), tuple(relations), tuple(ignored))


class LLMExtractor:
    """One client per anchoring worker: its counts, its pause after a failure."""

    def __init__(self, config: LLMExtractConfig) -> None:
        self.config = config
        self._lock = threading.Lock()
        self._stats = LLMExtractStats()
        self._paused_until = 0.0
        self._logged: str | None = None
        self._client: httpx.Client | None = None

    def stats(self) -> LLMExtractStats:
        with self._lock:
            return LLMExtractStats(**vars(self._stats))

    def close(self) -> None:
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()

    def wants(self, event_type: str, text: str) -> bool:
        return event_type in self.config.event_types and bool(text.strip())

    def extract(self, text: str) -> LLMExtraction | None:
        """What the model finds in `text`, or None (counted, logged) when it cannot say:
        the caller keeps what the rules found."""
        with self._lock:
            if time.monotonic() < self._paused_until:
                self._stats.skipped += 1
                return None
            self._stats.requests += 1
        try:
            content = self._complete(text[: self.config.max_chars])
            found = parse_extraction(content)
        except MalformedAnswer as exc:
            self._count("malformed", f"the model's answer was ignored: {exc}")
            log.warning("LLM extraction (%s): answer ignored: %s", self.config.model, exc)
            return None
        except Exception as exc:  # any failure of the endpoint: the rules' anchoring stands
            self._failed(exc)
            return None
        for why in found.ignored:
            log.warning("LLM extraction (%s): %s ignored", self.config.model, why)
        with self._lock:
            self._stats.extracted += 1
        return found

    def record_error(self, error: str) -> None:
        """A failure past the endpoint (writing what it found): counted like its own."""
        self._count("errors", error)

    def _count(self, counter: str, error: str) -> None:
        with self._lock:
            setattr(self._stats, counter, getattr(self._stats, counter) + 1)
            self._stats.last_error = error

    def _failed(self, exc: Exception) -> None:
        try:
            import httpx

            timeout = isinstance(exc, httpx.TimeoutException)
        except ImportError:  # the extra is missing: that is the failure
            timeout = False
        cause = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        message = f"LLM extraction at {self.config.base_url} failed: {cause}"
        self._count("timeouts" if timeout else "errors", message)
        with self._lock:
            self._paused_until = time.monotonic() + self.config.retry_after_s
            first = self._logged != message
            self._logged = message
        if first:  # once per distinct cause, as the embedder's failures are
            log.warning("%s; events are anchored by rules only", message)

    def _http(self) -> httpx.Client:
        with self._lock:
            if self._client is None:
                from ..retrieve.embed.base import openai_http_client

                self._client = openai_http_client(
                    self.config.base_url,
                    self.config.api_key() or None,
                    self.config.timeout_s,
                    "LLM entity extraction",
                )
            assert self._client is not None
            return self._client

    def _complete(self, text: str) -> str:
        payload: dict[str, Any] = {
            "model": self.config.model,
            "temperature": 0,
            "messages": [
                {"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": text},
            ],
        }
        if self.config.json_mode:
            payload["response_format"] = {"type": "json_object"}
        response = self._http().post("chat/completions", json=payload)
        if response.status_code != 200:
            raise ExtractionHTTPError(f"HTTP {response.status_code}: {response.text[:200]}")
        try:
            content = response.json()["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise MalformedAnswer("not a chat completion") from exc
        if not isinstance(content, str):
            raise MalformedAnswer("a chat completion without text content")
        return content


class ExtractionHTTPError(RuntimeError):
    """The endpoint answered with an HTTP error."""


def _known_owner(ent: LLMEntity, index: SymbolIndex) -> str | None:
    """The one known entity of the project the name stands for, if there is exactly one."""
    owners: list[str] = []
    if ent.kind == "table":
        owners = index.table(ent.name)
    elif ent.kind == "file":
        owners = index.paths.get(ent.name) or index.basenames.get(ent.name, [])
    elif ent.kind == "code":
        owners = index.qualified.get(ent.name) or index.bare.get(ent.name, [])
    elif ent.kind == "document":
        from .extract import match_document

        titles = {eid: title for title, ids in index.titles.items() for eid in ids}
        hit = match_document(ent.name, titles)
        owners = [hit[0]] if hit is not None else []
    return owners[0] if len(owners) == 1 else None


def _entity_id(
    cb: Components,
    ev: Event,
    ent: LLMEntity,
    index: SymbolIndex,
    known: dict[str, str],
    stated: Mapping[tuple[str, str], str],
) -> str:
    """The entity a name the model found is anchored as (written when it is new)."""
    if ent.kind in ("requirement", "decision"):
        folded = ent.name.casefold()
        for (kind, text), eid in stated.items():  # the rules found the same sentence
            if kind == ent.kind and (folded in text.casefold() or text.casefold() in folded):
                return eid
        eid = make_entity_id(ent.kind, f"{ev.id}#llm:{ent.name}")
        if not cb.store.get_entities(ev.project_id, [eid]):
            props: dict[str, object] = {
                "session_id": ev.session_id,
                "event_id": ev.id,
                "said_at": ev.ts,  # when it was said: what time decay and dates read
                "agent_id": ev.agent_id,
                "rule": "ctxbase:llm",
                "llm_type": ent.llm_type,
            }
            name = ent.name if len(ent.name) <= 80 else ent.name[:79] + "…"
            cb.upsert_entity(
                ent.kind, name, ent.name, id=eid, properties=props, project=ev.project_id
            )
        return eid
    owner = _known_owner(ent, index)
    if owner is not None:
        return owner
    value = ent.name.lower() if ent.kind == "table" else ent.name
    target = make_entity_id("mention", f"{ent.kind}:{value}")  # as the rules name mentions
    if known.get(value.lower()) != target and not cb.store.get_entities(ev.project_id, [target]):
        cb.upsert_entity(
            "mention",
            value,
            f"{ent.kind} {value}",
            id=target,
            properties={"kind": ent.kind, "rule": "ctxbase:llm", "llm_type": ent.llm_type},
            project=ev.project_id,
        )
    known[value.lower()] = target
    return target


def llm_links(
    cb: Components,
    ev: Event,
    found: LLMExtraction,
    index: SymbolIndex,
    known: dict[str, str],
    stated: Mapping[tuple[str, str], str] | None = None,
) -> list[Link]:
    """The edges of what the model found in `ev`: the event MENTIONS each entity (GENERATES
    a requirement or a decision), and the relations between them; source `ctxbase:llm`.
    `known` maps mention names to ids (updated); `stated` maps the rules' (kind, sentence)
    to their requirement and decision entities, so one sentence is one entity."""
    from .weave import Link

    ids: dict[str, str] = {}
    links: list[Link] = []
    for ent in found.entities:
        try:
            eid = _entity_id(cb, ev, ent, index, known, stated or {})
        except CtxbaseError as exc:  # e.g. a name that is not valid text: left out
            log.warning("LLM extraction (%s): entity %r ignored: %s", ev.id, ent.name, exc)
            continue
        ids[ent.name.casefold()] = eid
        rel = "GENERATES" if ent.kind in ("requirement", "decision") else "MENTIONS"
        props = {"llm_type": ent.llm_type}
        links.append(Link(ev.id, rel, eid, 0.7, "llm", props, origin="ctxbase"))
    for r in found.relations:
        a, b = ids.get(r.from_name.casefold()), ids.get(r.to_name.casefold())
        if a is None or b is None or a == b:
            log.warning(
                "LLM extraction (%s): relation %s %s %s ignored: it names no listed entity",
                ev.id,
                r.from_name,
                r.type,
                r.to_name,
            )
            continue
        links.append(Link(a, r.type, b, r.confidence, "llm", origin="ctxbase"))
    return links
