"""Redacting forgotten events and entities out of stored assembly traces.

A trace of another session that used a forgotten event stays (it explains that session's
prompt), with the forgotten parts replaced by `REDACTED`:

- an entry that names a forgotten id as a whole value (a layer item, a candidate, a search
  hit, a dropped item, a relation, the `explain` of a hit) keeps its numbers and its
  structural labels (source, kind, type, layer, reason, strategy, strategies, role) and
  loses every other string, in lists too: its ids, text, content, name, detail, and the
  reasons it was chosen (they name the words it shared with the intent);
- a forgotten id inside any other string (a note, a reason) is replaced where it stands;
- a forgotten text of at least `MIN_TEXT_CHARS` characters is replaced wherever it occurs
  (an intent that quoted the message, the input layer), except in what is `kept`: an
  item still shown that says it too (a message whose decision statement alone is hidden)
  keeps its whole text, in the entries that name it and wherever its text is quoted.

Nothing here touches a database: backends pick the traces to look at with `needles()` and
store what `redact()` returns.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterable
from typing import Any

__all__ = ["MIN_TEXT_CHARS", "REDACTED", "Forgotten"]

REDACTED = "[forgotten]"
# Shorter texts ("ok", "yes") are too common to replace wherever they occur.
MIN_TEXT_CHARS = 8
# Keys of an entry that label its structure, not its content: they stay readable.
_STRUCTURAL_KEYS = frozenset(
    {"source", "kind", "type", "layer", "reason", "strategy", "strategies", "role"}
)
# Characters of an id (model.check_id): a match must not be part of a longer id.
_ID_CHAR = r"[A-Za-z0-9_.:@/\-]"
# A fact's cause as the extractor writes it: "extracted by <rule>: '<quoted span>'".
_QUOTED_CAUSE = re.compile(r":\s*('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")\s*$")


class Forgotten:
    """The ids (events, entities, their search units) and texts a forget removes."""

    def __init__(
        self,
        ids: Iterable[str],
        texts: Iterable[str | None] = (),
        marker: str = REDACTED,
        kept: Iterable[tuple[str, str | None]] = (),
    ) -> None:
        self.marker = marker  # what stands where forgotten content was
        self.ids = frozenset(i for i in ids if i)
        self.texts = sorted(
            {t for t in texts if t and len(t.strip()) >= MIN_TEXT_CHARS}, key=len, reverse=True
        )
        # items still shown (id, text) that say a forgotten text: their entries keep their
        # texts, and their texts are left whole wherever they occur
        shown = [(i, t) for i, t in kept if t and any(f in t for f in self.texts)]
        self.kept_ids = frozenset(i for i, _ in shown if i not in self.ids)
        self.kept = sorted({t for _, t in shown if t}, key=len, reverse=True)
        alternatives = "|".join(re.escape(i) for i in sorted(self.ids, key=len, reverse=True))
        self._id_pattern = (
            re.compile(f"(?<!{_ID_CHAR})(?:{alternatives})(?!{_ID_CHAR})") if self.ids else None
        )

    def __bool__(self) -> bool:
        return bool(self.ids or self.texts)

    def needles(self) -> list[str]:
        """Substrings of a stored JSON trace that may mean it holds forgotten content (ids,
        and texts as JSON escapes them): a cheap filter before `redact`."""
        escaped = [json.dumps(t, ensure_ascii=False)[1:-1] for t in self.texts]
        return sorted(self.ids) + escaped

    def names(self, value: str) -> bool:
        """`value` is a forgotten id, or the id of one of its search units ("id#n")."""
        return value in self.ids or value.split("#", 1)[0] in self.ids

    def mentions(self, value: str | None) -> bool:
        """`value` names a forgotten id or holds a forgotten text."""
        if not value:
            return False
        if self._id_pattern is not None and self._id_pattern.search(value):
            return True
        return any(t in value for t in self.texts)

    def quotes(self, cause: str | None) -> bool:
        """A fact's cause names a forgotten id, or quotes a span of a forgotten text (the
        fact was extracted from it)."""
        if not cause:
            return False
        if self.mentions(cause):
            return True
        found = _QUOTED_CAUSE.search(cause)
        if found is None:
            return False
        try:
            span = ast.literal_eval(found.group(1))
        except (ValueError, SyntaxError):
            return False
        return isinstance(span, str) and bool(span.strip()) and any(span in t for t in self.texts)

    def scrub(self, value: str, texts: bool = True) -> str:
        """`value` with forgotten texts (unless `texts` is False) and ids replaced where
        they occur; a forgotten text inside a kept one stays."""
        held: list[str] = []
        for text in self.kept if texts and "\x00" not in value else ():
            if text in value:
                # a stand-in no text holds (NUL), numbered, put back after the scrub
                value = value.replace(text, f"\x00{len(held)}\x00")
                held.append(text)
        for text in self.texts if texts else ():
            if text in value:
                value = value.replace(text, self.marker)
        if self._id_pattern is not None:
            value = self._id_pattern.sub(self.marker, value)
        for n, text in enumerate(held):
            value = value.replace(f"\x00{n}\x00", text)
        return value

    def redact(self, trace: Any) -> tuple[Any, bool]:
        """The trace with forgotten content replaced (see the module doc), and whether
        anything changed."""
        out = self._walk(trace)
        return out, out != trace

    def _shown(self, value: str) -> bool:
        return value in self.kept_ids or value.split("#", 1)[0] in self.kept_ids

    def _walk(self, value: Any, texts: bool = True) -> Any:
        if isinstance(value, str):
            return self.scrub(value, texts)
        if isinstance(value, list):
            return [self._walk(v, texts) for v in value]
        if isinstance(value, dict):
            about = any(isinstance(v, str) and self.names(v) for v in value.values())
            # an entry about an item still shown keeps its texts (their ids still go)
            texts = texts and not (
                not about and any(isinstance(v, str) and self._shown(v) for v in value.values())
            )
            out: dict[str, Any] = {}
            for key, v in value.items():
                if about and key not in _STRUCTURAL_KEYS and isinstance(v, str | list):
                    out[key] = self._blank(v, texts)
                else:
                    out[key] = self._walk(v, texts)
            return out
        return value

    def _blank(self, value: Any, texts: bool) -> Any:
        """A value of an entry about a forgotten item: every string in it (in lists too)
        gives way to the marker; an entry nested in it is walked as its own."""
        if isinstance(value, str):
            return self.marker
        if isinstance(value, list):
            return [self._blank(v, texts) for v in value]
        return self._walk(value, texts)
