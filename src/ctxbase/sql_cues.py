"""The one pattern that tells a SQL statement in text.

Two readers ask whether a text holds SQL: the fenced-code reader (anchor/fenced.py), which
guesses an untagged block's language from cheap cues before a real parse settles it, and
the "SQL from last time" re-ordering (retrieve/recency.py), which asks whether a message or
entity is SQL at all. Both use this pattern, so what counts as a statement is decided once.
It lives outside the pipeline's layers because anchor and retrieve both read it.

A statement is a ```sql fence or one of: SELECT ... FROM a name (the select list at most
`SELECT_SPAN` characters, not across a `;`, so prose that says "select" here and "from"
three paragraphs later is none), INSERT INTO, UPDATE name SET, DELETE FROM,
CREATE [OR REPLACE] [UNIQUE] TABLE|INDEX|VIEW, ALTER TABLE, DROP TABLE, and a common
table expression (WITH name AS ( ...). Names may be quoted or bracketed ("x", `x`, [x]).
Case does not matter.
"""

from __future__ import annotations

import re

__all__ = ["SELECT_SPAN", "SQL_STATEMENT"]

# The longest select list read between SELECT and FROM: long enough for a pasted report
# query listing dozens of columns, short enough that a lazy scan stays cheap in long texts.
SELECT_SPAN = 1000
_NAME = r"[\w.\"`\[\]]+"

SQL_STATEMENT = re.compile(
    r"```\s*sql\b"
    rf"|\bselect\b[^;]{{0,{SELECT_SPAN}}}?\bfrom\s+{_NAME}"
    r"|\binsert\s+into\b"
    rf"|\bupdate\s+{_NAME}\s+set\b"
    r"|\bdelete\s+from\b"
    r"|\bcreate\s+(?:or\s+replace\s+)?(?:unique\s+)?(?:table|index|view)\b"
    r"|\balter\s+table\b"
    r"|\bdrop\s+table\b"
    r"|\bwith\s+\w+\s+as\s*\(",
    re.IGNORECASE,
)
