"""The argument a tool call most likely meant by one it does not take: a name other tools
and frameworks use for it (`k` for `top_k`), else the closest spelling. Computed from the
name alone, so the hint does not depend on what else the call got wrong."""

from __future__ import annotations

import difflib
from collections.abc import Collection, Sequence

__all__ = ["likely_argument"]

# What other tools and frameworks call an argument (LangChain, LlamaIndex and AutoGen say
# `k`; a graph says `node`): the arguments each may mean, the first the tool has wins.
_SYNONYMS: dict[str, tuple[str, ...]] = {
    "k": ("top_k",),
    "n": ("top_k",),
    "limit": ("top_k",),
    "max_results": ("top_k",),
    "node": ("event_ids", "id"),
    "nodes": ("event_ids",),
    "node_id": ("event_ids", "id"),
    "node_ids": ("event_ids",),
    "id": ("event_ids",),
    "ids": ("event_ids",),
    "event_id": ("event_ids", "id"),
    "memory_id": ("event_ids", "id"),
    "rating": ("label",),
    "feedback": ("label",),
    "query": ("intent",),
    "question": ("query", "intent"),
    "role": ("agent_role",),
    "content": ("text",),
    "type": ("event_type", "types"),
    "session": ("session_id",),
    "repo": ("repos",),
}


def likely_argument(name: str, fields: Collection[str], known: Sequence[str]) -> str | None:
    """The argument an unknown `name` most likely means: the first of its synonyms that is
    one of the tool's `fields`, else the closest of `known` (fields and their aliases) by
    spelling, else None."""
    for target in _SYNONYMS.get(name.casefold(), ()):
        if target in fields:
            return target
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.5)
    return close[0] if close else None
