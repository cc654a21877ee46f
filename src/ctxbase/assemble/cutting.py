"""Cutting a text to a token budget where a reader expects it to end.

A recalled message, document or tool output that does not fit whole is cut so that what is
left reads as complete as it can: prose after its last whole sentence, else after its last
whole clause, else after a whole word; code and tool output after a whole line, else a
whole word. A cut is taken at the coarsest of these boundaries that keeps at least half the
room (a whole first sentence of ten tokens is not worth losing the rest of a 400-token
room); when none does (one unbroken run, a hash, a minified line) the text is cut on a token
boundary. The kept text always ends with a marker that it was cut (`…` after prose, a line
`…` after code), and always counts at most the room, marker included. A recalled item's
label ("[message ev_1]") is kept whole and is not counted as what was kept: a cut that
keeps the label alone is no cut.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Protocol

from .tokens import _is_cjk  # the counter's own notion of a CJK character

__all__ = ["CUT_MARKER", "fit_to_boundary", "mark_cut"]

CUT_MARKER = "…"
# A coarser boundary is used when it keeps at least this much of the room.
_ENOUGH = 0.5

# Closing quotes and brackets: they end with the sentence they close.
_CLOSERS = "\"'”’」』）)]"
# Sentence ends: Chinese and Latin end marks with the closing quotes or brackets after them
# (a Latin full stop only before a space: "3.5" and "v1.2" go on), and every line end.
_SENTENCE_END = re.compile(
    r"[。！？!?…]+[\"'”’」』）)\]]*|(?<!\.)\.+[\"'”’」』）)\]]*(?=\s)|(?=\n)"
)
# Clause ends: Chinese commas and semicolons, or Latin ones (a comma before a digit is
# inside a number: 80,000).
_CLAUSE_END = re.compile(r"[，、；;]|,(?!\d)")
# What a clause cut leaves at its end before the marker.
_CLAUSE_MARKS = "，、；;, "


class _Counter(Protocol):
    def count(self, text: str) -> int: ...

    def truncate(self, text: str, max_tokens: int) -> str: ...


def mark_cut(head: str, *, lines: bool = False) -> str:
    """`head` with the marker that the text went on: a line of its own after code, right
    after Chinese (or other CJK) text, after a space otherwise."""
    head = head.rstrip()
    if not head:
        return ""
    if lines:
        return f"{head}\n{CUT_MARKER}"
    said = head.rstrip(_CLOSERS) or head  # 。” is Chinese, ." is not
    return f"{head}{CUT_MARKER}" if _is_cjk(said[-1]) else f"{head} {CUT_MARKER}"


def _sentence_ends(text: str) -> list[int]:
    return [m.end() for m in _SENTENCE_END.finditer(text)]


def _clause_ends(text: str) -> list[int]:
    return [m.end() for m in _CLAUSE_END.finditer(text)]


def _line_ends(text: str) -> list[int]:
    return [m.start() for m in re.finditer(r"\n", text)]


def _word_ends(text: str) -> list[int]:
    """Positions between two words: before a space, or next to a CJK character (Chinese is
    written without spaces); never inside a Latin word or a number ("created_at", "30")."""
    return [
        i
        for i in range(1, len(text))
        if (text[i].isspace() and not text[i - 1].isspace())
        or (not text[i].isspace() and (_is_cjk(text[i]) or _is_cjk(text[i - 1])))
    ]


def _best_head(
    text: str,
    ends: Sequence[int],
    max_tokens: int,
    counter: _Counter,
    render: Callable[[str], str],
) -> str:
    """The longest `render(text[:end])` within `max_tokens` over `ends` (ascending), by a
    binary search on the counts (they grow with the prefix; the result is counted again)."""
    lo, hi, best = 0, len(ends) - 1, ""
    while lo <= hi:
        mid = (lo + hi) // 2
        trial = render(text[: ends[mid]])
        if trial and counter.count(trial) <= max_tokens:
            best, lo = trial, mid + 1
        else:
            hi = mid - 1
    return best


def _token_cut(text: str, max_tokens: int, counter: _Counter, *, lines: bool, keep: int) -> str:
    """The token-boundary cut with its marker, lowered until the whole counts in; "" when
    it keeps nothing past the first `keep` characters."""
    limit = max_tokens - counter.count(mark_cut("x", lines=lines)) + 1
    while limit > 0:
        kept = counter.truncate(text, limit)
        if not kept[keep:].strip():
            return ""
        trial = mark_cut(kept, lines=lines)
        if counter.count(trial) <= max_tokens:
            return trial
        limit -= 1
    return ""


def fit_to_boundary(
    text: str,
    max_tokens: int,
    counter: _Counter,
    *,
    lines: bool = False,
    at_least: int = 0,
    keep: int = 0,
) -> str:
    """`text` whole when it fits in `max_tokens`, else cut where a reader expects it to end,
    with the cut marked (`mark_cut`); counts at most `max_tokens`, marker included.

    Prose (`lines=False`: messages, documents) is cut after its last whole sentence (a line
    end counts as one), else its last whole clause (after "，", "、", "；", "," or ";",
    never inside 80,000), else its last whole word (a Chinese character is one); code and
    tool output (`lines=True`) after its last whole line, else its last whole word. The
    first of those boundaries that keeps at least half of `max_tokens` (and `at_least`
    tokens: what a caller would not keep less of) is taken; when none does, the text is cut
    on a token boundary. The first `keep` characters (a label: "[message ev_1]\n") are
    kept whole and are not what is cut: half the room is counted past them, and a cut
    that keeps nothing past them is "", as is one where not even the marker fits."""
    if max_tokens <= 0:
        return ""
    if counter.count(text) <= max_tokens:
        return text

    def plain(head: str) -> str:
        return mark_cut(head, lines=lines)

    def clause(head: str) -> str:
        return mark_cut(head.rstrip().rstrip(_CLAUSE_MARKS), lines=lines)

    tiers: list[tuple[Callable[[str], list[int]], Callable[[str], str]]] = (
        [(_line_ends, plain), (_word_ends, plain)]
        if lines
        else [(_sentence_ends, plain), (_clause_ends, clause), (_word_ends, clause)]
    )
    # no cut within the room is longer than the longest prefix that fits: boundaries past
    # it are not looked for (a long document is cut to 600 tokens, not scanned whole)
    reach = len(counter.truncate(text, max_tokens))
    window = text[: reach + 1]  # one more character: is the last one before a space?
    start = len(text) - len(text[keep:].lstrip())  # the first character past the label
    if reach <= start:
        return ""  # not even the label and a word of what it labels
    label = counter.count(text[:keep]) if keep else 0
    enough = min(max_tokens, max(label + _ENOUGH * (max_tokens - label), at_least))
    ends: set[int] = set()
    for ends_of, render in tiers:
        # finer tiers keep the coarser boundaries; none inside the label or right after it
        ends.update(e for e in ends_of(window) if start < e <= reach)
        kept = _best_head(text, sorted(ends), max_tokens, counter, render)
        # a clause rendered without its mark may keep nothing past the label: not a cut
        said = kept.removesuffix(CUT_MARKER).rstrip()[keep:].strip()
        if kept and said and counter.count(kept) >= enough:
            return kept
    return _token_cut(text, max_tokens, counter, lines=lines, keep=keep)
