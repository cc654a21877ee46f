"""Chunking: token bounds, coverage, offsets, headings, sentences, Chinese, overlap."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from ctxbase.assemble.tokens import ApproxTokenCounter, TokenCounter, get_token_counter
from ctxbase.retrieve.chunking import (
    CHUNKING_PRESETS,
    Chunk,
    ChunkingConfig,
    chunk_text,
)

REAL = get_token_counter()  # best offline tokenizer installed (approximate as a last resort)
APPROX = ApproxTokenCounter()


def _check_invariants(
    text: str, chunks: list[Chunk], config: ChunkingConfig, counter: TokenCounter
) -> None:
    for position, chunk in enumerate(chunks):
        assert chunk.index == position
        assert text[chunk.start : chunk.end] == chunk.text
        assert chunk.text and chunk.text == chunk.text.strip()
        assert counter.count(chunk.text) <= config.max_tokens
    covered = [False] * len(text)
    for chunk in chunks:
        covered[chunk.start : chunk.end] = [True] * (chunk.end - chunk.start)
    assert all(covered[i] for i, char in enumerate(text) if not char.isspace())
    # Chunks move forward: both starts and ends strictly increase.
    for previous, current in itertools.pairwise(chunks):
        assert previous.start < current.start
        assert previous.end < current.end


def test_config_defaults_presets_and_validation() -> None:
    config = ChunkingConfig()
    assert (config.max_tokens, config.overlap_tokens, config.respect_headings) == (256, 64, True)
    assert CHUNKING_PRESETS["default"] == config
    assert (
        CHUNKING_PRESETS["fine"].max_tokens
        < config.max_tokens
        < CHUNKING_PRESETS["coarse"].max_tokens
    )
    with pytest.raises(ValidationError):
        ChunkingConfig(max_tokens=64, overlap_tokens=64)
    with pytest.raises(ValidationError):
        ChunkingConfig(max_tokens=4)
    with pytest.raises(ValidationError):
        config.max_tokens = 10


def test_empty_and_whitespace_text() -> None:
    assert chunk_text("") == []
    assert chunk_text(" \n\n\t ") == []


def test_short_text_is_one_chunk_with_trimmed_offsets() -> None:
    text = "\n\n  One sentence. Two sentences.  \n"
    [chunk] = chunk_text(text)
    assert chunk.text == "One sentence. Two sentences."
    assert (chunk.start, chunk.end, chunk.heading_path, chunk.index) == (4, 32, (), 0)


DOC = """# Design

The context base keeps shared memory for agents.

## Cache

Redis holds hot rows. Entries expire after an hour.

```python
# a comment, not a heading
cache.set(key, value)
```

### Eviction

Least recently used entries go first.

