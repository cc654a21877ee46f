"""Semantic anchoring, parsing half: text in, typed units and references out (no storage).

Each parser is a pure function returning a `ParseResult`; none of them raises on bad input.
"""

from .documents import clean_text, detect_version, key_terms, parse_markdown
from .fenced import CodeBlock, extract_code_blocks, guess_language, normalize_language, parse_code
from .files import FileVerdict, detect_file, language_for_path
from .parsed import ParsedReference, ParsedUnit, ParseResult
from .plaintext import chunk_text
from .python_code import module_name_for_path, parse_python
from .sql import normalize_dialect, parse_sql
from .treesitter_code import (
    GrammarUnavailableError,
    parse_outline,
    parse_treesitter,
    treesitter_available,
)

__all__ = [
    "CodeBlock",
    "FileVerdict",
    "GrammarUnavailableError",
    "ParseResult",
    "ParsedReference",
    "ParsedUnit",
    "chunk_text",
    "clean_text",
    "detect_file",
    "detect_version",
    "extract_code_blocks",
    "guess_language",
    "key_terms",
    "language_for_path",
    "module_name_for_path",
    "normalize_dialect",
    "normalize_language",
    "parse_code",
    "parse_markdown",
    "parse_outline",
    "parse_python",
    "parse_sql",
    "parse_treesitter",
    "treesitter_available",
]
