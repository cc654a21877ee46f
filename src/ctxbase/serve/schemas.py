"""Request and response bodies of the REST API (frozen pydantic models).

Responses that are library records (Event, Entity, Relation, SessionInfo, TaskInfo,
StateFact) use the library's own models, so the remote SDK rebuilds the same objects.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    ValidationInfo,
    field_validator,
    model_validator,
)

from ..assemble.loop import ProducedRelation
from ..capture.event_fields import rest_event_fields
from ..errors import ValidationError
from ..memory_feedback import Feedback
from ..model import Event
from ..retrieve.config import check_not_filters, filter_field
from ..validation import INT64_MAX, INT64_MIN, MAX_QUERY_CHARS, MessageShape, check_text

__all__ = [
    "AssembleIn",
    "AssembleOut",
    "BatchOut",
    "CaptureOut",
    "CaptureStatsOut",
    "ChangedOut",
    "CloseRelationIn",
    "ClosedOut",
    "DeletedOut",
    "EntityIn",
    "EventBatchIn",
    "EventIn",
    "EventNotStoredOut",
    "ExpireIdleIn",
    "ExpiredOut",
    "FeedbackIn",
    "FeedbackOut",
    "FilterIn",
    "ForgetIn",
    "ForgetOut",
    "GraphHitOut",
    "IdleOut",
    "IdsIn",
    "IdsOut",
    "LifecycleIn",
    "MessagesIn",
    "OutcomeIn",
    "OutcomeOut",
    "ProducedIn",
    "ProjectsOut",
    "RelationIn",
    "RollbackIn",
    "RollbackOut",
    "SearchHitOut",
    "SearchIn",
    "SearchItemOut",
    "SearchOptionsIn",
    "SearchOut",
    "SessionIn",
    "StateChangeOut",
    "StateSetIn",
    "SwitchTaskIn",
    "TaskIn",
]


# Integers that reach a database column: signed 64-bit.
Int64 = Annotated[int, Field(ge=INT64_MIN, le=INT64_MAX)]


class _In(BaseModel):
    # NaN and Infinity (which Python's JSON parser accepts) are refused in every number
    # field; JSON values (data, properties...) are checked by the library (validation.py).
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    @field_validator("*")
    @classmethod
    def _valid_unicode(cls, value: Any, info: ValidationInfo) -> Any:
        """Strings must be valid Unicode: JSON's "\\ud800" decodes to a lone surrogate."""
        name = info.field_name or "body"
        if isinstance(value, str):
            check_text(name, value)
        elif isinstance(value, list):
            for i, item in enumerate(value):
                if isinstance(item, str):
                    check_text(f"{name}[{i}]", item)
        return value


class _Out(BaseModel):
    model_config = ConfigDict(frozen=True)


# -- capture -------------------------------------------------------------------------------
class EventIn(_In):
    """One event; every request stores a new one. A retried request writes nothing twice
    when it carries the same `id` (assigned by the client, starting "ev_"; the SDK does) or
    the same `idempotency_key` (also read from the Idempotency-Key header). Seed 001's
    names are accepted too: `event_type` (type), `content` (text; an object or list is the
    data), `timestamp` (ts) and `event_id` (id); `ts`/`timestamp` take epoch seconds or an
    ISO-8601 string. Any other field is refused (422) naming it and the accepted ones."""

    type: str
    session_id: str
    text: str | None = None
    data: Any = None
    agent_id: str | None = Field(
        default=None, description="default: the API key's identity (key:<key id>)"
    )
    agent_role: str | None = None
    task_id: str | None = None
    parent_event_ids: list[str] = Field(default_factory=list)
    refers_to: list[str] = Field(default_factory=list)
    importance: float = 0.5
    metadata: dict[str, Any] = Field(default_factory=dict)
    ts: float | None = Field(
        default=None,
        description="epoch seconds; an ISO-8601 string is read too (UTC without an offset)",
    )
    id: str | None = None
    idempotency_key: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _article_names(cls, data: Any) -> Any:
        if isinstance(data, dict):
            return rest_event_fields(data, cls.model_fields)
        return data


