"""Text to keyword-index terms for BM25 over SQLite FTS5.

Why this exists: FTS5's built-in ``unicode61`` tokenizer splits on anything that is not a
letter or digit, so a run of Chinese characters with no spaces, such as ``我们用缓存加速查询``,
becomes ONE token. A query for ``缓存`` then never matches that document. Instead of relying
on the FTS5 tokenizer, the store indexes the terms produced here, joined by spaces, into a
column whose tokenizer only splits on whitespace, and builds MATCH expressions from
:func:`query_terms` with :func:`fts_match_expression`.

What a term is:

* Chinese runs are segmented with jieba in search mode, so both ``中华人民共和国`` and its
  sub-words (``人民``, ``共和国``) are indexed; particles and other stop words are dropped.
  Documents and queries then also get each character of those words as a term of its own
  (``ctxbase.cjk_terms.with_characters``): two segmentations of the same phrase that share
  no word still share characters. :func:`index_terms` alone, used to compare texts rather
  than to index them, leaves the characters out.
* Other words are lowercased; English stop words are dropped and plain ASCII words are
  Snowball-stemmed (``caching`` -> ``cach``), so ``cache`` and ``caching`` meet.
* Identifiers (``snake_case``, ``camelCase``, ``dotted.names``, ``kebab-case``) yield the
  whole identifier (lowercased, unstemmed) followed by their parts.
* Numbers are kept; full-width letters and digits are folded to half-width (NFKC).
* Punctuation, symbols and emoji are dropped. No term contains whitespace.

The jieba tokenizer is private to this module (not jieba's global one), built on first use
under a lock, with jieba's log output silenced. Domain words can be added with
:func:`add_words`.
"""

from __future__ import annotations

import importlib
import logging
import re
import sys
import threading
import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from functools import lru_cache
from typing import Any, Literal

from ..background import background_thread
from ..cjk_terms import CHINESE_STOP_WORDS, CJK_CHARS, with_characters

__all__ = [
    "CHINESE_STOP_WORDS",
    "ENGLISH_STOP_WORDS",
    "MAX_TERM_LENGTH",
    "add_words",
    "document_terms",
    "fts_match_expression",
    "import_jieba",
    "index_terms",
    "index_terms_with_tail",
    "load_segmenter",
    "needs_segmenter",
    "prefetch_segmenter",
    "query_terms",
    "segment_words",
    "words_version",
]

# Longer "words" are almost always base64 blobs or minified data; they only bloat the index.
MAX_TERM_LENGTH = 64

_ENGLISH_STOP_WORDS_TEXT = """
    a about above after again against all am an and any are aren as at be because been
    before being below between both but by can cannot could couldn d did didn do does doesn
    doing don down during each few for from further had hadn has hasn have haven having he
    her here hers herself him himself his how i if in into is isn it its itself just ll m
    me more most mustn my myself no nor not now o of off on once only or other our ours
    ourselves out over own re s same shan she should shouldn so some such t than that the
    their theirs them themselves then there these they this those through to too under
    until up ve very was wasn we were weren what when where which while who whom why will
    with won would wouldn y you your yours yourself yourselves
"""
ENGLISH_STOP_WORDS: frozenset[str] = frozenset(_ENGLISH_STOP_WORDS_TEXT.split())


# A word character that is not CJK (letters of other scripts, digits, underscore).
_WORD_CHAR = rf"[^\W{CJK_CHARS}]"
_TOKEN_PATTERN = re.compile(
    rf"(?P<cjk>[{CJK_CHARS}]+)|(?P<word>{_WORD_CHAR}+(?:[.\-]{_WORD_CHAR}+)*)"
)
# The same pattern for ASCII text (no CJK; a word character is [A-Za-z0-9_]), which the
# regex engine matches faster than the Unicode classes above.
_ASCII_WORD_PATTERN = re.compile(r"[A-Za-z0-9_]+(?:[.\-][A-Za-z0-9_]+)*")
_IDENTIFIER_SEPARATORS = re.compile(r"[._\-]+")
# camelCase parts: "HTTPServer" -> HTTP, Server; "base64Encode" -> base64, Encode.
_CAMEL_PART = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+[0-9]*|[A-Z]+[0-9]*|[0-9]+")
_CAMEL_BOUNDARY = re.compile(r"[a-z][A-Z]|[A-Z]{2}[a-z]{2}|[0-9][A-Z]")
_ASCII_LETTERS = re.compile(r"[a-z]+")

