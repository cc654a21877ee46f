"""A document's card written again from the sections it still holds.

An anchored document is stored as a card (its title, its key terms, the outline of its
headings: anchoring.py, file_units.py) and its sections. Forgetting one section leaves the
card naming that section's words and heading; so after such a forget the card of each
document that kept the section is made again from its remaining sections, in place (no
version of the card as it was is kept). Cards of another shape (a document written with
`upsert_entity`) are left as they are.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..components import ComponentsSource, components_of
from ..store.base import Store
from .documents import key_terms
from .entities import write_entity

__all__ = ["documents_of_sections", "rewrite_cards"]

_KEY_TERMS = "\nKey terms: "


def documents_of_sections(store: Store, project_id: str, ids: Sequence[str]) -> list[str]:
    """The documents containing the sections among `ids` (hidden ones included)."""
    sections = [i for i in dict.fromkeys(ids) if i.startswith("section:")]
    if not sections:
        return []
    links = store.list_relations(
        project_id, sections, direction="in", types=["CONTAINS"], include_closed=True,
        include_hidden=True,
    )  # fmt: skip
    return sorted({r.from_id for r in links if r.from_id.startswith("document:")})


def rewrite_cards(cb: ComponentsSource, project_id: str, doc_ids: Sequence[str]) -> list[str]:
    """Write the cards of `doc_ids` again from the visible sections each contains;
    returns the ids of the cards that changed."""
    comps = components_of(cb)
    store = comps.store
    changed: list[str] = []
    for doc in store.get_entities(project_id, list(doc_ids), include_inactive=True):
        if _KEY_TERMS not in doc.text:
            continue  # not an anchored document's card
        links = store.list_relations(
            project_id, [doc.id], direction="out", types=["CONTAINS"], include_closed=True,
            include_hidden=True,
        )  # fmt: skip
        held = [r.to_id for r in links if r.to_id.startswith("section:")]
        sections = store.get_entities(project_id, held)  # the visible ones
        sections.sort(key=lambda s: (int(s.properties.get("line_start") or 0), s.id))
        body = "\n\n".join(s.text for s in sections)
        terms = key_terms(body, 10) if body.strip() else []
        headings = [str(s.properties["heading"]) for s in sections if s.properties.get("heading")]
        title = doc.text.split(_KEY_TERMS, 1)[0]
        card = f"{title}{_KEY_TERMS}{', '.join(terms)}\nSections: {'; '.join(headings)[:800]}"
        if card == doc.text:
            continue
        props = {**doc.properties, "key_terms": terms}
        if "sections" in props:
            props["sections"] = [s.id for s in sections]
        write_entity(comps, doc.model_copy(update={"text": card, "properties": props}))
        changed.append(doc.id)
    return changed