class EventBatchIn(_In):
    events: list[EventIn]
    wait: bool = Field(
        default=True,
        description="true: stored when the answer comes (201, with seq); false: queued "
        "like `events/queue` (202, not durable until a flush)",
    )


class CaptureOut(_Out):
    id: str | None = Field(description="the event id; null if dropped under backpressure")
    durable: bool = Field(
        default=False, description="always false: queued, on disk after the next flush"
    )


class BatchOut(_Out):
    ids: list[str | None]
    events: list[Event] | None = Field(default=None, description="the stored events (wait)")
    durable: bool = Field(
        default=True,
        description="true: on disk when this answer comes (wait); false: queued, on disk "
        "after the next flush",
    )
    forgotten: list[str] | None = Field(
        default=None,
        description="ids of events not written because the project forgot them (wait): a "
        "forgotten id is never written again; such an event is in `events` as sent",
    )


class EventNotStoredOut(Event):
    """The answer to POST /events of an id the project forgot (200, not 201): the event as
    sent, not written (a stale retry of a forgotten event is never written again)."""

    stored: Literal[False] = False
    reason: Literal["forgotten"] = "forgotten"


class MessagesIn(_In):
    messages: list[dict[str, Any]]
    session_id: str
    user_id: str = "user"
    # None: the server's agent id, else "assistant" (the SDK sends the client's agent id)
    assistant_id: str | None = None
    assistant_role: str | None = None
    task_id: str | None = None
    sync: bool = False
    # the same key for a retry of the same call (also read from the Idempotency-Key header)
    idempotency_key: str | None = None
    # what the list is: left to the base to tell, only new messages, or the whole history
    shape: MessageShape = "auto"


class IdsOut(_Out):
    ids: list[str]


class CaptureStatsOut(_Out):
    submitted: int
    written: int
    duplicates: int
    dropped_low_priority: int
    aggregated: int
    written_by_caller: int
    write_errors: int
    refused: int = 0
    queue_depth: int
    last_error: str | None = None
    last_error_projects: list[str] = []


# -- sessions and tasks --------------------------------------------------------------------
class SessionIn(_In):
    title: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class TaskIn(_In):
    session_id: str
    parent_task_id: str | None = None
    title: str = ""
    # null: a new task is created, an existing one keeps its status
    status: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class LifecycleIn(_In):
    cause: str | None = Field(default=None, max_length=500)


class SwitchTaskIn(_In):
    goal: str = ""
    task_id: str | None = None
    parent_task_id: str | None = None
    background: str | None = None


class ExpireIdleIn(_In):
    idle_timeout_s: float | None = Field(default=None, gt=0)


class ExpiredOut(_Out):
    expired: list[str]


class CompactArchivedIn(_In):
    # seconds, or a duration such as "30d" (forgetting.parse_duration)
    older_than: float | str


class CompactedOut(_Out):
    compacted: list[str]
    events_hidden: int
    already_compacted: list[str]
    too_recent: list[str]
    nothing_to_compact: list[str]


class IdleOut(_Out):
    idle: bool
    # The backlog after the wait: items of `project` with no vector for `model` (0 when the
    # server makes no vectors). `project` is the one asked for, else the key's one project,
    # else the server's default when the key sees it; None (and no count) otherwise. A wait
    # for all projects names none and counts every project's backlog.
    project: str | None = None
    pending_vectors: int | None = None
    model: str | None = None


class ProjectsOut(_Out):
    projects: list[str]