_jieba_lock = threading.Lock()
_jieba_tokenizer: Any = None
_prefetch_lock = threading.Lock()
_prefetching = False
_CJK_CHAR = re.compile(f"[{CJK_CHARS}]")
_stemmer_state = threading.local()
# Bumped by add_words: cached segmentations (here and in callers' caches) key on it, so a
# text tokenized after new words were added is segmented afresh.
_words_version = 0

# Words and Chinese runs repeat across texts: their terms are cached, up to these lengths
# (longer ones are rare and would only fill the caches).
_CACHED_WORD_CHARS = 80
_CACHED_RUN_CHARS = 64
# Longer runs of Chinese characters in a query are segmented in pieces of this length.
_QUERY_RUN_CHARS = 256


def import_jieba() -> Any:
    """The jieba module, imported without `pkg_resources`: jieba imports it only to open
    its dictionary files, and that import parses every installed distribution's metadata,
    about 1 s of each process's start. Without it jieba opens the same files by path."""
    if (loaded := sys.modules.get("jieba")) is not None:
        return loaded
    blocked = "pkg_resources" not in sys.modules
    if blocked:
        sys.modules["pkg_resources"] = None  # type: ignore[assignment]  # import raises
    try:
        return importlib.import_module("jieba")
    finally:
        if blocked and "pkg_resources" in sys.modules and sys.modules["pkg_resources"] is None:
            del sys.modules["pkg_resources"]


def _segmenter() -> Any:
    """The module's own jieba tokenizer, built once (loading the dictionary takes ~1 s)."""
    global _jieba_tokenizer
    tokenizer = _jieba_tokenizer
    if tokenizer is not None:
        return tokenizer
    with _jieba_lock:
        if _jieba_tokenizer is None:
            jieba = import_jieba()
            # jieba sets its logger to DEBUG on import and reports dictionary loading on
            # stderr; raise the level after the import so those lines stay quiet.
            logging.getLogger("jieba").setLevel(logging.WARNING)
            fresh = jieba.Tokenizer()
            fresh.initialize()
            _jieba_tokenizer = fresh
        return _jieba_tokenizer


def needs_segmenter(text: str) -> bool:
    """True when tokenizing `text` segments Chinese (or Japanese kana) with jieba."""
    if text.isascii():
        return False
    return _CJK_CHAR.search(text) is not None or _CJK_CHAR.search(_normalise(text)) is not None


def load_segmenter() -> bool:
    """Load the segmenter's dictionary now, once per process (about 1 s; 3 s on a busy
    machine). True when this call had to wait for it (it loaded it, or another thread
    was loading it); False when it was loaded before."""
    if _jieba_tokenizer is not None:
        return False
    _segmenter()
    return True


def prefetch_segmenter() -> None:
    """Start loading the segmenter's dictionary in the background (if not loaded or being
    loaded), so it overlaps other work; `load_segmenter` then waits for what is left."""
    global _prefetching
    if _jieba_tokenizer is not None:
        return
    with _prefetch_lock:
        if _prefetching:
            return
        _prefetching = True
    background_thread(_segmenter, name="ctxbase-segmenter-load").start()


def add_words(words: Iterable[str]) -> None:
    """Teach the segmenter domain words (e.g. ``向量数据库``) so they are indexed whole.

    Only affects text tokenized afterwards: re-index documents that contain the words.
    Words with whitespace are ignored (jieba cannot match across it).
    """
    global _words_version
    tokenizer = _segmenter()
    with _jieba_lock:
        for word in words:
            cleaned = unicodedata.normalize("NFKC", word).strip()
            if cleaned and not any(ch.isspace() for ch in cleaned):
                tokenizer.add_word(cleaned)
        _words_version += 1
    _run_terms.cache_clear()
    _cached_query_terms.cache_clear()


def words_version() -> int:
    """Changes whenever :func:`add_words` may have changed how text is segmented."""
    return _words_version


def _stemmer() -> Any:
    # Snowball stemmer objects keep per-call state, so each thread gets its own.
    stemmer = getattr(_stemmer_state, "stemmer", None)
    if stemmer is None:
        snowballstemmer = importlib.import_module("snowballstemmer")
        stemmer = snowballstemmer.stemmer("english")
        _stemmer_state.stemmer = stemmer
    return stemmer


@lru_cache(maxsize=65536)
def _stem(word: str) -> str:
    stemmed: str = _stemmer().stemWord(word)
    return stemmed


