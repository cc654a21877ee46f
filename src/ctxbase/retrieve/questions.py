"""Turns that only ask: a question with no statement beside it.

In a conversation the turn that asks ("第二次约在什么时候？", "How did the test go?") shares
the query's words and shape, since the query is a question about the same thing, yet the
memory asked for is in the turns that answer it. Measured on the project's memory sets, such
turns are 5-13 % of the Chinese and English turns but 0-1.4 % of the evidence; in LoCoMo,
whose turns mostly state something before asking back, 0.8 % of the turns and 0.2 % of the
evidence. Search scores them lower (`SearchConfig.question_weight`), after the session window
has credited the turns around them with their full score, so the answer still gains from them.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["asks_only"]

_QUESTION_MARKS = ("?", "？")
# What ends a statement: Chinese full stops and exclamations (also inside the text), and
# an ASCII period or exclamation followed by space or the end ("3.5" and "v1.2" do not).
_STATEMENT_END = re.compile(r"[。！；!;]|\.(?:\s|$)")


def _trailing_decoration(char: str) -> bool:
    # closing quotes and brackets, spaces, emoji and other symbols after the last mark
    return char.isspace() or unicodedata.category(char)[:2] in ("Pe", "Pf", "So", "Sk", "Sm")


def asks_only(text: str) -> bool:
    """Whether ``text`` is only a question: it ends with a question mark and no sentence in
    it ends as a statement (``"第二次约在什么时候？"``, ``"Really? When?"``; not
    ``"I went hiking. Have you been?"`` nor ``"收到。候补怎么处理？"``)."""
    end = len(text)
    while end and _trailing_decoration(text[end - 1]):
        end -= 1
    body = text[:end]
    if not body.endswith(_QUESTION_MARKS) or _STATEMENT_END.search(body):
        return False
    return any(char.isalnum() for char in body)