# -- entities and relations ------------------------------------------------------------------
class EntityIn(_In):
    """An entity. Seed 000's names are accepted too: `entity_type` (type), `entity_id`
    (id; it names an entity given no name) and the text as `properties.content`."""

    type: str | None = None
    name: str | None = None
    text: str = ""
    id: str | None = None
    entity_type: str | None = None
    entity_id: str | None = None
    properties: dict[str, Any] = Field(default_factory=dict)
    # given: a conditional write (409 when older than the stored version)
    version: int | None = Field(default=None, ge=1, le=INT64_MAX)
    # false: overwrite in place, keeping no `<id>@v<n>` copy of the previous version
    keep_history: bool = True


class RelationIn(_In):
    """An edge. Seed 000's names are accepted too: `edge_type` (type), and the confidence
    and source as `properties`; with no source the API key's identity is the source."""

    from_id: str
    type: str | None = None
    to_id: str
    source: str | None = None
    edge_type: str | None = None
    # null: 1.0 for a new edge; an existing edge keeps its confidence
    confidence: float | None = None
    properties: dict[str, Any] = Field(default_factory=dict)
    check_nodes: bool = True


class CloseRelationIn(_In):
    at: float | None = None


class ClosedOut(_Out):
    closed: bool


class GraphHitOut(_Out):
    node_id: str
    hops: int
    confidence: float
    via: dict[str, Any] | None
    seed_id: str


# -- search ----------------------------------------------------------------------------------
class FilterIn(_In):
    session_ids: list[str] | None = None
    agent_ids: list[str] | None = None
    agent_roles: list[str] | None = None
    types: list[str] | None = None
    kinds: list[str] | None = None
    owner_ids: list[str] | None = None
    repos: list[str] | None = Field(
        default=None, description="ingested repositories (names as `ctxbase ingest` gave them)"
    )
    path_prefix: str | None = None
    line_from: Int64 | None = None
    line_to: Int64 | None = None
    since: float | None = None
    until: float | None = None
    latest_only: bool = False
    exclude_session_ids: list[str] | None = Field(
        default=None, description="items of any session but these (and of no session)"
    )