# Operations
## Backups
Nightly snapshots.
"""


def test_headings_start_chunks_and_give_paths() -> None:
    chunks = chunk_text(DOC, ChunkingConfig(max_tokens=200, overlap_tokens=20))
    assert [chunk.heading_path for chunk in chunks] == [
        ("Design",),
        ("Design", "Cache"),
        ("Design", "Cache", "Eviction"),
        ("Operations", "Backups"),
    ]
    assert chunks[1].text.startswith("## Cache")
    assert "# a comment, not a heading" in chunks[1].text
    # A heading with no body of its own shares the chunk of its sub-heading.
    assert chunks[3].text == "# Operations\n## Backups\nNightly snapshots."


def test_a_title_line_before_the_first_heading_shares_its_chunk() -> None:
    # an entity's search text starts with its "path > name" label: never a unit by itself
    body = " ".join(f"第{i}节：配置项 order_cfg_{i} 控制缓存过期时间。" for i in range(40))
    text = f"ops.md > 运维手册\n# 运维手册\n\n{body}"
    config = ChunkingConfig(max_tokens=128, overlap_tokens=16)
    chunks = chunk_text(text, config, REAL.count)
    assert len(chunks) > 2
    assert chunks[0].text.startswith("ops.md > 运维手册\n# 运维手册\n\n第0节")
    assert chunks[0].heading_path == ("运维手册",)
    _check_invariants(text, chunks, config, REAL)
    # two lines before the heading are a paragraph of their own, as before
    two = chunk_text(f"Intro line one.\nIntro line two.\n# Title\n{body}", config, REAL.count)
    assert two[0].text == "Intro line one.\nIntro line two."


def test_without_respect_headings_sections_share_chunks() -> None:
    config = ChunkingConfig(max_tokens=200, overlap_tokens=20, respect_headings=False)
    chunks = chunk_text(DOC, config)
    assert len(chunks) == 1
    assert chunks[0].heading_path == ("Design",)


def test_long_paragraphs_split_at_sentences_with_overlap() -> None:
    sentences = [f"Sentence number {i} talks about topic {i}." for i in range(60)]
    text = " ".join(sentences)
    config = ChunkingConfig(max_tokens=64, overlap_tokens=16)
    chunks = chunk_text(text, config, REAL.count)
    assert len(chunks) > 3
    _check_invariants(text, chunks, config, REAL)
    for chunk in chunks:
        assert chunk.text.startswith("Sentence number")
        assert chunk.text.endswith(".")
    for previous, current in itertools.pairwise(chunks):
        overlap = previous.end - current.start
        assert overlap > 0
        assert REAL.count(text[current.start : previous.end]) <= config.overlap_tokens


def test_paragraph_break_is_preferred_when_chunk_is_half_full() -> None:
    first = " ".join(f"Alpha fact {i}." for i in range(12))
    second = " ".join(f"Beta fact {i}." for i in range(12))
    text = f"{first}\n\n{second}"
    config = ChunkingConfig(max_tokens=80, overlap_tokens=0)
    chunks = chunk_text(text, config, REAL.count)
    assert REAL.count(first) <= 80 < REAL.count(text)
    assert chunks[0].text == first
    assert chunks[1].text == second


def test_chinese_without_spaces_splits_on_cjk_punctuation() -> None:
    text = "".join(f"第{i}句讲的是缓存策略和数据库迁移。" for i in range(40))
    config = ChunkingConfig(max_tokens=48, overlap_tokens=12)
    chunks = chunk_text(text, config, REAL.count)
    assert len(chunks) > 2
    _check_invariants(text, chunks, config, REAL)
    for chunk in chunks:
        assert chunk.text.startswith("第")
        assert chunk.text.endswith("。")


def test_overlong_sentence_is_hard_split() -> None:
    text = "word " * 400 + "很长的中文没有标点" * 60
    config = ChunkingConfig(max_tokens=32, overlap_tokens=8)
    chunks = chunk_text(text, config, REAL.count)
    _check_invariants(text, chunks, config, REAL)
    # Pieces are cut at whitespace where there is whitespace to cut at.
    english = [chunk for chunk in chunks if chunk.text.startswith("word")]
    assert all(chunk.text.endswith("word") for chunk in english[:-1])


def test_huge_single_line_stays_fast_and_bounded() -> None:
    text = '{"k":' + '"v",'.join(str(i) for i in range(20000)) + "}"
    config = ChunkingConfig(max_tokens=256, overlap_tokens=64)
    chunks = chunk_text(text, config, REAL.count)
    _check_invariants(text, chunks, config, REAL)


def test_default_counter_is_used() -> None:
    text = "Alpha. " * 2000
    chunks = chunk_text(text)
    assert all(REAL.count(chunk.text) <= 256 for chunk in chunks)


_alphabet = st.sampled_from([*"ab xyZ.!?。！？；，中文字\n\n#`-", "## ", "```\n", "# T\n", "🧠"])
_texts = st.lists(_alphabet, max_size=400).map("".join)


@settings(max_examples=150, deadline=None)
@given(
    text=_texts,
    max_tokens=st.integers(min_value=16, max_value=48),
    overlap_ratio=st.floats(min_value=0.0, max_value=0.9),
    respect_headings=st.booleans(),
)
def test_chunk_properties(
    text: str, max_tokens: int, overlap_ratio: float, respect_headings: bool
) -> None:
    config = ChunkingConfig(
        max_tokens=max_tokens,
        overlap_tokens=int(max_tokens * overlap_ratio),
        respect_headings=respect_headings,
    )
    for counter in (REAL, APPROX):
        _check_invariants(text, chunk_text(text, config, counter.count), config, counter)


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=300))
def test_chunk_properties_on_arbitrary_unicode(text: str) -> None:
    config = ChunkingConfig(max_tokens=16, overlap_tokens=4)
    _check_invariants(text, chunk_text(text, config, REAL.count), config, REAL)


def test_a_long_run_without_breaks_is_split_without_counting_its_rest_each_time() -> None:
    # 20k characters of Chinese with no punctuation: one sentence, hard-split into ~90
    # pieces. Counting what is left of it before every cut was quadratic in its length.
    text = "".join(f"第{i}段缓存策略数据库迁移方案" for i in range(1500))
    config = ChunkingConfig()
    counted: list[int] = []

    def count(span: str) -> int:
        counted.append(len(span.encode()))
        return REAL.count(span)

    bound = getattr(REAL, "max_token_bytes", None)
    assert bound is not None
    fast = chunk_text(text, config, count, max_token_bytes=bound)
    slow = chunk_text(text, config, REAL.count)  # no bound: the rest is counted each time
    assert fast == slow
    _check_invariants(text, fast, config, REAL)
    # Beyond the one count of the whole sentence, no span counted is longer than the
    # bound lets through (max_tokens tokens of max_token_bytes bytes each).
    assert counted[0] == len(text.encode())
    assert max(counted[1:]) <= config.max_tokens * bound
    assert len(counted) < 40 * len(fast)


def test_the_default_counter_brings_its_bound() -> None:
    text = "甲乙丙丁" * 3000 + " tail words. " * 50
    assert chunk_text(text) == chunk_text(text, count_tokens=REAL.count)
    assert APPROX.max_token_bytes == 16
    assert chunk_text(text, count_tokens=APPROX.count, max_token_bytes=16) == chunk_text(
        text, count_tokens=APPROX.count
    )
