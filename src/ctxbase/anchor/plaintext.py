"""Plain-text chunking: the last resort of every parser, so nothing is ever lost.

Chunks follow blank-line paragraphs and never split a line unless a single line is longer
than the chunk limit; that keeps line numbers exact for the chunks' anchors. These parts are
entities (sections of the file's document); the search units are cut from each part by the
chunking setting, so an ingest sizes the parts by that setting too (`part_chars`): 1,500
characters for the default 256-token chunks, in proportion for others, so that a coarser
setting is not capped by parts smaller than its chunks and a finer one gets smaller parts.
"""

from __future__ import annotations

from .parsed import ParsedUnit, ParseResult

__all__ = ["DEFAULT_CHUNK_CHARS", "chunk_text", "part_chars", "plain_text_result"]

DEFAULT_CHUNK_CHARS = 1500
# The chunk size (tokens) DEFAULT_CHUNK_CHARS goes with: the default chunking setting's.
_DEFAULT_CHUNK_TOKENS = 256


def part_chars(max_tokens: int) -> int:
    """The size of plain-text parts for search units of at most `max_tokens` tokens: 1,500
    characters for the default 256, in proportion otherwise (750 for 128, 3,000 for 512)."""
    return max(1, round(DEFAULT_CHUNK_CHARS * max_tokens / _DEFAULT_CHUNK_TOKENS))


def chunk_text(
    text: str, language: str = "text", max_chars: int = DEFAULT_CHUNK_CHARS
) -> tuple[ParsedUnit, ...]:
    """Split text into `text_chunk` units of at most about `max_chars` characters."""
    if max_chars < 1:
        raise ValueError(f"max_chars must be positive (got {max_chars})")
    pieces: list[tuple[int, int, str]] = []  # (start_line, end_line, text)
    current: list[tuple[int, str]] = []  # (line number, line)
    current_size = 0

    def flush() -> None:
        nonlocal current, current_size
        kept = [number for number, line in current if line.strip()]
        if kept:
            first, last = kept[0], kept[-1]
            body = "\n".join(line for number, line in current if first <= number <= last)
            pieces.append((first, last, body))
        current = []
        current_size = 0

    for number, line in enumerate(text.splitlines(), start=1):
        if len(line) > max_chars:
            # One huge line (minified code, a pasted blob): cut it on its own.
            flush()
            for offset in range(0, len(line), max_chars):
                pieces.append((number, number, line[offset : offset + max_chars]))
            continue
        # Prefer to end a chunk at a paragraph break once it is half full.
        paragraph_break = not line.strip() and current_size >= max_chars // 2
        if current and (current_size + len(line) + 1 > max_chars or paragraph_break):
            flush()
        current.append((number, line))
        current_size += len(line) + 1
    flush()

    return tuple(
        ParsedUnit(
            kind="text_chunk",
            name=f"chunk {index}",
            qualname=f"chunk_{index}",
            language=language,
            text=body,
            start_line=start,
            end_line=end,
        )
        for index, (start, end, body) in enumerate(pieces, start=1)
    )


def plain_text_result(
    text: str,
    path: str | None,
    language: str,
    warnings: tuple[str, ...] = (),
    max_chars: int = DEFAULT_CHUNK_CHARS,
) -> ParseResult:
    """A fallback result: the text as plain chunks, with the reasons in `warnings`."""
    return ParseResult(
        path=path,
        language=language,
        units=chunk_text(text, language=language, max_chars=max_chars),
        references=(),
        warnings=warnings,
        fallback=True,
        parser="plain_text",
    )
