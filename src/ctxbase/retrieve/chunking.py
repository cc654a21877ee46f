"""Chunk long text (documents, tool output) into token-sized, overlapping pieces.

Chunks are spans of the original text: ``text[chunk.start:chunk.end] == chunk.text``, so a
retrieved chunk can always be traced back to where it came from. Boundaries follow the
text's structure:

* A Markdown ATX heading (``## Cache``) starts a new chunk, and every chunk carries the path
  of headings it sits under (``("Design", "Cache")``). Headings inside fenced code blocks
  are code, not headings. A heading directly followed by a sub-heading shares its chunk, and
  so does a lone title line before the first heading (an entity's "path > name" label): no
  chunk holds only a title.
* Chunks are packed from sentences (split after ``. ! ?`` plus whitespace, after
  ``。！？；`` and at newlines); when a chunk is full, it preferably ends at a paragraph
  break (blank line), as long as that keeps it at least half full.
* Consecutive chunks of one section overlap by up to ``overlap_tokens`` tokens of whole
  sentences, so a chunk never starts mid-sentence unless a single sentence is longer than
  ``max_tokens``; such a sentence is hard-split, at whitespace where possible.

Every chunk has at most ``max_tokens`` tokens by the given counter, and every
non-whitespace character of the text lies in at least one chunk.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic import ValidationError as PydanticValidationError

from ctxbase.assemble.tokens import get_token_counter

__all__ = [
    "CHUNKING_PRESETS",
    "DEFAULT_CHUNKING",
    "Chunk",
    "ChunkingConfig",
    "CountTokens",
    "chunk_text",
    "resolve_chunking",
]

# Counts the tokens of a text, e.g. ``get_token_counter().count``.
CountTokens = Callable[[str], int]


class ChunkingConfig(BaseModel):
    """How large chunks are and whether Markdown headings force chunk boundaries."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # At least 16 so that any single character (at most 4 byte-level BPE tokens) fits.
    max_tokens: int = Field(default=256, ge=16)
    overlap_tokens: int = Field(default=64, ge=0)
    respect_headings: bool = True

    @model_validator(mode="after")
    def _overlap_below_max(self) -> ChunkingConfig:
        if self.overlap_tokens >= self.max_tokens:
            raise ValueError(
                f"overlap_tokens ({self.overlap_tokens}) must be smaller than max_tokens "
                f"({self.max_tokens})"
            )
        return self


DEFAULT_CHUNKING = ChunkingConfig()

CHUNKING_PRESETS: Mapping[str, ChunkingConfig] = MappingProxyType(
    {
        "default": DEFAULT_CHUNKING,
        # Precise hits for short questions; more chunks to embed.
        "fine": ChunkingConfig(max_tokens=128, overlap_tokens=32),
        # Fewer, more self-contained chunks for long documents.
        "coarse": ChunkingConfig(max_tokens=512, overlap_tokens=128),
    }
)


