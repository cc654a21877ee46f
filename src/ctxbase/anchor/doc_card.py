"""A document's card written again from the sections it still holds.

An anchored document is stored as a card (its title, its key terms, the outline of its
headings: anchoring.py, file_units.py) and its sections. Forgetting one section leaves the
card naming that section's words and heading; so after such a forget the card of each
document that kept the section is made again from its remaining sections, in place (no
version of the card as it was is kept). The card's kept earlier versions (`<id>@v<n>`,
written when a re-anchored document changed) lose, in place too, each key term and heading
no stored section (or kept section version) of the document still has. Cards of another
shape (a document written with `upsert_entity`) are left as they are.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..components import Components, ComponentsSource, components_of
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


def rewrite_cards(
    cb: ComponentsSource, project_id: str, doc_ids: Sequence[str], *, versions: bool = False
) -> list[str]:
    """Write the cards of `doc_ids` again from the visible sections each contains, and
    with `versions` (after a forget) scrub their kept versions; returns the ids of the
    cards that changed."""
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
    if versions:
        changed += _scrub_versions(comps, project_id, list(doc_ids))
    return changed


def _versions_of(store: Store, project_id: str, ids: Sequence[str]) -> list[str]:
    # each version was linked from its entity by MODIFIES (source auto:version) when made
    links = store.list_relations(
        project_id, list(ids), direction="out", types=["MODIFIES"], include_closed=True
    )
    return sorted(
        {
            r.to_id
            for r in links
            if r.source == "auto:version" and r.to_id.startswith(f"{r.from_id}@v")
        }
    )


def _scrub_versions(comps: Components, project_id: str, doc_ids: list[str]) -> list[str]:
    """Kept versions of these cards without the key terms and headings that no stored
    section of their document (nor a kept version of one) holds any more."""
    store = comps.store
    changed: list[str] = []
    for doc in doc_ids:
        kept = store.get_entities(
            project_id, _versions_of(store, project_id, [doc]), include_inactive=True
        )
        kept = [v for v in kept if _KEY_TERMS in v.text]
        if not kept:
            continue
        links = store.list_relations(
            project_id, [doc], direction="out", types=["CONTAINS"], include_closed=True,
            include_hidden=True,
        )  # fmt: skip
        held = sorted({r.to_id for r in links if r.to_id.startswith("section:")})
        held += _versions_of(store, project_id, held)
        sections = store.get_entities(project_id, held, include_inactive=True)
        body = "\n\n".join(s.text for s in sections).casefold()
        headings = {str(s.properties.get("heading")) for s in sections}
        for v in kept:
            title = v.text.split(_KEY_TERMS, 1)[0].casefold()  # its title's words stay
            text = _scrubbed(v.text, f"{title}\n{body}", headings)
            if text == v.text:
                continue
            terms = [
                t
                for t in v.properties.get("key_terms") or []
                if str(t).casefold() in f"{title}\n{body}"
            ]
            props = {**v.properties, "key_terms": terms}
            if "sections" in props:
                props["sections"] = [i for i in props["sections"] if i in held]
            write_entity(comps, v.model_copy(update={"text": text, "properties": props}))
            changed.append(v.id)
    return changed


def _scrubbed(card: str, body: str, headings: set[str]) -> str:
    """`card` keeping only the key terms found in `body` and the sections in `headings`."""
    title, rest = card.split(_KEY_TERMS, 1)
    terms_line, _, sections_line = rest.partition("\nSections: ")
    terms = [t for t in terms_line.split(", ") if t and t.casefold() in body]
    kept = [h for h in sections_line.split("; ") if h and h in headings]
    return f"{title}{_KEY_TERMS}{', '.join(terms)}\nSections: {'; '.join(kept)}"
