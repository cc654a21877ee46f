"""Memory items that only repeat another: a statement anchored from a message, and the message.

Capture anchoring turns what a message says into typed entities (the SQL it holds, the test
it writes), each with the text it was cut from, so one search finds the message and its
entities: the memory layer showed the same test three times. When one item's text (code
fences, whitespace and case aside, at least `MIN_CHARS` long) sits inside another's and
makes up at least `NEAR_WHOLE` of it, the two say the same: one is left out. The typed
entity stays (it is what the payload's `documents` and `code_snippets` list), else the
longer text; the one kept takes the better score, so the text ranks where the better of the
two did. A shorter part of a longer text (a requirement sentence inside a message that also
says more) is not a repeat.

Against the history layer the rule is the prompt's: a memory item whose text the history
already shows adds nothing (`said_in`). An event is left out when a history entry says
nearly all of it or holds all of it (a call inside the entry of the message that made it,
the same call made in another session); an entity that is a bare name (a mention whose
text is its kind and name, "table orders_archive") when an entry says the name. Other
entities stay: a typed entity is what the payload's `documents` and `code_snippets` list
(the SQL a history turn wrote is `code_snippets[0]` for "改成支持分页"). Another session's
identical turns are said there too: a tool result too short to compare alone ("42") when a
history result says it in answer to the same call (`same_result`), and a message that is
mostly calls the history holds (`calls_held`). Pure: ids and texts in, choices out.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

__all__ = [
    "MIN_CHARS",
    "MOSTLY_CALLS",
    "NEAR_WHOLE",
    "bare_name",
    "calls_held",
    "contained_repeats",
    "cut_from",
    "said_in",
    "same_result",
    "says_the_same",
]

MIN_CHARS = 20
NEAR_WHOLE = 0.8
# A message whose calls make up at least this share of what it shows is mostly its calls:
# its text leads in to them ("Let me count them." before a 70-character query).
MOSTLY_CALLS = 0.5
_NAME_CHARS = 3  # a shorter name ("x", "id") is a word of too many entries to say it
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


def bare_name(name: str, text: str) -> bool:
    """Whether `text` says no more than `name` and at most one word beside it (its kind:
    "table orders_archive"), as the mention entities anchored from messages do."""
    key = _key(name)
    return len(key) >= _NAME_CHARS and len(_key(text).replace(key, " ").split()) <= 1


def said_in(
    text: str, history: Mapping[str, str], *, event: bool, name: str | None = None
) -> tuple[str, str] | None:
    """The history entry that already says a memory item's `text` and how ("says", "holds",
    "names"), or None (rules in the module doc: `event`, an event's text, else an entity's
    with its `name`)."""
    key = _key(text)
    if not key:
        return None
    keys = {i: _key(t) for i, t in history.items()}
    if event:
        for hid, held in keys.items():
            if _near_whole(key, held):
                return hid, "says"
            if len(key) >= MIN_CHARS and key in held:
                return hid, "holds"
        return None
    if name is not None and bare_name(name, text):
        word = re.compile(rf"(?<!\w){re.escape(_key(name))}(?!\w)")
        for hid, held in keys.items():
            if word.search(held):
                return hid, "names"
    return None


def same_result(
    text: str, call: str, history: Mapping[str, str], calls: Mapping[str, str]
) -> str | None:
    """The history's tool result that says `text` in answer to the same call, or None.

    `call`: the text of the call the memory's result answers; `calls`: the call text of
    each tool result of `history`. A short result ("42") says nothing on its own, so it is
    compared with its call: the same call (nearly the same text) answered the same."""
    key, asked = _key(text), _key(call)
    if not key or not asked:
        return None
    for hid, held_call in calls.items():
        held = history.get(hid)
        if held is None or _key(held) != key:
            continue
        other = _key(held_call)
        if other == asked or _near_whole(asked, other):
            return hid
    return None


def calls_held(text: str, calls: list[str], history: Mapping[str, str]) -> list[str] | None:
    """The history entries holding every call (`calls`, each at least `MIN_CHARS`) of a
    message that shows `text` (its own text and its calls' lines), when the calls are at
    least `MOSTLY_CALLS` of it; else None. Such a message says little but its calls: the
    history showing the same calls shows that turn."""
    keys = [_key(c) for c in calls]
    if not keys or any(len(k) < MIN_CHARS for k in keys):
        return None
    if sum(map(len, keys)) < MOSTLY_CALLS * len(_key(text)):
        return None
    held = {i: _key(t) for i, t in history.items()}
    found: list[str] = []
    for key in keys:
        hid = next((i for i, h in held.items() if key in h), None)
        if hid is None:
            return None
        found.append(hid)
    return list(dict.fromkeys(found))
