"""What the framework adapters recall, defined once: search hits and the items of an
assembled context, as (text, id, metadata) records each framework wraps in its own type
(LangChain Documents, LlamaIndex nodes, AutoGen MemoryContent). Both run the tools of
integrations/tools.py, so every adapter gives the same hits with the same fields."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import NotFoundError, ValidationError
from .tools import ToolScope, run_tool

__all__ = ["SESSION_LIMIT", "Recalled", "assembled", "check_k", "check_recall", "searched"]

SESSION_LIMIT = 10_000  # events of a session read in one call (the REST API's cap)
SOURCES = ("documents", "code_snippets", "events")  # the assembled items, by kind


def check_recall(k: int, how: str, field: str) -> None:
    """An adapter's recall settings: `k` hits (1-50) and `how` ("search" or "assemble",
    the adapter's argument `field`); ValidationError naming the argument otherwise."""
    check_k(k)
    if how not in ("search", "assemble"):
        raise ValidationError(field, f"search or assemble (got {how!r})")


def check_k(k: int) -> None:
    """`k`, the adapters' name for how many hits, between 1 and 50: refused naming `k`
    (the tools call it `top_k`, which an adapter's caller never wrote)."""
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= 50:
        raise ValidationError("k", f"must be an integer between 1 and 50 (got {k!r})")


@dataclass(frozen=True)
class Recalled:
    """One recalled item: its text, its id (event, entity) and what else is known of it
    (`score`, `type`, `session_id`, ...; for assembled items `source` and `context_id`)."""

    text: str
    id: str
    metadata: dict[str, Any]

    @property
    def score(self) -> float:
        return float(self.metadata.get("score") or 0.0)


def searched(
    scope: ToolScope, query: str, k: int, *, mode: str = "hybrid", session_id: str | None = None
) -> list[Recalled]:
    """The `search_memory` hits for `query`, best first, at most k."""
    check_k(k)
    args: dict[str, Any] = {"query": query, "top_k": k, "mode": mode}
    if session_id:
        args["session_id"] = session_id
    try:
        hits = run_tool(scope, "search_memory", args)["results"]
    except NotFoundError as error:  # a session not written yet reads as empty, as history does
        if error.kind != "session":
            raise
        return []
    return [
        Recalled(h["text"], h["id"], {key: v for key, v in h.items() if key != "text"})
        for h in hits[:k]
    ]


def assembled(
    scope: ToolScope,
    intent: str,
    *,
    agent_role: str = "executor",
    session_id: str | None = None,
    max_tokens: int | None = None,
) -> tuple[dict[str, Any], list[Recalled]]:
    """An assembled context (the `assemble_context` answer) and its documents, code and
    events, best first."""
    args: dict[str, Any] = {"intent": intent, "agent_role": agent_role}
    if session_id:
        args["session_id"] = session_id
    if max_tokens:
        args["max_tokens"] = max_tokens
    ctx = run_tool(scope, "assemble_context", args)
    items = [
        Recalled(
            str(item.get("content") or ""),
            str(item.get("id")),
            {
                "source": source,
                "context_id": ctx["context_id"],
                **{key: v for key, v in item.items() if key != "content"},
            },
        )
        for source in SOURCES
        for item in ctx.get(source, ())
    ]
    items.sort(key=lambda r: -r.score)
    return ctx, items
