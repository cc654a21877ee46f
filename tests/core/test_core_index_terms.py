"""Index terms stay exactly what they were: stored databases and their queries depend on them.

The golden file holds digests of the terms of a varied corpus (terms_corpus.py) as computed
before the tokenizer and indexing were made faster: index_terms, query_terms, the context
terms an event lends to the next one, and whole event and entity search units. After an
intended change of the terms, rewrite it with `python tests/core/test_core_index_terms.py`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from terms_corpus import corpus

from ctxbase.cjk_terms import with_characters
from ctxbase.model import Entity, Event
from ctxbase.retrieve import indexing
from ctxbase.retrieve.tokenize import add_words, index_terms, index_terms_with_tail, query_terms

GOLDEN = Path(__file__).with_name("index_terms_golden.json")


def _digest(value: Any) -> str:
    raw = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()[:20]


def _event(n: int, text: str) -> Event:
    metadata: dict[str, Any] = {"speaker": "bob"} if n % 5 == 0 else {}
    data = {"n": n} if not text else None
    # A fixed id per event keeps the golden file stable (the ids it was made with).
    raw = json.dumps(["p", f"s{n % 3}", "user_message", text or None, data, []],
                     ensure_ascii=False, sort_keys=True, separators=(",", ":"))  # fmt: skip
    eid = "ev_" + hashlib.sha256(raw.encode("utf-8")).hexdigest()[:32]
    return Event(id=eid, project_id="p", session_id=f"s{n % 3}", type="user_message",
                 text=text or None, data=data, metadata=metadata, ts=1000.0 + n)  # fmt: skip


def _unit(item: Any) -> dict[str, Any]:
    # Fields added since the golden file was written count only when set (repo: None).
    return {k: v for k, v in dataclasses.asdict(item).items() if not (k == "repo" and v is None)}


def compute() -> dict[str, Any]:
    """What the golden file holds, computed with the code under test."""
    texts = corpus()
    per_text = {
        _digest(text): _digest([index_terms(text), query_terms(text), indexing.context_terms(text)])
        for text in texts
    }
    # Events in three interleaved sessions, each indexed with the text of the one before.
    units: list[Any] = []
    before: dict[str, tuple[str, str]] = {}
    for n, text in enumerate(texts):
        event = _event(n, text)
        items = indexing.event_items(event, context=before.get(event.session_id))
        units.append([_unit(it) for it in items])
        before[event.session_id] = (event.id, indexing.event_search_text(event))
    for n, text in enumerate(texts[::7]):
        entity = Entity(id=f"doc:{n}", project_id="p", type="document", name=f"d{n}", text=text,
                        properties={"title": "T"}, created_at=1.0, updated_at=2.0)  # fmt: skip
        units.append([_unit(it) for it in indexing.entity_items(entity)])
    return {"texts": per_text, "units": [_digest(u) for u in units]}


def test_terms_of_the_corpus_are_unchanged() -> None:
    golden = json.loads(GOLDEN.read_text(encoding="utf-8"))
    got = compute()
    missing = golden["texts"].keys() - got["texts"].keys()
    assert not missing, "the corpus changed: rewrite the golden file (see the docstring)"
    changed = [k for k, v in golden["texts"].items() if got["texts"][k] != v]
    assert not changed, f"{len(changed)} texts now have other terms"
    assert len(got["units"]) == len(golden["units"])
    pairs = zip(got["units"], golden["units"], strict=True)
    changed_units = [n for n, (a, b) in enumerate(pairs) if a != b]
    assert not changed_units, f"search units changed at {changed_units[:10]}"
    # Twice: the second round is answered from the caches.
    assert compute() == got


# pieces, not single characters: combining marks, identifiers and runs cut mid-way too
_TEXT = st.lists(
    st.sampled_from(
        [
            *"abcXYZ_.-019 \n\t，。！？的了吗缓存数据库中华人民共和国ＡＢ１２\"'*():",
            *("😀", "e\u0301", "\u0301", "ﬁ", "\u212b", "한", "カ", "getUser", "a.b", "  "),
        ]
    ),
    max_size=80,
).map("".join)


@settings(max_examples=300, deadline=None)
@given(_TEXT, st.integers(min_value=1, max_value=130))
def test_tail_terms_equal_those_of_the_tail_alone(text: str, tail_chars: int) -> None:
    terms, tail = index_terms_with_tail(text, tail_chars)
    assert terms == with_characters(index_terms(text))
    if tail is not None:
        assert tail == with_characters(index_terms(text[-tail_chars:]))


def test_cached_terms_follow_added_words() -> None:
    text = "我们的喵呜汪嘿系统"
    before = indexing.context_terms(text)
    assert "喵呜汪嘿" not in before
    add_words(["喵呜汪嘿"])
    after = indexing.context_terms(text)
    assert "喵呜汪嘿" in after
    assert after == with_characters(index_terms(text))
    assert {"喵", "呜", "汪", "嘿", "系", "统"} <= set(after)  # each character of the words
    (unit,) = indexing.event_items(_event(1, text))
    assert unit.terms == " ".join(after)


if __name__ == "__main__":
    GOLDEN.write_text(json.dumps(compute(), indent=0, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {GOLDEN}", file=sys.stderr)