def _plain_word_term(word: str) -> str | None:
    """Lowercased, stop-word-filtered, stemmed form of one simple word (None = drop)."""
    lowered = word.lower()
    if not lowered or lowered in ENGLISH_STOP_WORDS or len(lowered) > MAX_TERM_LENGTH:
        return None
    if _ASCII_LETTERS.fullmatch(lowered):
        return _stem(lowered)
    return lowered


def _identifier_parts(word: str) -> list[str]:
    """Split an identifier on separators, then on camelCase boundaries."""
    parts: list[str] = []
    for piece in _IDENTIFIER_SEPARATORS.split(word):
        if not piece:
            continue
        if piece.isascii() and _CAMEL_BOUNDARY.search(piece):
            parts.extend(_CAMEL_PART.findall(piece))
        else:
            parts.append(piece)
    return parts


def _word_terms(word: str) -> Iterator[str]:
    if not any(char.isalnum() for char in word):
        return  # bare "_" or "__": nothing a query could mean
    parts = _identifier_parts(word)
    if parts == [word]:
        term = _plain_word_term(word)
        if term is not None:
            yield term
        return
    # A compound is kept whole (unstemmed) so exact identifier queries rank it first.
    whole = word.lower()
    if len(whole) <= MAX_TERM_LENGTH:
        yield whole
    for part in parts:
        term = _plain_word_term(part)
        if term is not None:
            yield term


def _cjk_terms(run: str) -> Iterator[str]:
    for word in _segmenter().cut_for_search(run):
        cleaned = word.strip()
        if cleaned and cleaned not in CHINESE_STOP_WORDS:
            yield cleaned


@lru_cache(maxsize=65536)
def _cached_word_terms(word: str) -> tuple[str, ...]:
    return tuple(_word_terms(word))


@lru_cache(maxsize=16384)
def _run_terms(version: int, run: str) -> tuple[str, ...]:
    # `version` is the words version the run is segmented under (part of the cache key).
    return tuple(_cjk_terms(run))


def _token_terms(cjk_run: str, word: str, version: int) -> tuple[str, ...]:
    """Terms of one token: a run of Chinese characters (`cjk_run`) or else a `word`."""
    if cjk_run:
        if len(cjk_run) <= _CACHED_RUN_CHARS:
            return _run_terms(version, cjk_run)
        return tuple(_cjk_terms(cjk_run))
    if len(word) <= _CACHED_WORD_CHARS:
        return _cached_word_terms(word)
    return tuple(_word_terms(word))


def _normalise(text: str) -> str:
    # NFKC folds full-width forms ("ＡＢＣ１２３" -> "ABC123") and ligatures.
    return unicodedata.normalize("NFKC", text)


def _terms_of(normalised: str) -> list[str]:
    # _token_terms, inlined: this loop runs once per token of everything indexed
    terms: list[str] = []
    extend = terms.extend
    word_terms = _cached_word_terms
    if normalised.isascii():
        for word in _ASCII_WORD_PATTERN.findall(normalised):
            extend(word_terms(word) if len(word) <= _CACHED_WORD_CHARS else _word_terms(word))
        return terms
    version = _words_version
    # findall yields (cjk run, word) per token; exactly one of the two is non-empty
    for cjk_run, word in _TOKEN_PATTERN.findall(normalised):
        if cjk_run:
            if len(cjk_run) <= _CACHED_RUN_CHARS:
                extend(_run_terms(version, cjk_run))
            else:
                extend(_cjk_terms(cjk_run))
        elif len(word) <= _CACHED_WORD_CHARS:
            extend(word_terms(word))
        else:
            extend(_word_terms(word))
    return terms


def index_terms(text: str) -> list[str]:
    """The words of a text, in text order and with repeats (BM25 counts them); the keyword
    index holds them with the characters of their Chinese words (`index_terms_with_tail`)."""
    return _terms_of(_normalise(text))


def document_terms(text: str) -> list[str]:
    """The terms the keyword index holds for a text: its words (`index_terms`), then the
    characters of its Chinese words."""
    return with_characters(index_terms(text))


