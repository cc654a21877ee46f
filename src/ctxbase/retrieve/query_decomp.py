"""The parts of a query that joins several things with a conjunction.

"What movies have both Joanna and Nate seen?", "When did she go to the support group and the
parade?", "白天和夜间的平均地表温度各升了多少？" ask about two or more things at once, usually
told in different turns, often sessions apart. Searched whole, the best matches answer the
first thing and their neighbours follow; the turn about the other thing ranks below them.
Each part (the query with the coordinated phrase replaced by one of its members, the rest
shared) searched on its own finds the turn about that member: search fuses the parts'
rankings with the whole query's (`decomp_weight`).

Generic conjunction handling, no parsing: the members are the runs of words next to the
first conjunction (and, 和, 与, 及, 以及, 跟; a list joined by commas or "、"; not "or" /
还是, which ask which one), each ending at a function word (a preposition, an auxiliary, a
question word, 的, 是, ...), punctuation or a marker ("both", "each", "分别", "各", "都",
dropped from the parts). The member before the conjunction is taken no longer than the one
after it (parallel phrases: "the support group and the parade"), the words before it stay
shared. When the member after it is empty ("... paint and what did she make?"), the
conjunction joins clauses: the parts are the two halves, the second with the first's
capitalised names (its subject). When the one before it is empty, nothing is split (in
Chinese a clause opening with 和 / 跟 compares: "，和代码里的常量一致吗").
Pure functions over the query text.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from .tokenize import query_terms, segment_words

__all__ = ["MAX_PARTS", "MAX_QUERY_CHARS", "query_conjuncts"]

# A question coordinates two to four things; a longer list is a description, searched whole
# (each part costs a keyword search).
MAX_PARTS = 4
# A longer text is a description or a paste, not a question: searched whole, never read
# word by word (segmenting a long Chinese run costs more than the search).
MAX_QUERY_CHARS = 300

# Conjunctions that ask about each member. Disjunctions ("npm or pnpm", "WiFi还是SIM卡")
# ask which one: the answer is the one turn that says, not a turn per member. 还有 asks
# what is left in a question ("离期限还有几天") more often than it adds a member.
_CONJUNCTIONS = frozenset({"and", "&", "plus", "和", "与", "及", "以及", "跟"})
_LIST_SEPARATORS = frozenset({",", "、"})
# Say that each member is meant, not what: dropped from the parts.
_MARKERS = frozenset(
    {"both", "each", "either", "respectively", "分别", "各", "各自", "都", "两者", "二者"}
)
_MARKER_PREFIXES = frozenset({"各", "都"})
# Words a member does not run over: question words, auxiliaries and copulas, prepositions,
# subject pronouns and relative words (English); structural and question words (Chinese).
_BOUNDARY_WORDS = """
    what when where which who whom whose why how
    do does did doing done is are was were be been being am has have had having
    can could will would shall should may might must
    in on at for with to from by of about into onto over under after before during since
    until while than as like between among through across around without within against
    that this these those there
    i you he she we they it me him us them
    not no
    的 地 得 是 有 在 用 对 给 把 被 比 从 到 为 向 跟着 时 时候 里 中 上 后 前
    吗 呢 吧 了 过 着 么
    什么 怎么 怎样 怎么样 为什么 哪 哪个 哪些 哪里 哪儿 哪家 哪天 哪位 多少 几 几个 多久 谁
    是不是 有没有 能不能 会不会
"""
_BOUNDARIES = frozenset(_BOUNDARY_WORDS.split())
# Punctuation ends a member as well (any token without a letter or digit).
_WORDLIKE = re.compile(r"\w")
# A capitalised word after the first: a name the second half of a clause pair shares.
_NAME = re.compile(r"(?<!^)(?<![.?!]\s)\b[A-Z][a-z]+(?:['\u2019]s)?\b")


class _Token(NamedTuple):
    text: str
    start: int
    end: int

    @property
    def key(self) -> str:
        return self.text.casefold()


def _tokens(query: str) -> list[_Token]:
    """The query's words and punctuation marks, with where each starts and ends."""
    out: list[_Token] = []
    at = 0
    for word in segment_words(query):
        start = query.find(word, at)
        if start < 0:  # segmentation changed the text (it does not): give up on positions
            return []
        at = start + len(word)
        if word.strip():
            out.append(_Token(word, start, at))
    return out


def _ends_member(tok: _Token) -> bool:
    key = tok.key
    return (
        key in _BOUNDARIES
        or key in _MARKERS
        or key[:1] in _MARKER_PREFIXES  # "各是", "都有": a marker the segmenter joined
        or key in _CONJUNCTIONS
        or key in _LIST_SEPARATORS
        or not _WORDLIKE.search(key)
    )


