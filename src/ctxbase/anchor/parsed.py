"""What every parser in `ctxbase.anchor` returns: units to anchor and references between them.

These frozen records are the contract with storage. A `ParsedUnit` becomes a typed entity
(keyed by the file path and the unit's `qualname`), a `ParsedReference` becomes a typed edge
from the unit named by `from_qualname` to whatever `target` names (a module, a function, a
table, a URL). Parsers never raise on bad input: they return `fallback=True` and warnings.

`properties` mappings hold JSON-ready values only (str, int, float, bool, None, tuples and
nested mappings of those) and are made read-only so a result can be shared between threads.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

__all__ = [
    "PARSERS",
    "REFERENCE_KINDS",
    "UNIT_KINDS",
    "ParseResult",
    "ParsedReference",
    "ParsedUnit",
    "freeze_properties",
    "thaw",
]

# The unit kinds the parsers emit; storage maps them to entity types.
UNIT_KINDS = frozenset(
    {
        "module",  # a whole Python (or other language) source file
        "class",  # a class, struct, interface, enum or trait
        "function",  # a free function (including nested and async ones)
        "method",  # a function defined directly in a class body
        "sql_statement",  # one statement of a SQL script
        "table",  # a table defined by CREATE TABLE
        "view",  # a view defined by CREATE VIEW
        "document",  # a whole Markdown or text document
        "section",  # the text under one heading of a document
        "code_block",  # a fenced code block inside a document or message
        "text_chunk",  # a piece of plain text when nothing better applies
    }
)

# The reference kinds the parsers emit; storage maps them to relation types.
REFERENCE_KINDS = frozenset(
    {
        "imports",  # a module or a name imported from one
        "calls",  # a function call, by dotted name
        "inherits",  # a base class / extended type / implemented interface
        "reads_table",  # a SQL statement reads from a table
        "writes_table",  # a SQL statement inserts, updates, deletes, creates or alters a table
        "references_table",  # a foreign key from one table to another
        "cites",  # a document links to a URL or another file
    }
)

# How a result was produced; anything other than a real parser implies `fallback=True`.
PARSERS = frozenset(
    {"python_ast", "sqlglot", "markdown", "tree_sitter", "regex_outline", "plain_text"}
)


def freeze_properties(values: Mapping[str, Any]) -> Mapping[str, Any]:
    """A read-only copy where lists become tuples and dicts become read-only mappings."""
    return MappingProxyType({key: _freeze_value(value) for key, value in values.items()})


def _freeze_value(value: Any) -> Any:
    if isinstance(value, Mapping):
        return freeze_properties(value)
    if isinstance(value, list | tuple | set | frozenset):
        items = sorted(value) if isinstance(value, set | frozenset) else value
        return tuple(_freeze_value(item) for item in items)
    return value


def thaw(value: Any) -> Any:
    """A JSON-ready copy of a frozen value: mappings become dicts, tuples become lists."""
    if isinstance(value, Mapping):
        return {str(key): thaw(item) for key, item in value.items()}
    if isinstance(value, tuple | list):
        return [thaw(item) for item in value]
    return value


@dataclass(frozen=True)
class ParsedUnit:
    """One anchorable unit: a function, a class, a SQL statement, a document section...

    `qualname` is unique within one `ParseResult` (e.g. `pkg.mod.Class.method` for Python,
    `statement_3` for SQL, `Intro > Setup` for a Markdown section). `parent` is the qualname
    of the enclosing unit, or None at the top. Lines are 1-based and inclusive.
    """

    kind: str
    name: str
    qualname: str
    language: str
    text: str
    start_line: int
    end_line: int
    docstring: str | None = None
    parent: str | None = None
    properties: Mapping[str, Any] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        # Freeze whatever mapping the caller passed, so the record is really immutable.
        object.__setattr__(self, "properties", freeze_properties(self.properties))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of this unit."""
        return {
            "kind": self.kind,
            "name": self.name,
            "qualname": self.qualname,
            "language": self.language,
            "text": self.text,
            "start_line": self.start_line,
            "end_line": self.end_line,
            "docstring": self.docstring,
            "parent": self.parent,
            "properties": thaw(self.properties),
        }


@dataclass(frozen=True)
class ParsedReference:
    """A directed reference from a unit (by qualname) to a target named by a string.

    `confidence` is below 1 when the target was guessed (a call resolved by name only, an
    import whose relative base could not be resolved).
    """

    from_qualname: str
    kind: str
    target: str
    line: int | None = None
    confidence: float = 1.0
    properties: Mapping[str, Any] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "properties", freeze_properties(self.properties))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of this reference."""
        return {
            "from_qualname": self.from_qualname,
            "kind": self.kind,
            "target": self.target,
            "line": self.line,
            "confidence": self.confidence,
            "properties": thaw(self.properties),
        }


@dataclass(frozen=True)
class ParseResult:
    """Everything one parser call found in one text.

    `fallback` is True when the text could not be parsed by a real parser and was anchored as
    plain text chunks (or, for languages without an installed grammar, as a regex outline);
    `parser` says which way it went and `warnings` says why. `properties` holds facts about
    the whole text (the SQL dialect, a document's title and version...).
    """

    path: str | None
    language: str
    units: tuple[ParsedUnit, ...]
    references: tuple[ParsedReference, ...] = ()
    warnings: tuple[str, ...] = ()
    fallback: bool = False
    parser: str = "plain_text"
    properties: Mapping[str, Any] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "properties", freeze_properties(self.properties))

    def units_of(self, *kinds: str) -> tuple[ParsedUnit, ...]:
        """The units of the given kinds, in source order."""
        return tuple(unit for unit in self.units if unit.kind in kinds)

    def unit(self, qualname: str) -> ParsedUnit | None:
        """The unit with this qualname, or None."""
        return next((unit for unit in self.units if unit.qualname == qualname), None)

    def references_of(self, *kinds: str) -> tuple[ParsedReference, ...]:
        """The references of the given kinds, in source order."""
        return tuple(ref for ref in self.references if ref.kind in kinds)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of the whole result."""
        return {
            "path": self.path,
            "language": self.language,
            "units": [unit.to_dict() for unit in self.units],
            "references": [ref.to_dict() for ref in self.references],
            "warnings": list(self.warnings),
            "fallback": self.fallback,
            "parser": self.parser,
            "properties": thaw(self.properties),
        }
