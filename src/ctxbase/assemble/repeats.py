"""Memory items that only repeat another: a statement anchored from a message, and the message.

Capture anchoring turns what a message says into typed entities (the SQL it holds, the test
it writes), each with the text it was cut from, so one search finds the message and its
entities: the memory layer showed the same test three times. When one item's text (code
fences, whitespace and case aside, at least `MIN_CHARS` long) sits inside another's and
makes up at least `NEAR_WHOLE` of it, the two say the same: one is left out. The typed
entity stays (it is what the payload's `documents` and `code_snippets` list), else the
longer text; the one kept takes the better score, so the text ranks where the better of the
two did. A shorter part of a longer text (a requirement sentence inside a message that also
says more) is not a repeat. Pure: ids and texts in, choices out.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

__all__ = ["MIN_CHARS", "NEAR_WHOLE", "contained_repeats", "cut_from", "says_the_same"]

MIN_CHARS = 20
NEAR_WHOLE = 0.8
_FENCE = re.compile(r"```[\w+#.-]*")


def _key(text: str) -> str:
    return " ".join(_FENCE.sub(" ", text).split()).casefold().strip(" ;。.")


def _near_whole(a: str, b: str) -> bool:
    short, long_ = sorted((a, b), key=len)
    return len(short) >= MIN_CHARS and short in long_ and len(short) >= NEAR_WHOLE * len(long_)


def says_the_same(a: str, b: str) -> bool:
    """Whether two texts say the same by the rule above (one nearly all of the other)."""
    return _near_whole(_key(a), _key(b))


def cut_from(part: str, whole: str) -> bool:
    """Whether `part` is said within `whole` (code fences, whitespace and case aside): a
    statement anchoring cut from a message says nothing the message does not. A rating or
    a retraction of the message holds for it."""
    key = _key(part)
    return bool(key) and key in _key(whole)


def contained_repeats(items: Mapping[str, tuple[str, bool]]) -> dict[str, str]:
    """Ids (text, whether an entity) to leave out, each with the id kept in its place.

    Items are compared in order of preference, entities first, then longer texts, then the
    order given; a kept item is never left out for a later one."""
    keys = {i: _key(text) for i, (text, _) in items.items()}
    order = sorted(keys, key=lambda i: (not items[i][1], -len(keys[i])))
    kept: list[str] = []
    out: dict[str, str] = {}
    for item in order:
        key = keys[item]
        holder = next((k for k in kept if _near_whole(key, keys[k])), None)
        if holder is None:
            kept.append(item)
        else:
            out[item] = holder
    return out