def _capitalised(tok: _Token) -> bool:
    return tok.text[:1].isascii() and tok.text[:1].isupper()


def _conjunction(tokens: list[_Token]) -> int | None:
    """Index of the first conjunction, or of the last "、" of a query that has none."""
    for n, tok in enumerate(tokens):
        if tok.key in _CONJUNCTIONS and n > 0:
            return n
    commas = [n for n, tok in enumerate(tokens) if tok.text == "、" and n > 0]
    return commas[-1] if commas else None


def _drop_markers(text: str) -> str:
    """`text` without the marker words, spaces tidied (Chinese text has none to tidy)."""
    out = re.sub(
        r"(?i)\b(?:both|each|either|respectively)\b|分别|各自|两者|二者|(?<=[\u4e00-\u9fff])[各都]",
        " ",
        text,
    )
    out = re.sub(r"\s+([?？,.!])", r"\1", " ".join(out.split()))
    out = re.sub(r"(?<=[\u4e00-\u9fff]) (?=[\u4e00-\u9fff])", "", out)
    return out.strip()


def _distinct(parts: list[str]) -> list[str]:
    """`parts` with markers dropped, when at least two differ in their terms; else []."""
    seen: dict[frozenset[str], str] = {}
    for part in parts:
        cleaned = _drop_markers(part)
        terms = frozenset(query_terms(cleaned))
        if terms and terms not in seen:
            seen[terms] = cleaned
    return list(seen.values()) if len(seen) >= 2 else []


def _clause_parts(query: str, conj: _Token) -> list[str]:
    """The two halves of a query whose conjunction joins clauses, each asking on its own;
    [] when either says too little (fewer than two terms)."""
    first, second = query[: conj.start].strip(), query[conj.end :].strip()
    if len(query_terms(first)) < 2:
        return []
    names = [n for n in _NAME.findall(first) if n.casefold() not in second.casefold()]
    if names:
        second = f"{second} {' '.join(names)}"
    if len(query_terms(second)) < 2:
        return []
    return _distinct([first, second])


def query_conjuncts(query: str) -> list[str]:
    """The parts of a query whose first conjunction coordinates two to MAX_PARTS members:
    per member, the query with the coordinated phrase replaced by that member (markers
    such as "both" dropped). [] when there is none, or a longer list (a description).

    "What movies have both Joanna and Nate seen?" -> ["What movies have Joanna seen?",
    "What movies have Nate seen?"]."""
    if len(query) > MAX_QUERY_CHARS:
        return []
    tokens = _tokens(query)
    c = _conjunction(tokens)
    if c is None:
        return []
    # the member after the conjunction: up to the first word that ends it
    j = c + 1
    while j < len(tokens) and not _ends_member(tokens[j]):
        j += 1
    right = tokens[c + 1 : j]
    # the members before it, back to the first word that ends one, each no longer than the
    # member after it, separated by commas / "、" (an Oxford comma before "and" is skipped)
    cap = max(len(right), 1)
    members: list[list[_Token]] = []
    i = c - 1
    if i >= 0 and tokens[i].key in _LIST_SEPARATORS and tokens[c].key in _CONJUNCTIONS:
        i -= 1
    while i >= 0:
        k = i
        while k >= 0 and not _ends_member(tokens[k]):
            k -= 1
        if k == i:
            break
        if k >= 1 and tokens[k].key in _LIST_SEPARATORS:
            members.insert(0, tokens[k + 1 : i + 1])  # a list's item, whole between commas
            i = k - 1
            continue
        members.insert(0, tokens[max(k + 1, i + 1 - cap) : i + 1])
        break
    if not members:
        # nothing coordinated before it: a clause that opens with it ("，和后端实现的一致吗":
        # "with", not "and"; a comma-separated clause is query_parts' business)
        return []
    if not right:
        return _clause_parts(query, tokens[c])
    if all(_capitalised(t) for m in members for t in m) and _capitalised(right[0]):
        # names coordinate with names: "both Joanna and Nate seen" -> Joanna, Nate
        n = 1
        while n < len(right) and _capitalised(right[n]):
            n += 1
        right = right[:n]
    members.append(right)
    if len(members) > MAX_PARTS:
        return []
    start, end = members[0][0].start, right[-1].end
    prefix, suffix = query[:start], query[end:]
    return _distinct([prefix + query[m[0].start : m[-1].end] + suffix for m in members])