def index_terms_with_tail(text: str, tail_chars: int) -> tuple[list[str], list[str] | None]:
    """``index_terms(text)`` and ``index_terms(text[-tail_chars:])`` from one tokenization,
    each with the characters of its Chinese words (``cjk_terms.with_characters``): the terms
    the keyword index holds for a text and for its tail.

    The tail's terms are the text's own from the first token after the cut on, preceded by
    the terms of the piece of a token the cut splits, if any. That holds when the tail's
    NFKC form ends the text's (normalisation does not reach across the cut; it nearly never
    does); otherwise the second value is None, and the tail has to be tokenized by itself.
    """
    normalised = _normalise(text)
    # only a text with a non-ASCII character can hold a Chinese word (capture's hot path)
    chars = list if normalised.isascii() else with_characters
    if len(text) <= tail_chars:
        whole = chars(_terms_of(normalised))
        return whole, list(whole)
    tail_text = _normalise(text[-tail_chars:])
    if not normalised.endswith(tail_text):
        return chars(_terms_of(normalised)), None
    # The tail is normalised[cut:]. The pattern looks neither behind nor at word
    # boundaries, and its tokens are maximal: scanning normalised[cut:] finds the tokens
    # that start at or after `cut`, after the tokens of the piece normalised[cut:end] of a
    # token that starts before `cut` and ends at `end` after it.
    cut = len(normalised) - len(tail_text)
    version = _words_version
    terms: list[str] = []
    extend = terms.extend
    head: list[str] = []  # terms of the piece of a token the cut splits
    tail = -1  # where in `terms` the tail's own tokens start
    for match in _TOKEN_PATTERN.finditer(normalised):
        cjk_run, word = match.groups("")
        token = _token_terms(cjk_run, word, version)
        if tail < 0:
            if match.start() >= cut:
                tail = len(terms)
            elif match.end() > cut:
                head = _terms_of(normalised[cut : match.end()])
                tail = len(terms) + len(token)
        extend(token)
    if tail < 0:
        tail = len(terms)
    return chars(terms), chars(head + terms[tail:])


# Words, initials ("C."), and single punctuation marks of ASCII text, for segment_words.
_ASCII_SEGMENT = re.compile(r"[A-Za-z]\.(?=\s)|\w+(?:['\u2019\-]\w+)*|[^\w\s]")


def segment_words(text: str) -> list[str]:
    """The words and punctuation marks of `text` in order, as written (not normalised or
    stemmed): Chinese segmented by jieba's accurate mode (one word per stretch, not the
    overlapping search terms), other text at word boundaries. Whitespace between them may
    come as tokens of its own. For rules that read a short text word by word (a query)."""
    if not needs_segmenter(text):
        return _ASCII_SEGMENT.findall(text)
    return [w for w in _segmenter().cut(text) if w]


def query_terms(text: str) -> list[str]:
    """Terms of a query: the same normalisation as documents, deduplicated, order kept,
    then the characters of its Chinese words (as documents have them).

    A run of Chinese characters longer than `_QUERY_RUN_CHARS` is segmented piece by piece
    (jieba's unknown-word pass copies its path at every character: quadratic in the run);
    real queries have no such runs, a pasted blob loses at most a word at each cut."""
    return list(_cached_query_terms(_words_version, text))


# A query's terms are asked for by several ranking passes of one search (keyword,
# clauses, feedback, coverage): tokenized once.
@lru_cache(maxsize=64)
def _cached_query_terms(version: int, text: str) -> tuple[str, ...]:
    # `version`: the words version the text is segmented under (part of the cache key)
    normalised = _normalise(text)
    if normalised.isascii():
        return tuple(dict.fromkeys(_terms_of(normalised)))
    terms: list[str] = []
    for cjk_run, word in _TOKEN_PATTERN.findall(normalised):
        if not cjk_run:
            terms.extend(_token_terms("", word, version))
            continue
        for at in range(0, len(cjk_run), _QUERY_RUN_CHARS):
            terms.extend(_token_terms(cjk_run[at : at + _QUERY_RUN_CHARS], "", version))
    return tuple(with_characters(list(dict.fromkeys(terms))))


def _quote_fts_term(term: str) -> str:
    # Inside an FTS5 string every character is literal except '"', which is doubled.
    return '"' + term.replace("\x00", "").replace('"', '""') + '"'


def fts_match_expression(terms: Sequence[str], mode: Literal["or", "and"] = "or") -> str | None:
    """An FTS5 MATCH expression over ``terms``, each quoted; None when there is no term.

    Quoting makes user text safe: operators (AND, NEAR), column filters (``col:``),
    prefixes (``*``) and parentheses inside a term are matched literally.
    """
    if mode not in ("or", "and"):
        raise ValueError(f"mode must be 'or' or 'and', not {mode!r}")
    quoted = [_quote_fts_term(term) for term in dict.fromkeys(terms) if term.strip()]
    if not quoted:
        return None
    return f" {mode.upper()} ".join(quoted)