class SearchOptionsIn(_In):
    """SearchConfig fields to change from the preset (top_k, graph_hops, ...), and nothing
    else: the project comes from the path, `preset` and `filters` are fields of the request
    itself, and signatures are checked with the server's key only. Unknown fields are
    refused (422, naming `options.<field>`); values are checked by SearchConfig."""

    keyword: bool | None = None
    keyword_index: bool | None = None
    semantic: bool | None = None
    candidates: int | None = None
    fusion: Literal["rrf", "weighted"] | None = None
    rrf_k: int | None = None
    keyword_weight: float | None = None
    semantic_weight: float | None = None
    graph_weight: float | None = None
    min_similarity: float | None = None
    graph_hops: int | None = None
    graph_seeds: int | None = None
    graph_types: list[str] | None = None
    graph_exclude_types: list[str] | None = None
    mention_fanout: int | None = None
    relation_thresholds: dict[str, float] | None = None
    session_window: int | None = None
    actor_boost: float | None = None
    question_weight: float | None = None
    subject_actor: bool | None = None
    role_names: bool | None = None
    team_actors: bool | None = None
    number_boost: float | None = None
    standout_boost: float | None = None
    standout_gap: float | None = None
    date_boost: float | None = None
    yearless_date_boost: float | None = None
    period_weight: float | None = None
    relative_date_boost: float | None = None
    actor_free_query: bool | None = None
    clause_weight: float | None = None
    clause_semantic: bool | None = None
    decomp_weight: float | None = None
    decomp_semantic: bool | None = None
    rewrite_weight: float | None = None
    rewrite_semantic: bool | None = None
    coverage_boost: float | None = None
    coverage_window: int | None = None
    rerank_top: int | None = None
    # a model file on the server: named in the server's own configuration, never by a
    # request (no client chooses which server file is read); null is accepted as the SDK
    # sends every setting
    rerank_model: str | None = None
    query_adapter: bool | None = None
    query_adapter_file: str | None = None  # a server file, as rerank_model
    feedback_weight: float | None = None
    feedback_seeds: int | None = None
    feedback_terms: int | None = None
    term_bridge: float | None = None
    term_bridge_cap: int | None = None
    dense_feedback_weight: float | None = None
    dense_feedback_seeds: int | None = None
    dense_feedback_mix: float | None = None
    session_key_weight: float | None = None
    session_keys: int | None = None
    time_decay_half_life_days: float | None = None
    decay_spare_uses: int | None = None
    decay_spare_relations: tuple[str, ...] | None = None
    importance_weight: float | None = None
    confidence_weight: float | None = None
    min_confidence: float | None = None
    tool_error_confidence: float | None = None
    relevance_gate: bool | None = None
    relevance_floor: float | None = None
    recency_order: bool | None = None
    dedupe_threshold: float | None = None
    top_k: int | None = None
    dynamic_top_k: tuple[int, int] | None = None
    token_allowance: int | None = None
    latest_only: bool | None = None
    kb_version: str | None = Field(
        default=None,
        description="the knowledge-base version searched: a `kb tag` name, or `latest` "
        "whatever is pinned (default: the pinned version, else the latest)",
    )

    @field_validator("rerank_model", "query_adapter_file")
    @classmethod
    def _no_server_file(cls, value: str | None) -> None:
        if value is not None:
            raise ValueError(
                "names a file on the server, which no request may choose: searches over "
                "REST use the shipped model and map"
            )
        return None

    def overrides(self) -> dict[str, Any]:
        """The fields the request set (an explicit null included), for get_preset."""
        return self.model_dump(exclude_unset=True)

    @model_validator(mode="before")
    @classmethod
    def _no_filters(cls, data: Any) -> Any:
        if isinstance(data, dict):  # the SDK's search(session_id=...) lands here
            check_not_filters(data, prefix="options.")
            for name in data:  # preset, filters, ...: the request's own, next to query
                if name not in cls.model_fields and name in SearchIn.model_fields:
                    raise ValidationError(
                        f"options.{name}",
                        f"is a field of the request, not an option: send it as {name}, "
                        "next to query",
                    )
        return data


# "k" is what other search APIs call top_k.
_OPTION_ALIASES = {"k": "top_k"}


