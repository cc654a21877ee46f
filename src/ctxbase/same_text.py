"""The visible events that say what a forgotten or hidden memory said.

The same text is often stored twice (a secret pasted in two sessions, a fact repeated),
and search folds such copies into one hit (`Candidate.duplicates`). Forgetting or hiding
the hit leaves the copy, which then answers the next search: `forget` and `set_hidden`
name those copies (`same_text_still_visible`) for the caller to forget too. Feedback is
given on them with the hit (memory_feedback.py: a rating is on what a memory says).

A copy is an active event of the project whose text is the forgotten one's up to
whitespace and case. It is found through the keyword index: every copy holds every term
of the text, so the index's items holding them all (at most `HITS_PER_TEXT` per text, for
at most `MAX_TEXTS` texts) are read and their events' texts compared. Nothing is scanned.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .store.base import Store

__all__ = ["HITS_PER_TEXT", "MAX_TEXTS", "said_as", "same_text_events", "texts_said"]

MAX_TEXTS = 100  # distinct texts looked up per forget
HITS_PER_TEXT = 20  # keyword hits read per text
_TERMS = 24  # terms of a text the lookup asks for (all of them must be held)
# A text near the index's whole-text limit (indexing._WHOLE_TEXT_CHARS, 1200, with a
# speaker's name or an image caption added) may be chunked, and where depends on the
# writer's chunking: its first line's start, no longer than the smallest chunk (16
# tokens), is in its first chunk.
_WHOLE_CHARS = 1000
_HEAD_CHARS = 64


def said_as(text: str | None) -> str:
    """A text as compared: whitespace runs as one space, case folded, without the closing
    punctuation (as forgetting's anchored sources are compared)."""
    return " ".join((text or "").split()).rstrip("。．.!！?？;；").casefold()


def texts_said(store: Store, project_id: str, ids: Sequence[str]) -> dict[str, str]:
    """The compared texts of the events and entities among `ids` (hidden ones included),
    each with the text as stored; blank texts are left out."""
    out: dict[str, str] = {}
    wanted = list(dict.fromkeys(ids))
    if not wanted:
        return out
    texts = [e.text for e in store.get_events(project_id, wanted, include_inactive=True)]
    texts += [e.text for e in store.get_entities(project_id, wanted, include_inactive=True)]
    for text in texts:
        said = said_as(text)
        if said and text:
            out.setdefault(said, text)
    return out


def _lookup_terms(text: str) -> list[str]:
    """Terms every item holding `text` (whole, or as the start of its first chunk) holds."""
    from .retrieve.tokenize import document_terms  # the tokenizer: only when forgetting

    blob = False  # a head cut inside a word with no space before the cut
    if len(text) > _WHOLE_CHARS:
        first = text.strip().split("\n", 1)[0]
        text = first[:_HEAD_CHARS]
        if len(first) > _HEAD_CHARS:  # the last word may be cut there: left out
            blob = " " not in text.strip()
            text = text if blob else text.rsplit(None, 1)[0]
    terms = list(dict.fromkeys(document_terms(text)))
    if blob or not text.isascii():
        # Chinese is segmented by context, so a word may be cut differently elsewhere; its
        # characters are held whatever the cut (cjk_terms.with_characters)
        terms = [t for t in terms if (t.isascii() and not blob) or len(t) == 1]
    return terms[:_TERMS]


def same_text_events(
    store: Store, project_id: str, texts: dict[str, str], skip: Collection[str]
) -> list[str]:
    """Ids of the project's visible events whose compared text is one of `texts` (as
    `texts_said` gives them), those in `skip` left out; in the order found."""
    from .retrieve.tokenize import fts_match_expression
    from .store.base import ItemFilter

    found: dict[str, None] = {}
    flt = ItemFilter(kinds=("event", "chunk"))
    for said, text in list(texts.items())[:MAX_TEXTS]:
        match = fts_match_expression(_lookup_terms(text), "and")
        if match is None:
            continue
        hits = store.keyword_search(project_id, match, flt, HITS_PER_TEXT)
        # an event's unit is named by its id, a chunk "<id>#<n>" (indexing._units): asking
        # for both reads the events without reading the units
        named = [(h.item_id, h.item_id.rsplit("#", 1)[0]) for h in hits]
        owners = [i for i in dict.fromkeys(i for p in named for i in p) if i not in skip]
        for event in store.get_events(project_id, [i for i in owners if i not in found]):
            if said_as(event.text) == said:
                found[event.id] = None
    return list(found)
