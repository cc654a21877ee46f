"""Semantic anchoring: parsers (text in, typed units and references out, no storage) and the
integration half that stores them as typed entities and weaves their relations.

Each parser is a pure function returning a `ParseResult`; none of them raises on bad input.
`ingest_path` anchors a repository or a folder of documents, `anchor_message` the code blocks
of an event, `anchor_document` an uploaded document; `weave` holds the relation rules and
`signing` the HMAC-signed metadata.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy_names import lazy_names

if TYPE_CHECKING:
    from .anchoring import AnchorReport, anchor_document, anchor_message, upsert_requirement
    from .capture_anchor import AnchorConfig
    from .capture_rules import anchor_events
    from .documents import clean_text, detect_version, key_terms, parse_markdown
    from .entities import (
        EntitySpec,
        entity_types,
        register_entity_type,
        register_relation_type,
        relation_types,
        upsert_versioned,
    )
    from .fenced import (
        CodeBlock,
        extract_code_blocks,
        guess_language,
        normalize_language,
        parse_code,
    )
    from .files import FileVerdict, detect_file, language_for_path
    from .ingest import IngestReport, ingest_path
    from .llm_extract import LLMExtractConfig, LLMExtractStats
    from .parsed import ParsedReference, ParsedUnit, ParseResult
    from .plaintext import chunk_text
    from .python_code import module_name_for_path, parse_python
    from .signing import (
        filter_signed,
        project_key,
        sign_entity,
        sign_relation,
        verify_entity,
        verify_relation,
        verify_results,
    )
    from .sql import normalize_dialect, parse_sql
    from .treesitter_code import (
        GrammarUnavailableError,
        parse_outline,
        parse_treesitter,
        treesitter_available,
    )
    from .weave import SymbolIndex, find_mentions, weave_event, weave_requirement, weave_text

__all__ = [
    "AnchorConfig",
    "AnchorReport",
    "CodeBlock",
    "EntitySpec",
    "FileVerdict",
    "GrammarUnavailableError",
    "IngestReport",
    "LLMExtractConfig",
    "LLMExtractStats",
    "ParseResult",
    "ParsedReference",
    "ParsedUnit",
    "SymbolIndex",
    "anchor_document",
    "anchor_events",
    "anchor_message",
    "chunk_text",
    "clean_text",
    "detect_file",
    "detect_version",
    "entity_types",
    "extract_code_blocks",
    "filter_signed",
    "find_mentions",
    "guess_language",
    "ingest_path",
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
    "project_key",
    "register_entity_type",
    "register_relation_type",
    "relation_types",
    "sign_entity",
    "sign_relation",
    "treesitter_available",
    "upsert_requirement",
    "upsert_versioned",
    "verify_entity",
    "verify_relation",
    "verify_results",
    "weave_event",
    "weave_requirement",
    "weave_text",
]

# Each name is imported from its module on first use: the parsers (sqlglot, tree-sitter, the
# document and Python parsers) load only when something anchors.
_LAZY = {
    "AnchorReport": "anchoring",
    "anchor_document": "anchoring",
    "anchor_message": "anchoring",
    "upsert_requirement": "anchoring",
    "AnchorConfig": "capture_anchor",
    "anchor_events": "capture_rules",
    "clean_text": "documents",
    "detect_version": "documents",
    "key_terms": "documents",
    "parse_markdown": "documents",
    "EntitySpec": "entities",
    "entity_types": "entities",
    "register_entity_type": "entities",
    "register_relation_type": "entities",
    "relation_types": "entities",
    "upsert_versioned": "entities",
    "CodeBlock": "fenced",
    "extract_code_blocks": "fenced",
    "guess_language": "fenced",
    "normalize_language": "fenced",
    "parse_code": "fenced",
    "FileVerdict": "files",
    "detect_file": "files",
    "language_for_path": "files",
    "IngestReport": "ingest",
    "ingest_path": "ingest",
    "LLMExtractConfig": "llm_extract",
    "LLMExtractStats": "llm_extract",
    "ParsedReference": "parsed",
    "ParsedUnit": "parsed",
    "ParseResult": "parsed",
    "chunk_text": "plaintext",
    "module_name_for_path": "python_code",
    "parse_python": "python_code",
    "filter_signed": "signing",
    "project_key": "signing",
    "sign_entity": "signing",
    "sign_relation": "signing",
    "verify_entity": "signing",
    "verify_relation": "signing",
    "verify_results": "signing",
    "normalize_dialect": "sql",
    "parse_sql": "sql",
    "GrammarUnavailableError": "treesitter_code",
    "parse_outline": "treesitter_code",
    "parse_treesitter": "treesitter_code",
    "treesitter_available": "treesitter_code",
    "SymbolIndex": "weave",
    "find_mentions": "weave",
    "weave_event": "weave",
    "weave_requirement": "weave",
    "weave_text": "weave",
}


if not TYPE_CHECKING:  # mypy reads the imports above; an unknown name stays an error
    __getattr__, __dir__ = lazy_names(__name__, globals(), _LAZY)