def resolve_chunking(
    spec: str | ChunkingConfig | Mapping[str, object] | None = None,
    *,
    max_tokens: int | None = None,
    overlap_tokens: int | None = None,
    names: Mapping[str, str] | None = None,
) -> ChunkingConfig:
    """The chunking a setting names: a preset name (``"fine"``), a config, or some of a
    config's fields as a mapping (from JSON), with `max_tokens` / `overlap_tokens` on top.

    A bad value raises ValidationError naming the setting as `names` spells it (keys
    ``preset``, ``max_tokens``, ``overlap_tokens``; e.g. ``{"max_tokens": "--chunk-tokens"}``).
    """
    from ..errors import ValidationError

    label = {
        "preset": "chunking",
        "max_tokens": "chunking.max_tokens",
        "overlap_tokens": "chunking.overlap_tokens",
        **(names or {}),
    }
    fields: dict[str, object]
    if spec is None:
        fields = DEFAULT_CHUNKING.model_dump()
    elif isinstance(spec, ChunkingConfig):
        fields = spec.model_dump()
    elif isinstance(spec, str):
        preset = CHUNKING_PRESETS.get(spec.strip().lower())
        if preset is None:
            choices = ", ".join(CHUNKING_PRESETS)
            message = f"unknown chunking preset {spec!r}; choose one of {choices}"
            raise ValidationError(label["preset"], message)
        fields = preset.model_dump()
    elif isinstance(spec, Mapping):  # the fields it names, the defaults' for the rest
        fields = {**DEFAULT_CHUNKING.model_dump(), **spec}
    else:
        kind = type(spec).__name__
        message = f"a preset name ({', '.join(CHUNKING_PRESETS)}) or a ChunkingConfig, not {kind}"
        raise ValidationError(label["preset"], message)
    if max_tokens is not None:
        fields["max_tokens"] = max_tokens
    if overlap_tokens is not None:
        fields["overlap_tokens"] = overlap_tokens
    try:
        return ChunkingConfig.model_validate(fields)
    except PydanticValidationError as exc:
        err = exc.errors()[0]
    where = str(err["loc"][0]) if err["loc"] else ""
    message = str(err["msg"]).removeprefix("Value error, ")
    if where == "max_tokens" and err["type"] == "greater_than_equal":
        message = "must be at least 16 tokens, enough for any one character"
    elif where == "overlap_tokens" and err["type"] == "greater_than_equal":
        message = "must be 0 (no overlap) or more"
    if where in ("max_tokens", "overlap_tokens"):
        raise ValidationError(label[where], f"{message} (got {err.get('input')!r})")
    if not where:  # the two together: an overlap as large as the chunk never moves on
        size, overlap = fields.get("max_tokens"), fields.get("overlap_tokens")
        bound = label["max_tokens"]
        message = f"must be smaller than {bound} (got {overlap} with {bound} {size})"
        raise ValidationError(label["overlap_tokens"], message)
    raise ValidationError(f"{label['preset']}.{where}", message)


@dataclass(frozen=True, slots=True)
class Chunk:
    """One chunk: ``text == original[start:end]``, under headings ``heading_path``."""

    text: str
    start: int
    end: int
    heading_path: tuple[str, ...]
    index: int


@dataclass(frozen=True, slots=True)
class _Segment:
    """An indivisible unit for packing: a sentence, a line, a heading or a hard-split piece."""

    start: int
    end: int
    section: int
    heading_path: tuple[str, ...]
    paragraph_start: bool
    is_heading: bool


_HEADING = re.compile(r" {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*")
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
# A sentence ends after CJK terminators, or after . ! ? followed by whitespace / line end;
# closing quotes and brackets stay with their sentence.
_SENTENCE_END = re.compile(r"(?:[。！？；]+|[!?]+|\.+(?=[\"'”’)\]]*(?:\s|$)))[\"'”’」』）)\]]*")


