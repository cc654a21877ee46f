"""Forgetting a document forgets the sections it contains: they hold its text. Each goes
with its kept versions, so no version of the document is found again; another document's
sections stay."""

from __future__ import annotations

from ctxbase import ContextBase
from ctxbase.retrieve.config import get_preset

V1 = "# Orders API V2.1\n\nGET /orders returns a list.\n\n## Paging\n\nUse the vaultcursor.\n"
V2 = "# Orders API V3.2\n\nGET /v3/orders returns pages.\n\n## Paging\n\nUse vaultcursor tokens.\n"
OTHER = "# Billing guide\n\nInvoices go out monthly.\n\n## Refunds\n\nRefunds take a week.\n"


def test_a_forgotten_document_takes_its_sections_and_their_versions(cb: ContextBase) -> None:
    doc = cb.anchor_document(V1, path="docs/api.md").entity_ids[0]
    assert cb.anchor_document(V2, path="docs/api.md").entity_ids[0] == doc
    other = cb.anchor_document(OTHER, path="docs/billing.md").entity_ids
    sections = [e.id for e in cb.list_entities() if e.type == "section"]
    assert len(sections) == 4  # two of the API document, two of the billing guide
    cb.wait_for_embeddings()
    assert cb.search("vaultcursor paging").results  # found before

    report = cb.forget(entity_ids=[doc])
    assert report.removed["entities"] == 6  # the document, 2 sections, each with its v1
    left = {e.id for e in cb.list_entities()}
    assert left == set(other)  # the billing guide and its sections
    hits = cb.search("vaultcursor paging", config=get_preset("hybrid", latest_only=False)).results
    assert all("vaultcursor" not in h.item.text for h in hits), hits
    assert cb.forget(entity_ids=[doc]).already_forgotten == [doc]


def test_forgetting_one_section_leaves_the_document_and_its_other_sections(
    cb: ContextBase,
) -> None:
    ids = cb.anchor_document(V1, path="docs/api.md").entity_ids
    paging = next(e.id for e in cb.list_entities() if e.type == "section" and "Paging" in e.name)
    cb.forget(entity_ids=[paging])
    left = {e.id for e in cb.list_entities()}
    assert paging not in left and ids[0] in left and len(left) == 2


def test_a_hidden_document_hides_its_sections_and_brings_back_those_it_hid(
    cb: ContextBase,
) -> None:
    doc = cb.anchor_document(V1, path="docs/api.md").entity_ids[0]
    cb.anchor_document(OTHER, path="docs/billing.md")
    paging = next(e.id for e in cb.list_entities() if "Paging" in e.name)
    cb.wait_for_embeddings()
    assert cb.soft_delete([paging]) == 1  # hidden on its own first
    assert cb.soft_delete([doc]) == 2  # the document and its other section
    assert not [e for e in cb.list_entities() if e.id == doc or "Orders" in e.name]
    assert not [
        h for h in cb.search("orders paging vaultcursor").results if "Orders" in h.item.text
    ]
    assert cb.restore([doc]) == 2
    back = {e.id for e in cb.list_entities()}
    assert doc in back and paging not in back  # the one hidden by its own id stays hidden


def test_a_section_hidden_on_its_own_is_forgotten_with_its_document(cb: ContextBase) -> None:
    doc = cb.anchor_document(V1, path="docs/api.md").entity_ids[0]
    paging = next(e.id for e in cb.list_entities() if "Paging" in e.name)
    assert cb.soft_delete([paging]) == 1
    cb.forget(entity_ids=[doc])
    assert cb.forget(entity_ids=[paging]).already_forgotten == [paging]
    assert cb.list_entities() == []