class SearchIn(_In):
    """A search. SearchConfig fields go in `options`: one sent at the top level (`top_k`,
    or `k`) is refused (422) with the name it belongs under, rather than left unused."""

    query: str = Field(
        json_schema_extra={"maxLength": MAX_QUERY_CHARS},
        description=f"at most {MAX_QUERY_CHARS} characters",
    )
    preset: str = "hybrid"
    filters: FilterIn | None = None
    options: SearchOptionsIn = Field(default_factory=SearchOptionsIn)
    include_considered: bool = Field(
        default=False,
        description="also answer `considered`: every candidate ranked, each with why it is "
        "not a result (several times the bytes of the results; the SDK asks for it)",
    )
    require_signature: bool = Field(
        default=False,
        description="serve only units whose signed entity verifies and matches them, and "
        "follow only relations that verify (the server's key: CTXBASE_HMAC_KEY_<PROJECT> or "
        "CTXBASE_HMAC_KEY; never one from the client)",
    )
    new_project: bool = Field(
        default=False,
        description="answer empty if the project holds no data yet instead of 404 (a typo); "
        "the SDK sets it for the project it was connected with, as an embedded base searches "
        "its own",
    )

    @model_validator(mode="before")
    @classmethod
    def _options_at_top_level(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for name in data:
                option = _OPTION_ALIASES.get(name, name)
                if name not in cls.model_fields and option in SearchOptionsIn.model_fields:
                    raise ValidationError(
                        name, f"is not a field of the request: send it as options.{option}"
                    )
                wanted = filter_field(name)
                if name not in cls.model_fields and wanted is not None:
                    raise ValidationError(
                        name, f"is not a field of the request: send it as filters.{wanted}"
                    )
        return data


class SearchItemOut(_Out):
    item_id: str
    owner_id: str
    kind: str
    type: str
    text: str
    terms: str
    ts: float
    session_id: str | None = None
    agent_id: str | None = None
    agent_role: str | None = None
    path: str | None = None
    line_start: int | None = None
    line_end: int | None = None
    latest: bool = True
    importance: float = 0.5
    repo: str | None = None


class SearchHitOut(_Out):
    item: SearchItemOut
    score: float
    keyword_rank: int | None = None
    keyword_score: float | None = None
    semantic_rank: int | None = None
    similarity: float | None = None
    graph_via: str | None = None
    graph_confidence: float | None = None
    dropped: str | None = None
    # feedback or a failed tool result (null: neutral), and time decay with what spared it
    confidence: float | None = None
    confidence_source: str | None = None
    # rated false with a note: the note, the correction that stands for the memory
    correction: str | None = None
    decay: float | None = None
    decay_spared: str | None = None
    # a retracted message, a statement cut from one or an answer repeating one: only with
    # options.min_confidence 0 (which keeps memories rated wrong too) is it a result, marked so
    retracted: bool = False
    # a per-turn tool result of an earlier turn (or a statement cut from one): the same way
    expired: bool = False
    # with a recency cue and a kind named ("the SQL from last time"): its place among them
    recency: str | None = None
    # moved by the learned re-ordering of the top: "learned order: 4 -> 2"
    reordered: str | None = None
    duplicates: list[str] = Field(
        default_factory=list,
        description="ids of the events or entities whose near-identical text this hit "
        "stands for (folded into it: in `considered` as 'near-duplicate of' it); "
        "forgetting the hit leaves them",
    )


class SearchOut(_Out):
    query: str
    results: list[SearchHitOut]
    considered: list[SearchHitOut] = Field(
        default_factory=list,
        description="with `include_considered`: every candidate ranked, `dropped` saying "
        "why one is not a result (below top_k, a near-duplicate, confidence below "
        "min_confidence, retracted, expired), as the library's SearchResponse.considered; "
        "else empty",
    )
    timings_ms: dict[str, float]
    tampered: list[str] = Field(default_factory=list)
    unsigned: int = Field(
        default=0,
        description="with require_signature: how many unsigned entities among the ranked "
        "candidates were left out (0 otherwise)",
    )
    pending_vectors: int = Field(
        default=0, description="items with no vector yet (found by keyword and graph only)"
    )
    embedder_error: str | None = Field(
        default=None, description="why the semantic part was left out (the embedder failed)"
    )
    off_topic: str | None = Field(
        default=None,
        description="with options.relevance_gate: why nothing was returned (no hit is about "
        "the query)",
    )
    rewrites: list[str] = Field(
        default_factory=list,
        description="with a query-rewriting model on the server (CTXBASE_REWRITE_*): the "
        "alternative wordings searched too",
    )
    rewrite_error: str | None = Field(
        default=None,
        description="why the rewriting model gave no alternatives (the search went on "
        "without them)",
    )


# -- assembly --------------------------------------------------------------------------------
class AssembleIn(_In):
    """Seed 000's request: project, the agent's role and the user's intent."""

    project_id: str | None = Field(
        default=None, description="may be left out when the key is for exactly one project"
    )
    agent_role: str
    user_intent: str = Field(
        json_schema_extra={"maxLength": MAX_QUERY_CHARS},
        description=f"at most {MAX_QUERY_CHARS} characters",
    )
    session_id: str | None = None
    task_id: str | None = None
    max_tokens: Int64 | None = None
    debug: bool = False
    include_trace: bool = Field(default=False, description="also return the full trace")
    strategy: str | None = Field(
        default=None, description="run this one strategy instead of the policy's triggers"
    )
    require_signature: bool = Field(
        default=False,
        description="keep out entities, passages and relations whose HMAC signature fails or "
        "is missing (the server's key: CTXBASE_HMAC_KEY_<PROJECT> or CTXBASE_HMAC_KEY)",
    )
    repos: list[str] | None = Field(
        default=None, description="keep out entities ingested from any other repository"
    )
    memory_scope: Literal["project", "user"] | None = Field(
        default=None,
        description="user: memory from the asking user's sessions and knowledge of no session "
        "only (no other user's turns); project: shared by the project's sessions; left out: "
        "the policy's (project unless it says user)",
    )
    user_id: str | None = Field(
        default=None,
        min_length=1,
        description="the asking user under memory_scope user (default: the session's user)",
    )
    new_project: bool = Field(
        default=False,
        description="assemble even if the project holds no data yet (an agent's first turn on "
        "a new project; its trace then creates it) instead of answering 404; the SDK sets it "
        "for the project it was connected with, as an embedded base assembles its own",
    )


class AssembleOut(_Out):
    context_id: str
    messages: list[dict[str, str]]
    documents: list[dict[str, Any]]
    code_snippets: list[dict[str, Any]]
    events: list[dict[str, Any]]
    relationships: list[dict[str, Any]]
    tokens_by_layer: dict[str, int]
    total_tokens: int
    max_tokens: int
    policy: str
    strategies: list[str]
    tampered: list[str] = Field(default_factory=list)
    unsigned: int = Field(
        default=0,
        description="with require_signature: how many unsigned entities and captured events "
        "were left out",
    )
    trace: dict[str, Any] | None = None


class ProducedIn(_In):
    type: str = Field(min_length=1)
    name: str = Field(min_length=1)
    text: str = ""
    properties: dict[str, Any] = Field(default_factory=dict)
    id: str | None = None
    # edges the caller knows, e.g. {"type": "MUST_CACHE", "from": "doc_101"}
    relations: list[ProducedRelation] = Field(default_factory=list)


class OutcomeIn(_In):
    answer: str
    produced: list[ProducedIn] = Field(default_factory=list)
    session_id: str | None = None
    agent_role: str | None = None
    source: str = "auto:record_outcome"
    confidence: float = Field(default=0.9, ge=0, le=1)


class OutcomeOut(_Out):
    event_id: str
    entities: list[dict[str, Any]]
    relations: list[dict[str, Any]]


# -- state -----------------------------------------------------------------------------------
Scope = Literal["task", "session", "project", "user"]


class StateSetIn(_In):
    value: Any  # required: a body without it stored null
    cause: str | None = None
    ttl: float | None = None  # seconds; the library checks it (assemble.state.check_ttl)

    @model_validator(mode="before")
    @classmethod
    def _where_in_the_query(cls, data: Any) -> Any:
        if isinstance(data, dict):  # key, scope and scope_id name the fact: in the URL
            for name in ("key", "scope", "scope_id"):
                if name in data:
                    raise ValidationError(
                        name,
                        "goes in the query string (?scope=...&scope_id=...&key=...), not "
                        "the body; the body holds value, cause and ttl",
                    )
        return data


class RollbackIn(_In):
    to_version: int = Field(ge=1, le=INT64_MAX)
    cause: str | None = None


class RollbackOut(_Out):
    fact: dict[str, Any] | None


class StateChangeOut(_Out):
    key: str
    scope: str
    scope_id: str
    version: int
    old_value: Any
    new_value: Any
    cause: str | None
    ts: float
    deleted: bool = False
    ttl: float | None = None
    expired: bool = False


class DeletedOut(_Out):
    deleted: bool


# -- forget ----------------------------------------------------------------------------------
class ForgetIn(_In):
    event_ids: list[str] = Field(default_factory=list)
    entity_ids: list[str] = Field(default_factory=list)
    session_id: str | None = None
    # ingested repositories: every entity of each, and where it lives (404 naming the
    # project's repositories when one is not among them; nothing is done then)
    repos: list[str] = Field(default_factory=list, max_length=100)
    # strictly true or false: "yes" or 1 must not wipe a project
    whole_project: StrictBool = False
    # also forget what was soft-deleted more than this many seconds ago
    soft_deleted_older_than_s: float | None = Field(default=None, ge=0)


class ForgetOut(_Out):
    removed: dict[str, int]  # rows per table
    redacted: dict[str, int] = Field(default_factory=dict)  # rows kept, redacted, per table
    caches: dict[str, int] = Field(default_factory=dict)  # in-memory entries per cache
    total: int  # rows removed
    # event ids, entity ids and session id named that the project does not hold
    not_found: list[str] = Field(default_factory=list)
    # ids, session and repositories named that the project forgot before (forgetting
    # again is no error)
    already_forgotten: list[str] = Field(default_factory=list)
    # messages a forgotten entity was anchored from: said the same (forgotten with it), or
    # say more (still visible: forget them too if their content must go)
    sources_forgotten: list[str] = Field(default_factory=list)
    sources_still_visible: list[str] = Field(default_factory=list)
    # visible events whose text is a forgotten one's (up to whitespace and case): the same
    # thing said twice, left; forget them too to remove it
    same_text_still_visible: list[str] = Field(default_factory=list)
    repos: list[str] = Field(default_factory=list)  # the repositories forgotten


class IdsIn(_In):
    ids: list[str]


class ChangedOut(_Out):
    changed: int  # rows hidden or restored, what was anchored from a named event included
    unchanged: list[str] = Field(default_factory=list)  # named ids already in that state
    not_found: list[str] = Field(default_factory=list)  # named ids: no event nor entity
    # named ids of events and entities hard-forgotten before (nothing to hide or restore)
    already_forgotten: list[str] = Field(default_factory=list)
    # messages a named entity was anchored from: said the same (hidden or restored with it),
    # or say more (still visible after a hide)
    sources_hidden: list[str] = Field(default_factory=list)
    sources_still_visible: list[str] = Field(default_factory=list)
    # after a hide: visible events whose text is a hidden one's (up to whitespace and case)
    same_text_still_visible: list[str] = Field(default_factory=list)


# -- knowledge-base versions (anchor/kb_versions.py) ----------------------------------------
class KbTagIn(_In):
    name: str = Field(description="the version's name (e.g. v1.2), recorded once")
    repos: list[str] | None = Field(
        default=None, description="only these ingested repositories (default: every one)"
    )


class KbTagOut(_Out):
    name: str
    repos: list[str]
    entities: int  # units recorded
    created_at: float
    pinned: bool = False


class KbPinIn(_In):
    tag: str = Field(description="a recorded version (POST .../kb/versions)")


class KbPinOut(_Out):
    tag: str
    repos: list[str]
    hidden: int  # units written since the tag, hidden
    shown: int  # earlier versions shown instead of the latest
    missing: int  # tagged versions no longer stored
    replaced: str | None = None  # the other version pinned before (one per project)
    soft_deleted: int = 0  # tagged versions hidden (forget --soft): shown once restored


class KbUnpinOut(_Out):
    unpinned: str | None  # the version that was pinned (None: nothing was)


# -- feedback on memories ------------------------------------------------------------------
class FeedbackIn(_In):
    node_id: str = Field(min_length=1, max_length=200)  # event, entity or search unit id
    label: str  # liked | helpful | disliked | wrong | neutral
    confidence: float | None = Field(default=None, ge=0, le=1)
    context_id: str | None = Field(default=None, max_length=200)
    note: str | None = None
    by: str | None = Field(default=None, max_length=200)  # default: the API key's identity


class FeedbackOut(_Out):
    current: Feedback | None  # None: no feedback on the node
    history: list[Feedback]  # every feedback given, oldest first
