"""Code is embedded as one short card per symbol (kind, name, signature, docstring, names),
shared by the symbol's search units; keyword search and stored unit texts are unchanged."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ctxbase import ContextBase
from ctxbase.anchor.ingest import ingest_path
from ctxbase.retrieve.code_text import CARD_CHARS
from ctxbase.retrieve.embed import HashingEmbedder
from ctxbase.retrieve.embed.base import FloatMatrix, FloatVector
from ctxbase.retrieve.embedding_worker import EmbeddingWorker
from ctxbase.store.base import Store

_BODY = "\n".join(f"    total_{i} = compute_shipping_rate(order, zone_{i}) * 2" for i in range(60))
SOURCE = f'''"""Order pricing helpers."""


def shipping_cost(order, zone):
    """Work out the shipping cost of an order for a delivery zone.

    Longer explanation that goes on about weights and carriers.
    """
{_BODY}
    return total_0


def apply_coupon(price, coupon_code):
    """Take a coupon's discount off a price."""
    return price - lookup_discount(coupon_code)
'''


class Recording:
    """The hash embedder, keeping every document text it is given."""

    def __init__(self) -> None:
        self.real = HashingEmbedder()
        self.name, self.dim = self.real.name, self.real.dim
        self.documents: list[str] = []

    def embed_documents(self, texts: Sequence[str]) -> FloatMatrix:
        self.documents.extend(texts)
        return self.real.embed_documents(texts)

    def embed_query(self, text: str) -> FloatVector:
        return self.real.embed_query(text)


def _ingested(store: Store, project_id: str, tmp_path: Path, cards: bool) -> ContextBase:
    repo = tmp_path / "shop"
    repo.mkdir()
    (repo / "pricing.py").write_text(SOURCE)
    recorder = Recording()
    cb = ContextBase(store, project=project_id, embedder=recorder, background_embedding=False)
    ingest_path(cb, repo)
    EmbeddingWorker(cb.store, recorder, code_cards=cards).drain()
    return cb


def _vectors(cb: ContextBase, owner: str) -> dict[str, np.ndarray]:
    """The vectors of the owner's units, by unit id."""
    rows = [r for batch in cb.store.iter_vectors(cb.project, HashingEmbedder().name) for r in batch]
    return {r.item_id: r.vector for r in rows if r.item_id.split("#", 1)[0] == owner}


def test_code_is_embedded_as_cards_shared_by_a_symbols_chunks(
    store: Store, project_id: str, tmp_path: Path
) -> None:
    cb = _ingested(store, project_id, tmp_path, cards=True)
    try:
        embedder = cb.embedder
        assert isinstance(embedder, Recording)
        assert not cb.store.pending_embeddings(embedder.name, 100, project_id)
        cost = next(d for d in embedder.documents if d.startswith("function shipping_cost"))
        assert cost.startswith("function shipping_cost(order, zone)\n")  # named in its module
        assert "Work out the shipping cost of an order for a delivery zone." in cost
        assert "Longer explanation" not in cost  # the docstring's first paragraph only
        assert "compute_shipping_rate" in cost  # the names the body uses
        assert len(cost) <= CARD_CHARS
        assert all(len(d) <= CARD_CHARS for d in embedder.documents if "pricing" in d)
        # the long function is several units, all with its card's one vector
        entity = next(
            e
            for e in cb.store.list_entities(project_id, type="code")
            if e.name.endswith("shipping_cost")
        )
        vectors = _vectors(cb, entity.id)
        units = cb.store.get_items(project_id, sorted(vectors))
        assert len(units) > 1 and all(u.owner_id == entity.id for u in units)
        first, *rest = vectors.values()
        for v in rest:
            np.testing.assert_array_equal(v, first)
        assert embedder.documents.count(cost) == 1
        # found by meaning from its docstring, and by keyword from its body
        # (compared on the stored vectors: the module's card, which the file shares, names
        # the function too, and PostgreSQL's approximate index may order near-ties either way)
        query = HashingEmbedder().embed_query("shipping cost of an order for a zone")
        coupon = next(
            e
            for e in cb.store.list_entities(project_id, type="code")
            if e.name.endswith("apply_coupon")
        )
        coupon_vector = next(iter(_vectors(cb, coupon.id).values()))
        assert float(first @ query) > float(coupon_vector @ query)
        body_hit = cb.search("zone_37", preset="keyword").results
        assert body_hit and body_hit[0].item.owner_id == entity.id
        # stored unit texts are the code itself, not the card
        assert any("total_37 = compute_shipping_rate" in u.text for u in units)
    finally:
        cb.close()


def test_bodies_are_embedded_when_cards_are_off(
    store: Store, project_id: str, tmp_path: Path
) -> None:
    cb = _ingested(store, project_id, tmp_path, cards=False)
    try:
        embedder = cb.embedder
        assert isinstance(embedder, Recording)
        assert any("total_37 = compute_shipping_rate" in d for d in embedder.documents)
        assert not any(d.startswith("function ") for d in embedder.documents)
    finally:
        cb.close()