def test_a_section_forgotten_alone_leaves_the_document_card_without_its_words(
    cb: ContextBase,
) -> None:
    text = (
        "# Vault guide\n\nThe guide covers storage.\n\n## Storage\n\nKeep backups offsite.\n\n"
        "## Secrets\n\nThe quokkasecret rotates weekly; quokkasecret lives in the vault.\n"
    )
    doc = cb.anchor_document(text, path="docs/vault.md").entity_ids[0]
    card = cb.get_entity(doc)
    assert card is not None and "quokkasecret" in card.text and "Secrets" in card.text
    secrets = next(e.id for e in cb.list_entities() if "Secrets" in e.name)
    cb.forget(entity_ids=[secrets])
    card = cb.get_entity(doc)
    assert card is not None and "quokkasecret" not in card.text, card.text
    assert "Secrets" not in card.text and "Storage" in card.text
    assert secrets not in card.properties.get("sections", [])
    cb.wait_for_embeddings()
    hits = cb.search("quokkasecret", config=get_preset("hybrid", latest_only=False)).results
    assert all("quokkasecret" not in h.item.text for h in hits)


def test_a_section_forgotten_alone_leaves_no_earlier_trace_with_its_words(
    cb: ContextBase,
) -> None:
    """A trace recorded before the forget showed the document's card, whose key terms
    came from the section: the card is written again without them, and the trace's copy
    of it is redacted as a forgotten entity's entries are."""
    import json

    text = (
        "# Vault guide\n\nThe guide covers storage.\n\n## Storage\n\nKeep backups offsite.\n\n"
        "## Secrets\n\nThe quokkasecret rotates weekly; quokkasecret lives in the vault.\n"
    )
    doc = cb.anchor_document(text, path="docs/vault.md").entity_ids[0]
    cb.wait_for_embeddings()
    ctx = cb.assemble_context(agent_role="coder", user_intent="vault guide storage backups")
    before = json.dumps(cb.get_trace(ctx.context_id))
    assert "quokkasecret" in before and doc in before
    secrets = next(e.id for e in cb.list_entities() if "Secrets" in e.name)
    cb.forget(entity_ids=[secrets])
    after = json.dumps(cb.get_trace(ctx.context_id))
    assert "quokkasecret" not in after
    card = cb.get_entity(doc)
    assert card is not None and "Storage" in card.text  # the document stays


def test_a_section_forgotten_alone_leaves_no_kept_card_version_with_its_words(
    cb: ContextBase,
) -> None:
    v1 = (
        "# Vault guide\n\n## Storage\n\nKeep backups offsite.\n\n"
        "## Secrets\n\nThe quokkasecret rotates weekly; quokkasecret lives in the vault.\n"
    )
    v2 = v1.replace("Keep backups offsite.", "Keep backups offsite, encrypted twice.")
    doc = cb.anchor_document(v1, path="docs/vault.md").entity_ids[0]
    assert cb.anchor_document(v2, path="docs/vault.md").entity_ids[0] == doc
    kept = [e for e in cb.list_entities(latest_only=False) if e.id.startswith(f"{doc}@v")]
    assert kept and all("quokkasecret" in e.text and "Secrets" in e.text for e in kept)
    secrets = next(e.id for e in cb.list_entities() if "Secrets" in e.name)
    cb.forget(entity_ids=[secrets])
    for old in kept:
        now = cb.get_entity(old.id)
        assert now is not None and "quokkasecret" not in now.text, now.text
        assert "Secrets" not in now.text and "Storage" in now.text, now.text
        assert "quokkasecret" not in now.properties.get("key_terms", [])
        assert secrets not in now.properties.get("sections", [])
    cb.wait_for_embeddings()
    hits = cb.search("quokkasecret", config=get_preset("hybrid", latest_only=False)).results
    assert all("quokkasecret" not in h.item.text for h in hits), hits


def test_a_section_hidden_alone_leaves_the_card_and_comes_back_to_it(cb: ContextBase) -> None:
    text = (
        "# Vault guide\n\n## Storage\n\nKeep backups offsite.\n\n## Secrets\n\nThe quokkasecret.\n"
    )
    doc = cb.anchor_document(text, path="docs/vault.md").entity_ids[0]
    secrets = next(e.id for e in cb.list_entities() if "Secrets" in e.name)
    before = cb.get_entity(doc)
    assert before is not None and "quokkasecret" in before.text
    assert cb.soft_delete([secrets]) == 1
    hidden = cb.get_entity(doc)
    assert hidden is not None and "quokkasecret" not in hidden.text and "Secrets" not in hidden.text
    assert cb.restore([secrets]) == 1
    back = cb.get_entity(doc)
    assert back is not None and back.text == before.text
