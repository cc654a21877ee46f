"""One file's text as entity specs: the parser its language needs, its units, references
and parent -> child pairs (pure: nothing is read or written here).

Python is parsed via ast, SQL via sqlglot, Markdown by headings, JavaScript/TypeScript/Go/
Java via tree-sitter or a regex outline, anything else (or code whose parser fails) as
plain-text parts; typed units inside a document's code blocks (a CREATE TABLE in a design
note) are anchored too. Ids are keyed by repository and path (`<repo>:<path>`). ingest.py
calls `anchor_file_text` for every changed file it reads.
"""

from __future__ import annotations

import posixpath
from dataclasses import replace
from typing import Any

from ..model import make_entity_id
from .entities import EntitySpec, specs_from_result
from .parsed import ParseResult
from .plaintext import DEFAULT_CHUNK_CHARS
from .weave import StoredRef

__all__ = ["anchor_file_text", "file_entity_id"]

_CODE_PARSERS = frozenset({"javascript", "typescript", "tsx", "go", "java"})
_PROSE = frozenset({"text", "rst", "asciidoc"})


def _key(path: str, repo: str | None) -> str:
    """The natural key of a file's entities: `<repo>:<path>` (the path alone before repos)."""
    return f"{repo}:{path}" if repo else path


def file_entity_id(path: str, repo: str | None = None) -> str:
    """The id of the `file` entity of `path` in `repo`."""
    return make_entity_id("file", _key(path, repo))


def _parse(
    text: str, path: str, language: str, max_chars: int = DEFAULT_CHUNK_CHARS
) -> ParseResult:
    """The file parsed by its language's parser, else (no parser, or one that failed) as
    plain-text parts of about `max_chars` characters."""
    from .documents import parse_markdown
    from .plaintext import plain_text_result
    from .python_code import parse_python
    from .sql import parse_sql
    from .treesitter_code import parse_outline

    try:
        if language == "python":
            return parse_python(text, path)
        if language == "sql":
            return parse_sql(text, path=path)
        if language == "markdown":
            return parse_markdown(text, path)
        if language in _CODE_PARSERS:
            return parse_outline(text, language, path)
    except Exception as error:  # parsers should not raise; if one does, keep the text
        reason = f"{type(error).__name__} in the {language} parser: {error}; plain text"
        return plain_text_result(text, path, language, (reason,), max_chars=max_chars)
    return plain_text_result(text, path, language, max_chars=max_chars)


def anchor_file_text(
    text: str,
    path: str,
    language: str,
    *,
    git_commit: str | None = None,
    repo: str | None = None,
    plain_part_chars: int = DEFAULT_CHUNK_CHARS,
) -> tuple[ParseResult, list[EntitySpec], list[StoredRef], list[tuple[str, str]]]:
    """Parse one file's text into entity specs, references and parent->child pairs (pure);
    ids are keyed by `repo` and `path`. Plain text is cut into parts of about
    `plain_part_chars` characters (plaintext.part_chars of the chunking setting)."""
    from .documents import key_terms
    from .fenced import parse_code

    result = _parse(text, path, language, plain_part_chars)
    prose = language in ("markdown", *_PROSE)
    file_key = _key(path, repo)
    file_id = file_entity_id(path, repo)
    base: dict[str, Any] = {"path": path, "file_id": file_id}
    if repo:
        base["repo"] = repo
    if git_commit and not prose:
        base["git_commit"] = git_commit
    chunk_type = "section" if prose or language == "unknown" else "code"
    specs = specs_from_result(
        result,
        key=file_key,
        source_text=text,
        base_properties=base,
        skip_kinds=("code_block",),
        clean=prose,
        chunk_type=chunk_type,
    )
    if language in _PROSE and specs:
        specs.insert(0, _text_document_spec(text, path, file_key, base))
    for i, spec in enumerate(specs):
        if spec.type == "document":
            terms = key_terms(text, 10)
            headings = [s.properties.get("heading") for s in specs if s.type == "section"]
            outline = "; ".join(str(h) for h in headings if h)[:800]
            title = spec.properties.get("title") or spec.name
            summary = f"{title}\nKey terms: {', '.join(terms)}\nSections: {outline}".strip()
            props = {**spec.properties, "key_terms": terms, "source_path": path}
            specs[i] = replace(spec, text=summary, properties=props)
    by_qualname = {s.qualname: s for s in specs}
    # Typed units inside a document's code blocks (a CREATE TABLE in a design note).
    for unit in result.units_of("code_block"):
        block = parse_code(unit.text, unit.language if unit.language != "text" else None)
        if block.fallback or block.parser == "plain_text":
            continue
        key = f"{file_key}#{unit.qualname}"
        extra = specs_from_result(
            block,
            key=key,
            source_text=unit.text,
            base_properties={**base, "in_document": True},
            line_offset=unit.start_line,
            skip_kinds=("module", "document", "section", "text_chunk"),
        )
        specs.extend(extra)
    root = next((s for s in specs if s.parent_qualname is None), None)
    refs: list[StoredRef] = []
    folder = posixpath.dirname(path)
    for ref in result.references:
        owner = by_qualname.get(ref.from_qualname) or root
        if owner is None:
            continue
        refs.append(StoredRef(owner.id, owner.type, ref.kind, ref.target, ref.confidence, folder))
    for spec in specs:
        if spec.properties.get("in_document"):
            for kind, key in (("tables_read", "reads_table"), ("tables_written", "writes_table")):
                for table in spec.properties.get(kind, []) or []:
                    refs.append(StoredRef(spec.id, spec.type, key, str(table), 1.0))
    contains: list[tuple[str, str]] = []
    for spec in specs:
        parent = by_qualname.get(spec.parent_qualname or "")
        if parent is not None and parent.id != spec.id:
            contains.append((parent.id, spec.id))
        elif spec.parent_qualname is None or parent is None:
            contains.append((file_id, spec.id))
    return result, specs, refs, contains


def _text_document_spec(text: str, path: str, key: str, base: dict[str, Any]) -> EntitySpec:
    from .documents import detect_version
    from .entities import unit_entity_id

    first = next((line.strip() for line in text.splitlines() if line.strip()), path)
    title = first[:120]
    props = {
        **base,
        "kind": "document",
        "symbol": "document",
        "title": title,
        "version": detect_version(title, text),
        "line_start": 1,
        "line_end": max(len(text.splitlines()), 1),
        "parser": "plain_text",
    }
    return EntitySpec(
        id=unit_entity_id("document", key, "document"),
        type="document",
        name=title,
        text="",
        qualname="document",
        kind="document",
        properties=props,
    )
