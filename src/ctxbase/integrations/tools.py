"""The agent-callable tools of ctxbase, defined once: names, descriptions, argument models.

The MCP server (integrations/mcp_server.py) and the OpenAI function-calling export
(`openai_tools`, `handle_tool_call`) both read `TOOLS`, so the two never drift apart.

Who calls is fixed by the `ToolScope` the host builds from its configuration or from the
API key: the project, the agent id and the role (what the caller may do). No tool takes a
project argument, so a model's tool call can never reach another project.

    scope = ToolScope(ctxbase.open("memory.db", project="shop"), agent_id="coder")
    tools = openai_tools()                                   # pass to the chat model
    reply = handle_tool_call(scope, call.function.name, call.function.arguments)
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, field_validator, model_validator
from pydantic import ValidationError as PydanticValidationError
from pydantic_core import PydanticCustomError

from ..assemble.context_note import context_note
from ..contextbase import ContextBase
from ..errors import CtxbaseError, NotFoundError, ValidationError
from ..model import Event, check_id
from ..serve.keys import ROLES, role_allows
from ..validation import (
    MAX_JSON_BYTES,
    MAX_QUERY_CHARS,
    MAX_TEXT_BYTES,
    fields_renamed,
    yes_or_no_for_a_number,
)
from .tool_facts import delete_facts, facts_not_found, matching_facts, session_facts
from .tool_hints import ArgumentsError, argument_problem

if TYPE_CHECKING:
    from ..model import StateFact
    from ..serve.sdk import Client

__all__ = [
    "TOOLS",
    "ArgumentsError",
    "AssembleContextArgs",
    "ForgetArgs",
    "GetTraceArgs",
    "ListSessionsArgs",
    "RateMemoryArgs",
    "RememberArgs",
    "SearchMemoryArgs",
    "ToolScope",
    "ToolSpec",
    "handle_tool_call",
    "openai_tools",
    "run_tool",
    "session_events",
    "tool_error",
]

log = logging.getLogger("ctxbase.tools")

HIDE_PAGE = 10_000  # a session's events hidden per call: REST's largest `last_events` page
MAX_TEXT_CHARS = 4000  # per hit: enough to act on, small enough for a tool answer


def session_events(
    cb: ContextBase | Client, session_id: str, n: int, project: str | None = None
) -> list[Event]:
    """The session's last n events, none for a session not created yet: an adapter's
    first turn reads its session before anything is written in it."""
    try:
        return cb.last_events(session_id, n, project=project)
    except NotFoundError as error:
        if error.kind != "session":
            raise
        return []


@dataclass(frozen=True)
class ToolScope:
    """Who runs the tools: a context base (embedded or `ctxbase.connect`), the project,
    the agent id written on what it remembers, and the role it holds (read < write < admin)."""

    cb: ContextBase | Client
    project: str | None = None  # None: the base's own project
    agent_id: str = "agent"
    agent_role: str | None = None
    role: str = "admin"
    # Called with the project before and after a write (the server drops cached assemblies).
    on_write: Callable[[str], object] | None = None  # e.g. drop cached assemblies

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValidationError("role", f"must be one of {', '.join(ROLES)} (got {self.role!r})")
        check_id("agent_id", self.agent_id)
        if self.project is not None:
            check_id("project", self.project)

    @property
    def project_id(self) -> str:
        return self.project or self.cb.project

    def allows(self, needed: str) -> bool:
        return role_allows(self.role, needed)


class _Args(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", str_strip_whitespace=True)

    @model_validator(mode="before")
    @classmethod
    def _no_yes_or_no_for_a_number(cls, data: Any) -> Any:
        # a model's `true` is no count, budget or score (pydantic alone reads it as 1)
        if (name := yes_or_no_for_a_number(cls.model_fields, data)) is not None:
            raise PydanticCustomError(
                "yes_or_no_for_a_number",
                "must be a number (got {value})",
                {"field": name, "value": str(data[name]).lower()},
            )
        return data

    # other names an argument is accepted under: the library's keyword -> the tool's
    aliases: ClassVar[dict[str, str]] = {}


class SearchMemoryArgs(_Args):
    """Search the shared memory (past messages, tool calls and results, documents, code,
    SQL) by keywords and meaning, and the current facts (remember with fact_key) by
    keywords. Use it before answering anything that may have been said, decided or done
    earlier ("the SQL from last time", "what did the tester find"). Returns the best hits,
    best first, each with its id, type, text and score (none, with a note, when nothing
    stored is about the query), and under facts the current facts whose key or value
    shares words with the query (only current values: a replaced or forgotten value is
    not returned). A hit stands for the memories that say nearly the same (the same text
    remembered twice): their ids are in its duplicates; rating it rates the copies of the
    same text too, and to forget it, forget those too."""

    query: str = Field(
        min_length=1,
        max_length=MAX_QUERY_CHARS,
        description="What to look for, in natural language.",
    )
    # strict: a model's `true` is no count of hits
    top_k: int = Field(default=8, ge=1, le=50, strict=True, description="How many hits to return.")
    session_id: str | None = Field(
        default=None, max_length=200, description="Only this session's memory."
    )
    types: list[str] | None = Field(
        default=None,
        max_length=20,
        description="Only these event or entity types, e.g. user_message, tool_result, "
        "code, sql, table, document, section, fact (an unknown type is an error listing "
        "them; one type may be given as a string).",
    )
    repos: list[str] | None = Field(
        default=None,
        max_length=50,
        description="Only code and documents ingested from these repositories (each hit "
        "names its repo; one name may be given as a string). A name the project does not "
        "hold is an error naming its repositories.",
    )
    mode: Literal["keyword", "semantic", "hybrid", "hybrid_graph"] = Field(
        default="hybrid",
        description="keyword (exact words), semantic (meaning), hybrid (both), "
        "hybrid_graph (both plus linked items: causes, references, neighbouring turns).",
    )
    # the library's limits (SearchConfig.min_similarity), so its errors read the same
    min_similarity: float | None = Field(
        default=None,
        ge=-1,
        le=1,
        description="Only hits at least this similar to the query by meaning (cosine "
        "similarity, -1 to 1), whichever way they were found; a hit with no vector yet is "
        "left out. Needs an embedder; unset: no floor.",
    )

    @field_validator("repos", "types", mode="before")
    @classmethod
    def _one_repo(cls, value: object) -> object:
        """One repository or type named as a string is a list of one (as a policy takes
        it)."""
        return [value] if isinstance(value, str) else value


class AssembleContextArgs(_Args):
    """Build the full working context for the next step: recent conversation, relevant
    memory, code and documents, current facts, all within a token budget. Use it at the
    start of a task or when unsure what is known. Returns the context as messages plus a
    context_id and a header naming it with the tokens used of the budget
    ("context_id ctx_... (54/3000 tokens)"); a note when nothing was recalled or items
    were left out or cut for the budget; get_trace(context_id) explains why each piece is
    there."""

    aliases: ClassVar[dict[str, str]] = {"user_intent": "intent"}

    intent: str = Field(
        min_length=1,
        max_length=MAX_QUERY_CHARS,
        description="What you are about to do or answer (also accepted as user_intent).",
    )
    agent_role: str | None = Field(
        default=None,
        max_length=100,
        description="Role whose policy shapes the context: planner, coder, tester, reviewer, "
        "executor. Defaults to the configured role.",
    )
    session_id: str | None = Field(
        default=None, max_length=200, description="The conversation to continue, if any."
    )
    max_tokens: int | None = Field(
        default=None, ge=1, le=200_000, description="Token budget (default: the policy's)."
    )


class RememberArgs(_Args):
    """Store something in the shared memory so that later turns and other agents find it.
    Without fact_key, `text` is recorded as an event of the session (a note, decision,
    finding). With fact_key, `text` becomes the current value of that fact (a new version
    replaces the old one; assembled contexts show current facts; with fact_ttl it expires
    unless remembered again within that many seconds). Returns the stored id."""

    # the limit is the library's, in bytes: a JSON Schema maxLength would count characters
    text: str = Field(
        min_length=1,
        description=f"What to remember: at most {MAX_TEXT_BYTES:,} bytes as UTF-8 (a Chinese "
        "character takes 3); as a fact value it is counted as a JSON string, its quotes and "
        "escapes included.",
    )
    session_id: str = Field(
        default="memory",
        min_length=1,
        max_length=200,
        description="Session the memory belongs to (default 'memory').",
    )
    event_type: str = Field(
        default="assistant_message",
        max_length=100,
        description="Event type: assistant_message (default), user_message, tool_result, "
        "internal_thought, system.",
    )
    parent_event_ids: list[str] = Field(
        default_factory=list,
        max_length=50,
        description="Ids of earlier events this one follows from (its causes).",
    )
    fact_key: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        description="Store a fact under this key instead of an event, e.g. 'budget'.",
    )
    fact_scope: Literal["session", "project"] = Field(
        default="session",
        description="A fact holds for this session (default) or for the whole project.",
    )
    fact_ttl: float | None = Field(
        default=None,
        gt=0,
        allow_inf_nan=False,
        description="With fact_key: seconds the fact stays current unless remembered again "
        "(e.g. 1800 for a code valid 30 minutes); default: no expiry.",
    )

    # the text is stored as written: a code snippet keeps its indentation and its last
    # newline, as record() keeps them; the names around it are trimmed as elsewhere
    model_config = ConfigDict(frozen=True, extra="forbid", str_strip_whitespace=False)

    @field_validator("session_id", "event_type", "parent_event_ids", "fact_key", mode="before")
    @classmethod
    def _trimmed(cls, value: object) -> object:
        if isinstance(value, list):
            return [v.strip() if isinstance(v, str) else v for v in value]
        return value.strip() if isinstance(value, str) else value

    @field_validator("text", mode="before")
    @classmethod
    def _blank_is_empty(cls, value: object) -> object:
        # whitespace alone is nothing to remember: said blank, as for the other arguments
        return "" if isinstance(value, str) and not value.strip() else value

    @field_validator("text")
    @classmethod
    def _within_bytes(cls, value: str) -> str:
        size = len(value.encode("utf-8", "surrogatepass"))
        if size > MAX_TEXT_BYTES:
            raise PydanticCustomError(
                "text_too_large",
                "is {size} bytes as UTF-8, over the limit of {limit} bytes",
                {"size": size, "limit": MAX_TEXT_BYTES},
            )
        return value


class ForgetArgs(_Args):
    """Remove memories: the given events, every event and fact of a session, or facts by
    key (fact_keys). By default events are hidden (reversible); hard=true deletes them for
    good (needs an admin key), and can delete ingested repositories whole (repos). A
    forgotten fact is deleted: by default its history keeps the old values (a rollback
    brings one back), hard=true removes them too; with fact_keys, session_id and
    fact_scope name where the facts are, as in remember, and nothing else of that session
    is forgotten. facts_deleted (always present, [] when none) lists the keys deleted.
    Returns how many were hidden or removed, and the ids (and session) that were hidden
    already (unchanged), forgotten before (already_forgotten, repositories too) or
    unknown (not_found); an error (not_found) when nothing named is known, or when a
    repository named was never ingested. A search
    hit may be an entity taken from a message (a decision, a requirement, a code block):
    when it is the whole message, the message goes with it (sources_hidden /
    sources_forgotten); when the message says more, it stays and is listed in
    sources_still_visible: forget those ids too if what they say must be forgotten. Other
    memories whose text is the same (the same thing remembered twice) stay too: their ids
    are in same_text_still_visible, with a note; forget them too to remove it."""

    event_ids: list[str] = Field(
        default_factory=list,
        max_length=1000,
        description="Ids of events or entities to forget (a search hit's id).",
    )
    session_id: str | None = Field(
        default=None,
        max_length=200,
        description="Forget every event and fact of this session (with fact_keys: the "
        "session whose facts they are, default 'memory').",
    )
    fact_keys: list[str] = Field(
        default_factory=list,
        max_length=200,
        description="Keys of facts to delete (remember's fact_key).",
    )
    fact_scope: Literal["session", "project"] = Field(
        default="session",
        description="With fact_keys: the facts of the session (default) or of the project.",
    )
    repos: list[str] = Field(
        default_factory=list,
        max_length=100,
        description="Ingested repositories to delete whole, every file and unit of each "
        "(hard=true only).",
    )
    # strict: "yes" or 1 must not delete for good (as forget's whole_project refuses them)
    hard: StrictBool = Field(default=False, description="Delete for good instead of hiding.")


class ListSessionsArgs(_Args):
    """List the sessions (conversations) of this project, most recently updated first."""

    limit: int = Field(default=50, ge=1, le=1000, description="At most this many sessions.")


class GetTraceArgs(_Args):
    """Explain an assembled context: the policy used, every candidate with its scores,
    what was included or dropped and why, tokens per layer."""

    context_id: str = Field(
        min_length=1, max_length=200, description="The context_id assemble_context returned."
    )


class RateMemoryArgs(_Args):
    """Give feedback on a memory search_memory or assemble_context returned: liked or
    helpful (it ranks a little higher), disliked (lower) or wrong (false: left out of
    searches and contexts from now on, but kept stored); neutral undoes it. A confidence
    (0-1) may replace the label's. The rating holds for the memories saying the same text
    (a hit's duplicates). Returns the memory's confidence and the others rated with it."""

    id: str = Field(
        min_length=1, max_length=200, description="The id of the memory (a result's id)."
    )
    label: Literal["liked", "helpful", "disliked", "wrong", "neutral"] = Field(
        description="What the memory was worth."
    )
    context_id: str | None = Field(
        default=None, max_length=200, description="The context_id it was seen in, if any."
    )
    note: str | None = Field(default=None, max_length=2000, description="Why, in a few words.")
    confidence: float | None = Field(
        default=None,
        ge=0,
        le=1,
        description="0 (false) to 1 (sure), instead of the label's own; under 0.05 the "
        "memory is left out.",
    )


Handler = Callable[[ToolScope, Any], dict[str, Any]]


@dataclass(frozen=True)
class ToolSpec:
    name: str
    args: type[_Args]
    handler: Handler
    needs: str  # the weakest role allowed to call it
    read_only: bool

    @property
    def description(self) -> str:
        return " ".join((self.args.__doc__ or "").split())

    def input_schema(self) -> dict[str, Any]:
        schema = self.args.model_json_schema()
        schema.pop("description", None)  # said once, as the tool's description
        schema.pop("title", None)
        return schema


# -- handlers ------------------------------------------------------------------------------------
def _clip(text: str) -> str:
    return text if len(text) <= MAX_TEXT_CHARS else text[:MAX_TEXT_CHARS] + " [...]"


def _search(scope: ToolScope, a: SearchMemoryArgs) -> dict[str, Any]:
    from ..store.base import ItemFilter

    flt = None
    # "fact" names the facts answered beside the items, no item type: only facts, no items
    types = tuple(t for t in a.types or () if t != "fact")
    only_facts = bool(a.types) and not types
    if a.session_id or types or a.repos:
        flt = ItemFilter(
            session_ids=(a.session_id,) if a.session_id else None,
            types=types or None,
            repos=tuple(a.repos) if a.repos else None,
        )
    # assembly's relevance gate: an off-topic query gets no nearest-but-unrelated text
    with fields_renamed({"filters.types": "types", "filters.repos": "repos"}):
        response = scope.cb.search(
            a.query,
            project=scope.project_id,
            preset=a.mode,
            filters=flt,
            top_k=a.top_k,
            relevance_gate=True,
            new_project=True,  # the scope's own project: empty before anything is remembered
            min_similarity=a.min_similarity,
        )
    hits = []
    for c in [] if only_facts else response.results:
        it = c.item
        hit: dict[str, Any] = {
            "id": it.owner_id,
            "kind": it.kind,
            "type": it.type,
            "score": round(c.score, 4),
            "text": _clip(it.text),
        }
        for key, value in (
            ("session_id", it.session_id),
            ("agent_id", it.agent_id),
            ("repo", it.repo),
            ("path", it.path),
            ("line_start", it.line_start),
            ("line_end", it.line_end),
            ("found_via", c.graph_via),
            ("confidence", c.confidence),
            ("retracted", True if c.retracted else None),
            ("expired", True if c.expired else None),
            ("duplicates", list(c.duplicates) or None),  # same text: forget them too
        ):
            if value is not None:
                hit[key] = value
        hits.append(hit)
    out: dict[str, Any] = {"query": response.query, "results": hits}
    with_facts = not a.repos and (not a.types or "fact" in a.types)
    facts = matching_facts(scope, a.query, a.session_id, a.top_k) if with_facts else []
    if facts:
        out["facts"] = facts
    notes = [response.off_topic] if response.off_topic else []
    if response.rewrites:  # the agent sees what its question was also searched as
        notes.append(f"also searched as: {' | '.join(response.rewrites)}")
    # an agent cannot tell a memory that is not there from one withheld: say how many were
    # only those that would have been results: scoring at least the last result's score
    floor = None if only_facts else min((c.score for c in response.results), default=None)
    withheld = [
        c
        for c in response.considered
        if floor is not None
        and c.score >= floor
        and c.dropped is not None
        and c.dropped.startswith(("retracted", "expired", "confidence "))
    ]
    if withheld:
        retracted = sum(1 for c in withheld if c.dropped and c.dropped.startswith("retracted"))
        expired = sum(1 for c in withheld if c.dropped and c.dropped.startswith("expired"))
        ids = ", ".join(c.item.owner_id for c in withheld[:5])
        stale = (
            f"{expired} expired (per-turn tool results of earlier turns, or past expires_at), "
            if expired
            else ""
        )
        notes.append(
            f"{len(withheld)} match(es) left out ({ids}): {retracted} retracted, {stale}"
            f"{len(withheld) - retracted - expired} rated wrong or below the confidence floor"
        )
        # a rating's note says what is right instead (assemble/corrections.py)
        said = dict.fromkeys(c.correction for c in withheld if c.correction)
        notes.extend(f"correction (rated wrong): {note}" for note in said)
    if notes:
        out["note"] = "; ".join(notes)
    return out


def _assemble(scope: ToolScope, a: AssembleContextArgs) -> dict[str, Any]:
    ctx = scope.cb.assemble_context(
        agent_role=a.agent_role or scope.agent_role or "executor",
        user_intent=a.intent,
        project_id=scope.project_id,
        session_id=a.session_id,
        max_tokens=a.max_tokens,
        new_project=True,  # the scope's own project: empty before anything is remembered
    )
    out = {**ctx.payload(), "max_tokens": ctx.max_tokens, "header": ctx.header}
    # an empty or cut context says why, so the agent does not take it for the whole memory
    note = context_note(ctx.trace)
    if note:
        out["note"] = note
    return out


def _remember(scope: ToolScope, a: RememberArgs) -> dict[str, Any]:
    pid = scope.project_id
    if a.fact_ttl is not None and a.fact_key is None:
        raise ValidationError("fact_ttl", "is a fact's time to live: give fact_key with it")
    if a.fact_key is not None:
        _fits_as_a_value(a.text)
        scope_id = a.session_id if a.fact_scope == "session" else pid
        if a.fact_scope == "session":  # listed by list_sessions, forgotten with it
            _ensure_session(scope, a.session_id)
        names = {"key": "fact_key", "value": "text", "ttl": "fact_ttl", "scope_id": "session_id"}
        with fields_renamed(names):
            fact = _set_fact(scope, a, scope_id, pid)
        return {"kind": "fact", "key": fact.key, "scope": fact.scope, "version": fact.version}
    with fields_renamed({"type": "event_type"}):
        event = scope.cb.record(
            a.event_type,
            session_id=a.session_id,
            text=a.text,
            project=pid,
            agent_id=scope.agent_id,
            agent_role=scope.agent_role,
            parent_event_ids=list(a.parent_event_ids),
        )
    return {"kind": "event", "event_id": event.id, "session_id": event.session_id}


def _set_fact(scope: ToolScope, a: RememberArgs, scope_id: str, pid: str) -> StateFact:
    """remember's fact, written by the library here or by the server."""
    assert a.fact_key is not None
    if not isinstance(scope.cb, ContextBase):  # the remote client
        return scope.cb.set_fact(
            a.fact_key, a.text, scope_id=scope_id, scope=a.fact_scope, project=pid, ttl=a.fact_ttl
        )
    from ..assemble.state import set_fact

    return set_fact(
        scope.cb,
        a.fact_key,
        a.text,
        scope_id=scope_id,
        scope=a.fact_scope,
        cause=f"remembered by {scope.agent_id}",
        project=pid,
        ttl=a.fact_ttl,
    )


def _fits_as_a_value(text: str) -> None:
    """A fact's value is limited as JSON (quotes and escapes count): said of `text`."""
    size = len(json.dumps(text, ensure_ascii=False).encode("utf-8", "surrogatepass"))
    if size > MAX_JSON_BYTES:
        raise ValidationError(
            "text",
            f"is {size} bytes as a JSON string, over the limit of {MAX_JSON_BYTES} bytes "
            "for a fact value",
        )


def _ensure_session(scope: ToolScope, session_id: str) -> None:
    try:
        scope.cb.get_session(session_id, project=scope.project_id)
    except NotFoundError as error:
        if error.kind != "session":
            raise
        scope.cb.create_session(session_id, project=scope.project_id)


def _forget(scope: ToolScope, a: ForgetArgs) -> dict[str, Any]:
    from .tool_forget import forget_nodes, told  # it reads this module's names

    if not a.event_ids and not a.session_id and not a.repos and not a.fact_keys:
        raise ValidationError(
            "event_ids", "name event_ids, a session_id, fact_keys or repos to forget"
        )
    if a.fact_keys:  # session_id names the facts' session: only the facts go
        if a.hard and not scope.allows("admin"):
            from .tool_forget import hard_forget_refused

            raise hard_forget_refused(scope.role)
        deleted, missing = delete_facts(scope, a.fact_keys, a.fact_scope, a.session_id, hard=a.hard)
        if not a.event_ids and not a.repos:
            if not deleted:
                raise facts_not_found(scope, missing, a.fact_scope, a.session_id)
            return {"facts_deleted": deleted, "facts_not_found": missing}
        out = told(forget_nodes(scope, a.model_copy(update={"session_id": None})))
        return {**out, "facts_deleted": deleted, "facts_not_found": missing}
    held = session_facts(scope, a.session_id) if a.session_id else []
    out = told(forget_nodes(scope, a))
    if a.session_id and not a.hard:  # a hard forget deletes the facts and history itself
        held, _ = delete_facts(scope, held, "session", a.session_id)
    out["facts_deleted"] = held
    return out


def _list_sessions(scope: ToolScope, a: ListSessionsArgs) -> dict[str, Any]:
    # the scope's own project: empty before anything is remembered
    listed = scope.cb.list_sessions(project=scope.project_id, new_project=True)
    sessions = sorted(listed, key=lambda s: -s.updated_at)
    return {
        "sessions": [
            {
                "session_id": s.session_id,
                "title": s.title,
                "status": s.status,
                "hidden_events": s.hidden_events,  # a session hidden whole is still active
                "created_at": s.created_at,
                "updated_at": s.updated_at,
            }
            for s in sessions[: a.limit]
        ]
    }


def _get_trace(scope: ToolScope, a: GetTraceArgs) -> dict[str, Any]:
    return scope.cb.get_trace(a.context_id, project=scope.project_id)


def _rate_memory(scope: ToolScope, a: RateMemoryArgs) -> dict[str, Any]:
    try:
        with fields_renamed({"node_id": "id"}):
            given = scope.cb.feedback(
                a.id,
                a.label,
                confidence=a.confidence,
                context_id=a.context_id,
                note=a.note,
                by=f"agent:{scope.agent_id}",
                project=scope.project_id,
            )
    except NotFoundError as error:
        if error.kind != "node":
            raise
        raise NotFoundError(
            "memory",
            a.id,
            message=f"no memory {a.id!r} in project {scope.project_id!r}: give the id of "
            "a search_memory result or of an assembled context's item",
        ) from None
    out: dict[str, Any] = {
        "id": given.node_id,
        "label": given.label,
        "confidence": given.confidence,
    }
    # rated with it, and the message that says more (it still says what was rated)
    for name in ("same_statement", "same_text", "also_said_in"):
        if getattr(given, name):
            out[name] = getattr(given, name)
    return out


TOOLS: dict[str, ToolSpec] = {
    t.name: t
    for t in (
        ToolSpec("search_memory", SearchMemoryArgs, _search, "read", True),
        ToolSpec("assemble_context", AssembleContextArgs, _assemble, "read", True),
        ToolSpec("remember", RememberArgs, _remember, "write", False),
        ToolSpec("forget", ForgetArgs, _forget, "write", False),
        ToolSpec("list_sessions", ListSessionsArgs, _list_sessions, "read", True),
        ToolSpec("get_trace", GetTraceArgs, _get_trace, "read", True),
        ToolSpec("rate_memory", RateMemoryArgs, _rate_memory, "write", False),
    )
}


# -- dispatch ------------------------------------------------------------------------------------
def _parse(spec: ToolSpec, arguments: Mapping[str, Any] | str | None) -> _Args:
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError as exc:
            raise ValidationError("arguments", f"not valid JSON: {exc.msg}") from exc
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, Mapping):
        raise ValidationError("arguments", "must be a JSON object")
    arguments = dict(arguments)
    for alias, name in spec.args.aliases.items():
        if alias in arguments:
            if name in arguments:
                raise ValidationError(alias, f"is the same argument as {name!r}; give one of them")
            arguments[name] = arguments.pop(alias)
    try:
        return spec.args.model_validate(arguments)
    except PydanticValidationError as exc:
        raise ArgumentsError(
            [
                argument_problem(err, spec.args.model_fields, spec.args.aliases)
                for err in exc.errors()
            ]
        ) from exc


