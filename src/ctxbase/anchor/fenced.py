"""Fenced code blocks in agent messages and Markdown, and the per-language parse dispatcher.

Agents paste code into messages as ``` or ~~~ fenced blocks, often untagged, sometimes cut
off at the end of a truncated reply; every block is found, its language taken from the tag
or guessed (cheap cues first, then a real parse attempt), and `parse_code` anchors it.
"""

from __future__ import annotations

import ast
import re
import warnings as python_warnings
from dataclasses import dataclass

import sqlglot
from sqlglot.errors import SqlglotError

from ..sql_cues import SQL_STATEMENT
from .parsed import ParseResult
from .plaintext import plain_text_result
from .python_code import ascii_reading, parse_python
from .sql import SQL_DIALECT_ALIASES, normalize_dialect, parse_sql

__all__ = [
    "LANGUAGE_ALIASES",
    "CodeBlock",
    "extract_code_blocks",
    "guess_language",
    "normalize_language",
    "parse_code",
]

# Fence tags and file-type names -> one canonical language name.
LANGUAGE_ALIASES: dict[str, str] = {
    "py": "python",
    "python3": "python",
    "py3": "python",
    "ipython": "python",
    "pycon": "python",
    "js": "javascript",
    "jsx": "javascript",
    "mjs": "javascript",
    "cjs": "javascript",
    "node": "javascript",
    "ts": "typescript",
    "golang": "go",
    "md": "markdown",
    "mdx": "markdown",
    "sh": "shell",
    "bash": "shell",
    "zsh": "shell",
    "console": "shell",
    "shell-session": "shell",
    "yml": "yaml",
    "txt": "text",
    "plaintext": "text",
    "plain": "text",
    "rs": "rust",
    "c++": "cpp",
    "cs": "csharp",
    "c#": "csharp",
    "kt": "kotlin",
    "rb": "ruby",
    "mysql": "sql",
    "postgres": "sql",
    "sqlite": "sql",
    "tsql": "sql",
    "bigquery": "sql",
    "snowflake": "sql",
    "duckdb": "sql",
    "oracle": "sql",
    **{alias: "sql" for alias in SQL_DIALECT_ALIASES},
}

# Languages with a tree-sitter outline (see treesitter_code); others fall back to regexes.
_TREE_SITTER_LANGUAGES = frozenset({"javascript", "typescript", "tsx", "go", "java"})

_OPENING_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")

_PYTHON_CUES = re.compile(
    r"^\s*(?:def |async def |class \w+[(:]|import \w|from [\w.]+ import |@\w|"
    r"if __name__ ==|print\(|return\b|elif |except\b|with \w.* as \w+:)",
    re.M,
)
_OTHER_CUES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("go", re.compile(r"^\s*package \w+\s*$|^\s*func (?:\([^)]*\)\s*)?\w+\(", re.M)),
    (
        "java",
        re.compile(
            r"^\s*(?:public|private|protected)\s+(?:static\s+)?(?:final\s+)?"
            r"(?:class|interface|enum|void|[\w<>\[\]]+\s+\w+\s*\()",
            re.M,
        ),
    ),
    (
        "typescript",
        re.compile(
            r"^\s*(?:export\s+)?(?:interface|type)\s+\w+\s*[={<]|"
            r":\s*(?:string|number|boolean)\b",
            re.M,
        ),
    ),
    (
        "javascript",
        re.compile(
            r"^\s*(?:const|let|var)\s+\w+\s*=|\bfunction\s*\w*\s*\(|=>\s*[{(]|"
            r"\bconsole\.log\(|\brequire\(['\"]",
            re.M,
        ),
    ),
    (
        "shell",
        re.compile(
            r"^\s*(?:\$ |#!/bin/(?:ba)?sh|(?:sudo |pip |npm |git |cd |export "
            r"|echo |curl |docker )\S)",
            re.M,
        ),
    ),
    ("json", re.compile(r"^\s*[\[{]\s*(?:\"[^\"]*\"\s*:|$)")),
)


@dataclass(frozen=True)
class CodeBlock:
    """One fenced block: its language, its code, and where it sits in the message.

    `start`/`end` are character offsets of the whole block (fences included, `end`
    exclusive); `code_start`/`code_end` those of the code itself, so
    `message[code_start:code_end]` is the code as it appears in the message (before the
    fence's indentation is removed). Lines are 1-based. `closed` is False when the message
    ended before the closing fence; `tagged` is False when the language was guessed.
    """

    language: str
    code: str
    info: str
    tagged: bool
    closed: bool
    start: int
    end: int
    code_start: int
    code_end: int
    start_line: int
    end_line: int


def normalize_language(name: str | None) -> str:
    """Canonical language name for a fence tag or file type; empty or None gives `text`."""
    if not name or not name.strip():
        return "text"
    key = name.strip().lower().lstrip(".").removeprefix("language-")
    key = key.split("{", 1)[0].split(",", 1)[0].strip()
    return LANGUAGE_ALIASES.get(key, key) or "text"