def _trimmed(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def _sentence_spans(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """Whitespace-trimmed sentence spans of ``text[start:end]`` (one line)."""
    spans: list[tuple[int, int]] = []
    piece_start = start
    for match in _SENTENCE_END.finditer(text, start, end):
        spans.append(_trimmed(text, piece_start, match.end()))
        piece_start = match.end()
    spans.append(_trimmed(text, piece_start, end))
    return [(s, e) for s, e in spans if e > s]


def _segments(text: str, respect_headings: bool) -> list[_Segment]:
    """Split text into sentence/line/heading segments with their section and heading path."""
    segments: list[_Segment] = []
    headings: list[tuple[int, str]] = []
    section = 0
    paragraph_pending = True
    fence: str | None = None
    offset = 0
    for line in text.splitlines(keepends=True):
        line_start, offset = offset, offset + len(line)
        body = line.rstrip("\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")
        if not body.strip():
            paragraph_pending = True
            continue
        fence_match = _FENCE.match(body)
        if fence_match is not None:
            marker = fence_match.group(1)
            if fence is None:
                fence = marker[0] * 3
            elif marker.startswith(fence):
                fence = None
        heading = _HEADING.fullmatch(body) if fence is None and fence_match is None else None
        if heading is not None and heading.group(2).strip():
            level = len(heading.group(1))
            while headings and headings[-1][0] >= level:
                headings.pop()
            headings.append((level, heading.group(2).strip()))
            section += 1
            start, end = _trimmed(text, line_start, line_start + len(body))
            path = tuple(title for _, title in headings)
            segments.append(_Segment(start, end, section, path, True, True))
            paragraph_pending = True
            continue
        path = tuple(title for _, title in headings)
        for start, end in _sentence_spans(text, line_start, line_start + len(body)):
            segments.append(_Segment(start, end, section, path, paragraph_pending, False))
            paragraph_pending = False
    if len(segments) > 1 and segments[0].section == 0 and segments[1].section != 0:
        # One line before the first heading is a title: it shares the next chunk, as a
        # heading does (a chunk of the label alone would be a search unit saying nothing).
        first = segments[0]
        segments[0] = _Segment(first.start, first.end, 0, first.heading_path, True, True)
    if not respect_headings:
        # Sections still give heading paths, but no longer force chunk boundaries.
        segments = [
            _Segment(s.start, s.end, 0, s.heading_path, s.paragraph_start, s.is_heading)
            for s in segments
        ]
    return segments


def _longest_fitting_end(
    text: str, start: int, end: int, max_tokens: int, count: CountTokens
) -> int:
    """Largest ``cut`` in (start, end) with ``count(text[start:cut]) <= max_tokens``.

    Assumes ``text[start:end]`` does not fit. Probes a window that doubles (so huge lines
    are never counted whole), then binary-searches inside it.
    """
    fits = start + 1
    probe = min(end, start + max_tokens * 8)
    while probe < end and count(text[start:probe]) <= max_tokens:
        fits = probe
        probe = min(end, start + (probe - start) * 2)
    low, high = fits, probe  # text[start:low] fits (or is one character), [start:high] not
    while high - low > 1:
        middle = (low + high) // 2
        if count(text[start:middle]) <= max_tokens:
            low = middle
        else:
            high = middle
    return low


def _too_long(
    text: str, start: int, end: int, max_tokens: int, max_token_bytes: int | None
) -> bool:
    """True when ``text[start:end]`` has more than ``max_tokens`` tokens by its size alone:
    no token covers more than ``max_token_bytes`` UTF-8 bytes, nor a character less than
    one. Counting a long remainder again for every piece cut from it was quadratic."""
    if max_token_bytes is None:
        return False
    limit = max_tokens * max_token_bytes
    if end - start > limit:
        return True
    return len(text[start:end].encode("utf-8", "surrogatepass")) > limit


def _hard_split(
    text: str,
    start: int,
    end: int,
    max_tokens: int,
    count: CountTokens,
    max_token_bytes: int | None = None,
) -> list[tuple[int, int]]:
    """Split one over-long span into pieces that fit, cutting at whitespace if possible."""
    pieces: list[tuple[int, int]] = []
    start, end = _trimmed(text, start, end)
    while start < end:
        if not _too_long(text, start, end, max_tokens, max_token_bytes) and (
            count(text[start:end]) <= max_tokens
        ):
            pieces.append((start, end))
            break
        cut = _longest_fitting_end(text, start, end, max_tokens, count)
        # Prefer the last whitespace in the final quarter of the piece.
        floor = start + (cut - start) * 3 // 4
        space = max(text.rfind(" ", floor, cut), text.rfind("\n", floor, cut))
        if space > start and count(text[start:space]) <= max_tokens:
            cut = space
        piece_start, piece_end = _trimmed(text, start, cut)
        if piece_end > piece_start:
            pieces.append((piece_start, piece_end))
        start, end = _trimmed(text, cut, end)
    return pieces


def _fit_segments(
    text: str,
    segments: list[_Segment],
    max_tokens: int,
    count: CountTokens,
    max_token_bytes: int | None = None,
) -> list[_Segment]:
    """Replace every segment longer than ``max_tokens`` by hard-split pieces."""
    fitted: list[_Segment] = []
    for segment in segments:
        if count(text[segment.start : segment.end]) <= max_tokens:
            fitted.append(segment)
            continue
        pieces = _hard_split(text, segment.start, segment.end, max_tokens, count, max_token_bytes)
        for position, (start, end) in enumerate(pieces):
            fitted.append(
                _Segment(
                    start,
                    end,
                    segment.section,
                    segment.heading_path,
                    segment.paragraph_start and position == 0,
                    segment.is_heading,
                )
            )
    return fitted


def _overlap_start(
    text: str,
    segments: list[_Segment],
    previous_start: int,
    first_new: int,
    config: ChunkingConfig,
    count: CountTokens,
) -> int:
    """First segment of the next chunk: whole trailing sentences of the previous chunk."""
    if config.overlap_tokens == 0 or first_new == 0:
        return first_new
    section = segments[first_new].section
    overlap_end = segments[first_new - 1].end
    start = first_new
    candidate = first_new - 1
    # Never reach back to the previous chunk's own start: each chunk must move forward.
    while candidate > previous_start and segments[candidate].section == section:
        span = text[segments[candidate].start : overlap_end]
        if count(span) > config.overlap_tokens:
            break
        start = candidate
        candidate -= 1
    # The overlap must leave room for at least the first new segment.
    new_end = segments[first_new].end
    while start < first_new and count(text[segments[start].start : new_end]) > config.max_tokens:
        start += 1
    return start


def _paragraph_end(
    text: str,
    segments: list[_Segment],
    first: int,
    first_new: int,
    last: int,
    max_tokens: int,
    count: CountTokens,
) -> int:
    """Move a full chunk's end back to a paragraph break if it stays at least half full."""
    for candidate in range(last, first_new, -1):
        if not segments[candidate].paragraph_start:
            continue
        if count(text[segments[first].start : segments[candidate - 1].end]) >= max_tokens // 2:
            return candidate - 1
        break
    return last


def _chunk_heading_path(segments: list[_Segment], first: int, last: int) -> tuple[str, ...]:
    for segment in segments[first : last + 1]:
        if not segment.is_heading:
            return segment.heading_path
    return segments[last].heading_path


def chunk_text(
    text: str,
    config: ChunkingConfig = DEFAULT_CHUNKING,
    count_tokens: CountTokens | None = None,
    max_token_bytes: int | None = None,
) -> list[Chunk]:
    """Chunks of ``text``, in order, each within ``config.max_tokens`` tokens.

    ``count_tokens`` defaults to the best offline tokenizer (see
    :func:`ctxbase.assemble.tokens.get_token_counter`), and ``max_token_bytes`` to the most
    UTF-8 bytes one of its tokens covers: a span too long to fit by that bound alone is not
    counted (the chunks are the same, found without counting a long line's rest again for
    every piece cut from it). Whitespace-only text gives ``[]``.
    """
    count: CountTokens
    if count_tokens is None:
        counter = get_token_counter()
        count = counter.count
        if max_token_bytes is None:
            max_token_bytes = getattr(counter, "max_token_bytes", None)
    else:
        count = count_tokens
    segments = _fit_segments(
        text,
        _segments(text, config.respect_headings),
        config.max_tokens,
        count,
        max_token_bytes,
    )
    chunks: list[Chunk] = []
    first_new = 0
    previous_start = -1
    while first_new < len(segments):
        first = (
            _overlap_start(text, segments, previous_start, first_new, config, count)
            if chunks
            else first_new
        )
        last = first_new
        overflowed = False
        while last + 1 < len(segments):
            following = segments[last + 1]
            if following.section != segments[last].section and not all(
                segment.is_heading for segment in segments[first : last + 1]
            ):
                break
            if count(text[segments[first].start : following.end]) > config.max_tokens:
                overflowed = True
                break
            last += 1
        if overflowed:
            last = _paragraph_end(text, segments, first, first_new, last, config.max_tokens, count)
        start, end = segments[first].start, segments[last].end
        chunks.append(
            Chunk(
                text=text[start:end],
                start=start,
                end=end,
                heading_path=_chunk_heading_path(segments, first, last),
                index=len(chunks),
            )
        )
        previous_start = first
        first_new = last + 1
    return chunks
