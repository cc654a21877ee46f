"""What gets indexed for an event or an entity: its search units (whole, or chunks).

A short text is one unit; a long one (a document, a big tool output) is cut into token-sized,
overlapping chunks, each its own unit that points back to its owner.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import lru_cache
from typing import TYPE_CHECKING, Any, NamedTuple

from ..model import Entity, Event
from ..store.base import SearchItem
from ..validation import is_blank
from .tokenize import index_terms_with_tail, words_version

if TYPE_CHECKING:
    from .chunking import ChunkingConfig

__all__ = [
    "CONTEXT_CHARS",
    "Chunker",
    "chunker_for",
    "context_terms",
    "default_chunker",
    "entity_items",
    "entity_search_text",
    "entity_unit_matches",
    "event_items",
    "event_search_text",
    "names_its_text",
]

# How much of the preceding event is indexed with an event (its end matters most).
CONTEXT_CHARS = 600

# Below this many characters a text is indexed whole (cheaper than counting tokens).
_WHOLE_TEXT_CHARS = 1200

# Cuts a long text into (chunk, start, end) spans.
Chunker = Callable[[str], list[tuple[str, int, int]]]


def event_search_text(event: Event) -> str:
    """The text a search sees for an event: speaker, body, attachments and data."""
    parts: list[str] = []
    speaker = event.metadata.get("speaker")
    body = event.text or ""
    if speaker:
        body = f"{speaker}: {body}"
    parts.append(body)
    caption = event.metadata.get("image_caption")
    if caption:
        parts.append(f"[image: {caption}]")
    if is_blank(event.text) and event.data not in (None, "", [], {}):
        parts.append(json.dumps(event.data, ensure_ascii=False))
    return "\n".join(p for p in parts if p.strip())


def _chunked(text: str, chunker: Chunker | None) -> list[tuple[str, int, int]]:
    if len(text) <= _WHOLE_TEXT_CHARS or chunker is None:
        return [(text, 0, len(text))]
    return chunker(text) or [(text, 0, len(text))]


def default_chunker(text: str) -> list[tuple[str, int, int]]:
    from .chunking import chunk_text

    return [(c.text, c.start, c.end) for c in chunk_text(text)]


@lru_cache(maxsize=64)
def chunker_for(config: ChunkingConfig | None) -> Chunker:
    """The chunker cutting by `config` (None: the defaults, 256 tokens overlapping by 64)."""
    if config is None:
        return default_chunker
    from .chunking import DEFAULT_CHUNKING, chunk_text

    if config == DEFAULT_CHUNKING:
        return default_chunker

    def chunker(text: str) -> list[tuple[str, int, int]]:
        return [(c.text, c.start, c.end) for c in chunk_text(text, config)]

    return chunker


class _Analysed(NamedTuple):
    terms: tuple[str, ...]
    joined: str  # the terms joined by spaces, as the index stores them
    # the terms of the text's last CONTEXT_CHARS, joined (None: tokenize those by themselves)
    tail: tuple[str, ...] | None
    tail_joined: str | None


@lru_cache(maxsize=4096)
def _analysed(version: int, text: str) -> _Analysed:
    """The terms of a text; `version` is the tokenizer's words_version (a cache key).

    An event's text is indexed when it is written and again, cut to its end, as the context
    of the event after it: both come from this one tokenization.
    """
    terms, tail = index_terms_with_tail(text, CONTEXT_CHARS)
    joined = " ".join(terms)
    if tail is None:
        return _Analysed(tuple(terms), joined, None, None)
    if tail == terms:  # a short text is its own tail
        whole = tuple(terms)
        return _Analysed(whole, joined, whole, joined)
    return _Analysed(tuple(terms), joined, tuple(tail), " ".join(tail))


def _terms(text: str) -> _Analysed:
    return _analysed(words_version(), text)


def _context(context: str) -> tuple[tuple[str, ...], str]:
    """The terms of the last CONTEXT_CHARS of `context`, and the same joined by spaces."""
    if len(context) <= _WHOLE_TEXT_CHARS:
        # an event's text is indexed whole up to this length: most likely remembered
        whole = _terms(context)
        if whole.tail is not None and whole.tail_joined is not None:
            return whole.tail, whole.tail_joined
    tail = _terms(context[-CONTEXT_CHARS:])
    return tail.terms, tail.joined


def context_terms(context: str | None) -> list[str]:
    """Keyword terms of the event an event follows, kept to its last CONTEXT_CHARS.

    A turn in a conversation is often only meaningful next to the one it answers ("yes, last
    weekend" after "did you go hiking?"), so each event is also findable by the words of its
    predecessor. Measured on conversational memory this lifts keyword recall markedly.
    """
    if not context:
        return []
    return list(_context(context)[0])


def _units(
    owner_id: str, whole_kind: str, pieces: list[tuple[str, int, int]], **fields: Any
) -> list[SearchItem]:
    """One search unit per piece: the owner's own id when whole, `<id>#<n>` chunks else."""
    whole = len(pieces) == 1
    return [
        SearchItem(
            item_id=owner_id if whole else f"{owner_id}#{n}",
            owner_id=owner_id,
            kind=whole_kind if whole else "chunk",
            text=piece,
            terms=_terms(piece).joined,
            **fields,
        )
        for n, (piece, _start, _end) in enumerate(pieces)
    ]


def event_items(
    event: Event,
    chunker: Chunker | None = default_chunker,
    context: tuple[str, str] | None = None,
    search_text: str | None = None,
) -> list[SearchItem]:
    """Search units of an event; `context` is (id, text) of the event it follows;
    `search_text` is event_search_text(event) when the caller has it already."""
    text = event_search_text(event) if search_text is None else search_text
    if is_blank(text):
        # Nothing to find it by: an item would have no terms, and its vector (of nothing)
        # would come back for every semantic query.
        return []
    pieces = _chunked(text, chunker)
    extra = _context(context[1])[1] if context and context[1] and len(pieces) == 1 else ""
    return _units(
        event.id,
        "event",
        pieces,
        type=event.type,
        context_terms=extra,
        context_id=context[0] if extra and context else None,
        ts=event.ts,
        session_id=event.session_id,
        agent_id=event.agent_id,
        agent_role=event.agent_role,
        path=event.metadata.get("path"),
        importance=event.importance,
    )


def _search_head(entity: Entity) -> str:
    head = entity.name
    title = entity.properties.get("title")
    if title and title != head:
        head = f"{head} {title}"
    return head


def names_its_text(head: str, text: str) -> bool:
    """True when the name is the text itself or its cut-off start ("…"), as for the
    requirement and decision sentences anchored from messages."""
    return text == head or (head.endswith("…") and text.startswith(head[:-1]))


def entity_search_text(entity: Entity) -> str:
    """The text a search sees for an entity: its name (and title), then its text; a name
    that only repeats the text's start is left out, so the text is not shown twice."""
    head, text = _search_head(entity), entity.text
    if not text:
        return head
    return text if names_its_text(head, text) else f"{head}\n{text}"


def _entity_labels(entity: Entity) -> dict[str, Any]:
    """The unit fields that come from what the entity says (type, where it lives)."""
    line_start = entity.properties.get("line_start")
    line_end = entity.properties.get("line_end")
    repo = entity.properties.get("repo")
    return {
        "type": entity.type,
        "session_id": entity.properties.get("session_id"),
        "agent_id": entity.properties.get("agent_id"),
        "path": entity.properties.get("path"),
        "line_start": int(line_start) if line_start is not None else None,
        "line_end": int(line_end) if line_end is not None else None,
        "repo": repo if isinstance(repo, str) else None,
    }


def entity_items(entity: Entity, chunker: Chunker | None = default_chunker) -> list[SearchItem]:
    return _units(
        entity.id,
        "entity",
        _chunked(entity_search_text(entity), chunker),
        ts=entity.updated_at,
        latest=entity.latest,
        importance=float(entity.properties.get("importance", 0.5)),
        **_entity_labels(entity),
    )


def entity_unit_matches(entity: Entity, item: SearchItem) -> bool:
    """True when `item` is a unit `entity_items` could have cut from `entity`.

    A short text is one unit holding exactly the entity's search text; a long one is cut
    into chunks that are verbatim spans of it. Where a long text is cut depends on the
    token counter of the process that wrote it, so a chunk is checked as a span, not
    re-cut. Type, path, lines, session and agent must be the entity's own.
    """
    if item.owner_id != entity.id:
        return False
    full = entity_search_text(entity)
    # indexed before a name repeating the text was left out: "name\ntext" is the entity's too
    before = f"{_search_head(entity)}\n{entity.text}" if entity.text else full
    # a verbatim, non-blank piece of a text long enough to have been chunked
    span = len(before) > _WHOLE_TEXT_CHARS and bool(item.text.strip()) and item.text in before
    if item.kind == "entity":
        text_ok = item.item_id == entity.id and (item.text in (full, before) or span)
    elif item.kind == "chunk":
        prefix = f"{entity.id}#"
        index = item.item_id[len(prefix) :]
        text_ok = item.item_id.startswith(prefix) and index.isdigit() and span
    else:
        return False
    if not text_ok:
        return False
    # compared as text: a TEXT column gives back "5" for a property stored as 5
    labels = _entity_labels(entity)
    return all(_as_text(getattr(item, name)) == _as_text(value) for name, value in labels.items())


def _as_text(value: Any) -> str | None:
    return None if value is None else str(value)