def run_tool(
    scope: ToolScope, name: str, arguments: Mapping[str, Any] | str | None = None
) -> dict[str, Any]:
    """Run one tool call; raises a CtxbaseError (ValidationError naming the argument,
    NotFoundError, PermissionDeniedError) for a call the caller can correct."""
    spec = TOOLS.get(name)
    if spec is None:
        raise ValidationError("name", f"unknown tool {name!r}; tools: {', '.join(TOOLS)}")
    args = _parse(spec, arguments)
    if not scope.allows(spec.needs):
        from ..serve.errors import PermissionDeniedError

        raise PermissionDeniedError(
            f"{name} needs a {spec.needs!r} key; this one is {scope.role!r}"
        )
    if spec.read_only or scope.on_write is None:
        return spec.handler(scope, args)
    scope.on_write(scope.project_id)
    try:
        return spec.handler(scope, args)
    finally:
        scope.on_write(scope.project_id)


def tool_error(exc: BaseException) -> dict[str, Any]:
    """The answer a model gets for a failed call: what went wrong and which argument
    (`field`, the first; `fields`, every argument named, always present: [] when the error
    names none)."""
    if isinstance(exc, CtxbaseError):
        field = getattr(exc, "field", None)
        if isinstance(exc, ArgumentsError):
            fields = [name for name, _ in exc.problems]
        else:
            fields = [field] if field is not None else []
        error: dict[str, Any] = {
            "code": exc.code,
            "message": str(exc),
            "field": field,
            "fields": fields,
        }
        return {"error": error}
    log.error("tool call failed", exc_info=exc)
    return {"error": {"code": "internal", "message": "internal error", "field": None, "fields": []}}


def handle_tool_call(scope: ToolScope, name: str, arguments: Mapping[str, Any] | str | None) -> str:
    """Run a model's tool call and return the JSON text to send back as the tool message.

    Never raises for a bad call: the model gets `{"error": {...}}` and can correct itself.
    Fits the OpenAI chat API (`call.function.name`, `call.function.arguments`) and the
    OpenAI Agents SDK (`FunctionTool(on_invoke_tool=...)` receives the arguments as JSON).
    """
    try:
        result = run_tool(scope, name, arguments)
    except Exception as exc:  # reported to the model, not raised into the agent loop
        result = tool_error(exc)
    return json.dumps(result, ensure_ascii=False, default=str)


def openai_tools(names: list[str] | None = None) -> list[dict[str, Any]]:
    """The tools in OpenAI function-calling format (`tools=` of a chat completion)."""
    return [
        {
            "type": "function",
            "function": {
                "name": spec.name,
                "description": spec.description,
                "parameters": spec.input_schema(),
            },
        }
        for spec in TOOLS.values()
        if names is None or spec.name in names
    ]