def guess_language(code: str) -> str:
    """Best guess of an untagged snippet's language: python, sql, another one, or `text`."""
    stripped = code.strip()
    if not stripped:
        return "text"
    python_hits = len(_PYTHON_CUES.findall(stripped))
    sql_hits = len(SQL_STATEMENT.findall(stripped))
    # A real parse settles it: SQL never parses as Python, and Python that embeds SQL in
    # strings must not be taken for SQL, so Python is tried first.
    if python_hits and _parses_as_python(stripped):
        return "python"
    if sql_hits and _parses_as_sql(stripped):
        return "sql"
    for language, pattern in _OTHER_CUES:
        if pattern.search(stripped):
            return language
    return "text"


def _parses_as_python(code: str) -> bool:
    # as parse_python reads it: full-width punctuation pasted into code as ASCII
    for reading in dict.fromkeys((code, ascii_reading(code))):
        try:
            with python_warnings.catch_warnings():
                python_warnings.simplefilter("ignore")  # invalid escape sequences in snippets
                ast.parse(reading)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        return True
    return False


def _parses_as_sql(code: str) -> bool:
    try:
        statements = sqlglot.parse(code)
    except (SqlglotError, ValueError, RecursionError):
        return False
    return any(
        statement is not None and not isinstance(statement, sqlglot.exp.Command)
        for statement in statements
    )


def extract_code_blocks(message_text: str) -> list[CodeBlock]:
    """All fenced code blocks of a message or Markdown text, in order; never raises."""
    blocks: list[CodeBlock] = []
    lines = message_text.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    index = 0
    while index < len(lines):
        opening = _OPENING_FENCE.match(lines[index].rstrip("\r\n"))
        if opening is None or (opening["fence"][0] == "`" and "`" in opening["info"]):
            index += 1
            continue
        fence = opening["fence"]
        indent = len(opening["indent"].expandtabs(4))
        info = opening["info"].strip()
        closing_index = _find_closing(lines, index + 1, fence)
        closed = closing_index is not None
        last_code_index = (closing_index if closing_index is not None else len(lines)) - 1
        code_lines = [_dedent(line, indent) for line in lines[index + 1 : last_code_index + 1]]
        code = "".join(code_lines).rstrip("\r\n") if code_lines else ""
        block_end_index = closing_index if closing_index is not None else len(lines) - 1
        code_start = offsets[index + 1] if index + 1 < len(offsets) else len(message_text)
        code_end = offsets[last_code_index + 1] if last_code_index >= index + 1 else code_start
        tag = info.split()[0] if info else ""
        blocks.append(
            CodeBlock(
                language=normalize_language(tag) if tag else guess_language(code),
                code=code,
                info=info,
                tagged=bool(tag),
                closed=closed,
                start=offsets[index] + len(opening["indent"]),
                end=_line_end(lines, offsets, block_end_index),
                code_start=code_start,
                code_end=_trim_newline(message_text, code_start, code_end),
                start_line=index + 1,
                end_line=block_end_index + 1,
            )
        )
        index = block_end_index + 1
    return blocks


def _find_closing(lines: list[str], start: int, fence: str) -> int | None:
    """Index of the line closing `fence`: same character, at least as long, nothing after."""
    closing = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$")
    for index in range(start, len(lines)):
        if closing.match(lines[index].rstrip("\r\n")):
            return index
    return None


def _dedent(line: str, indent: int) -> str:
    """Remove up to `indent` columns of leading whitespace (the fence's own indentation)."""
    removed = 0
    position = 0
    while position < len(line) and removed < indent and line[position] in " \t":
        removed += 4 - removed % 4 if line[position] == "\t" else 1
        position += 1
    return line[position:]


def _line_end(lines: list[str], offsets: list[int], index: int) -> int:
    """Offset just after line `index`, excluding its newline."""
    return offsets[index] + len(lines[index].rstrip("\r\n"))


def _trim_newline(text: str, start: int, end: int) -> int:
    while end > start and text[end - 1] in "\r\n":
        end -= 1
    return end


def parse_code(code: str, language: str | None, path: str | None = None) -> ParseResult:
    """Anchor a snippet in the way its language allows; `None` means guess the language.

    Python and SQL go to their parsers (a SQL dialect name such as `postgresql` is used as
    the dialect), Markdown to the document parser, JavaScript/TypeScript/Go/Java to
    tree-sitter when its grammars are installed (else a regex outline), anything else to
    plain-text chunks. Never raises on bad code.
    """
    raw = (language or "").strip().lower()
    canonical = normalize_language(language) if language else guess_language(code)
    if canonical == "python":
        return parse_python(code, path)
    if canonical == "sql":
        dialect = normalize_dialect(raw) if raw and raw != "sql" else None
        return parse_sql(code, dialect=dialect, path=path)
    if canonical == "markdown":
        # Imported here: the document parser uses this module's fence scanner.
        from .documents import parse_markdown

        return parse_markdown(code, path)
    if canonical in _TREE_SITTER_LANGUAGES:
        from .treesitter_code import parse_outline

        return parse_outline(code, canonical, path)
    return plain_text_result(code, path, canonical)
