"""Documents: clean extracted text, split Markdown by headings, find title, version, key terms.

Text extracted from PDFs and office files carries page furniture (headers, footers, page
numbers, a confidentiality notice on every page) and full-width characters; left in, they
pollute both keyword and vector retrieval, so `clean_text` removes them first. Markdown is
anchored as one `document` unit, one `section` unit per heading and one `code_block` unit per
fenced block, each section knowing its heading path.
"""

from __future__ import annotations

import importlib
import itertools
import logging
import math
import re
import threading
import unicodedata
from collections import Counter
from collections.abc import Mapping
from typing import Any

import yaml

from ..retrieve.tokenize import import_jieba
from .fenced import CodeBlock, extract_code_blocks
from .parsed import ParsedReference, ParsedUnit, ParseResult

__all__ = ["clean_text", "detect_version", "key_terms", "parse_markdown"]

# --- clean_text -------------------------------------------------------------------------

# Full-width punctuation that carries Chinese meaning and stays as it is.
_KEPT_FULL_WIDTH = frozenset("，！？：；（）")
_ZERO_WIDTH = dict.fromkeys(map(ord, "\u200b\u200c\u200d\u2060\ufeff\u00ad"))
_ODD_SPACES = re.compile(r"[\u00a0\u1680\u2000-\u200a\u202f\u205f\u3000\t\v]")
# Kana, CJK ideographs, CJK punctuation and the full-width punctuation kept above.
_CJK = (
    r"\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3000-\u303f"
    r"\uff01-\uff0f\uff1a-\uff1f"
)
_SPACE_BETWEEN_CJK = re.compile(rf"(?<=[{_CJK}])[ \t]+(?=[{_CJK}])")
_CHINESE_NUMBER = "0-9一二三四五六七八九十百千零〇两"
_PAGE_NUMBER_LINE = re.compile(
    r"^\s*(?:"
    r"(?:page|p\.|pg\.?)\s*\d+(?:\s*(?:of|/)\s*\d+)?"  # Page 3, Page 3 of 10
    rf"|第\s*[{_CHINESE_NUMBER}]+\s*页(?:\s*[,，/、]?\s*共\s*[{_CHINESE_NUMBER}]+\s*页)?"
    rf"|共\s*[{_CHINESE_NUMBER}]+\s*页\s*[,，/、]?\s*第\s*[{_CHINESE_NUMBER}]+\s*页"
    r"|[-–—]\s*\d+\s*[-–—]"  # - 3 -
    r"|\d+\s*/\s*\d+"  # 3 / 10
    r"|[-–—]?\s*\d+\s*页"  # 3 页
    r")\s*$",
    re.IGNORECASE,
)
_BARE_NUMBER_LINE = re.compile(r"^\s*\d{1,4}\s*$")
# Lines that are boilerplate wherever they repeat, even without page structure.
_BOILERPLATE_WORDS = re.compile(
    r"confidential|all rights reserved|copyright|do not distribute|internal use only|"
    r"保密|机密|秘密|版权所有|内部资料|内部使用|请勿外传|未经许可|严禁",
    re.IGNORECASE,
)
_EDGE_LINES = 2  # how many lines at the top and bottom of a page can be furniture
_MIN_BOILERPLATE_CHARS = 6


def clean_text(text: str) -> str:
    """Remove page furniture and repeated boilerplate, normalise characters and whitespace."""
    normalized = _normalize_characters(text)
    pages = _split_pages(normalized)
    furniture = _furniture_keys(pages)
    kept: list[str] = []
    seen_boilerplate: set[str] = set()
    repeated = _repeated_body_keys(pages, furniture)
    for page_number, page in enumerate(pages):
        if page_number:
            kept.append("")  # a page break is at least a paragraph break
        for line in page:
            key = _line_key(line)
            if key in furniture:
                continue
            if key in repeated:
                # Keep one copy of a repeated notice: it may still say something useful.
                if key in seen_boilerplate:
                    continue
                seen_boilerplate.add(key)
            kept.append(line)
    return _collapse_whitespace(kept)


def _normalize_characters(text: str) -> str:
    text = text.replace("\r\n", "\n").replace("\r", "\n").translate(_ZERO_WIDTH)
    # Spaces between Chinese characters are extraction artefacts, but a full-width space
    # (as in "第一章　总则") was typed on purpose: drop the former before converting the latter.
    text = _SPACE_BETWEEN_CJK.sub("", text)
    text = _ODD_SPACES.sub(" ", text)
    out: list[str] = []
    for char in text:
        code = ord(char)
        if 0xFF01 <= code <= 0xFF5E and char not in _KEPT_FULL_WIDTH:
            out.append(chr(code - 0xFEE0))  # full-width ASCII -> half width
        elif 0xFB00 <= code <= 0xFB06:
            out.append(unicodedata.normalize("NFKC", char))  # ligatures such as "fi"
        else:
            out.append(char)
    return "".join(out)


def _split_pages(text: str) -> list[list[str]]:
    """Pages by form feed, else by page-number lines; page-number lines are dropped."""
    if "\f" in text:
        pages = [page.split("\n") for page in text.split("\f")]
        return [_drop_page_numbers(page, bare_numbers_too=True) for page in pages]
    pages = [[]]
    for line in text.split("\n"):
        if _PAGE_NUMBER_LINE.match(line):
            pages.append([])
        else:
            pages[-1].append(line)
    return [page for page in pages if any(line.strip() for line in page)] or [[]]


def _drop_page_numbers(page: list[str], bare_numbers_too: bool) -> list[str]:
    edges = _edge_indexes(page)
    return [
        line
        for index, line in enumerate(page)
        if not _PAGE_NUMBER_LINE.match(line)
        and not (bare_numbers_too and index in edges and _BARE_NUMBER_LINE.match(line))
    ]


def _edge_indexes(page: list[str]) -> set[int]:
    """Indexes of the first and last few non-blank lines of a page."""
    filled = [index for index, line in enumerate(page) if line.strip()]
    return set(filled[:_EDGE_LINES] + filled[-_EDGE_LINES:])


def _line_key(line: str) -> str:
    """A line's identity for repetition: digits wildcarded, whitespace ignored, lowercased."""
    return re.sub(r"\d+", "#", re.sub(r"\s+", "", line)).lower()


def _furniture_keys(pages: list[list[str]]) -> set[str]:
    """Keys of lines at the top or bottom of at least half the pages (two at least)."""
    if len(pages) < 2:
        return set()
    counts: Counter[str] = Counter()
    for page in pages:
        keys = {_line_key(page[index]) for index in _edge_indexes(page)}
        counts.update(key for key in keys if key)
    needed = max(2, math.ceil(len(pages) / 2))
    return {key for key, count in counts.items() if count >= needed}


def _repeated_body_keys(pages: list[list[str]], furniture: set[str]) -> set[str]:
    """Keys of boilerplate lines repeated in the body: on most pages, or a known notice."""
    page_counts: Counter[str] = Counter()
    total_counts: Counter[str] = Counter()
    for page in pages:
        keys = [_line_key(line) for line in page if len(line.strip()) >= _MIN_BOILERPLATE_CHARS]
        total_counts.update(keys)
        page_counts.update(set(keys))
    repeated: set[str] = set()
    for key, count in total_counts.items():
        if key in furniture or count < 2:
            continue
        on_most_pages = len(pages) >= 3 and page_counts[key] >= math.ceil(len(pages) * 0.6)
        if on_most_pages or _BOILERPLATE_WORDS.search(key):
            repeated.add(key)
    return repeated


def _collapse_whitespace(lines: list[str]) -> str:
    out: list[str] = []
    for line in lines:
        indent = len(line) - len(line.lstrip(" "))
        body = re.sub(r" {2,}", " ", line.strip())
        if not body:
            if out and out[-1] != "":
                out.append("")
            continue
        out.append(" " * indent + body)
    while out and out[-1] == "":
        out.pop()
    return "\n".join(out)


# --- parse_markdown -----------------------------------------------------------------------

_ATX_HEADING = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_SETEXT_UNDERLINE = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_LINK = re.compile(
    r"!?\[(?P<label>[^\]\n]*)\]\((?P<target><[^>\n]+>|[^)\s]+)(?:\s+\"[^\"\n]*\")?\)"
)
_BARE_URL = re.compile(r"(?<![(<\w])https?://[^\s<>)\]]+")
_AUTOLINK = re.compile(r"<(https?://[^>\s]+)>")
# In a title, a version follows a version word ("版本 2", "version 1.2") or a V/v that starts
# a word ("V3.2", "Guide V2"; not "IPv6"); a bare number ("Python 3", "step 2") is none.
_VERSION_IN_TITLE = re.compile(
    r"(?:版本号?|version|ver\.?)\s*[:：]?\s*[vV]?\s*(\d+(?:\.\d+){0,3})|(?<![\w.])[vV]\.?\s?(\d+(?:\.\d+){0,3})\b",
    re.IGNORECASE,
)
_VERSION_IN_BODY = re.compile(
    r"^\s*(?:[-*]\s*)?(?:\*\*)?(?:版本号?|version|ver\.?)(?:\*\*)?\s*[:：]\s*(?:\*\*)?[vV]?\s*"
    r"(\d+(?:\.\d+){0,3})",
    re.IGNORECASE,
)
_VERSION_SCAN_LINES = 40


def detect_version(title: str | None, text: str) -> str | None:
    """A version such as `1.2` from a title (`Spec v1.2`, `版本 1.2`) or a `Version:` line."""
    if title:
        match = _VERSION_IN_TITLE.search(title)
        if match:
            return match.group(1) or match.group(2)
    for line in text.splitlines()[:_VERSION_SCAN_LINES]:
        match = _VERSION_IN_BODY.match(line)
        if match:
            return match.group(1)
    return None


def parse_markdown(text: str, path: str | None = None) -> ParseResult:
    """A document unit, heading-aware section units and code-block units; never raises."""
    warnings: list[str] = []
    lines = text.splitlines()
    front_matter, body_start = _front_matter(lines, warnings)
    blocks = [block for block in extract_code_blocks(text) if block.start_line > body_start]
    in_code = {number for block in blocks for number in range(block.start_line, block.end_line + 1)}
    headings = _headings(lines, body_start, in_code)

    # Scalars as written: YAML would read `version: 1.10` as the float 1.1.
    raw_front = _simple_key_values(lines[1 : body_start - 1]) if body_start else {}
    title = _text_value(raw_front.get("title") or front_matter.get("title")) or next(
        (heading for level, heading, _ in headings if level == 1), None
    )
    prose = "\n".join(line for number, line in enumerate(lines, 1) if number not in in_code)
    version = _text_value(raw_front.get("version")) or detect_version(title, prose)
    document_name = title or (_basename(path) if path else "document")

    units: list[ParsedUnit] = []
    references: list[ParsedReference] = []
    taken: set[str] = {"document"}
    units.append(
        ParsedUnit(
            kind="document",
            name=document_name,
            qualname="document",
            language="markdown",
            text=text,
            start_line=1,
            end_line=max(len(lines), 1),
            properties={
                "title": title,
                "version": version,
                "front_matter": _json_ready(front_matter),
                "heading_count": len(headings),
                "code_block_count": len(blocks),
            },
        )
    )

    # Flat sections: each runs from its heading to the next heading of any level.
    starts = [(number, level, heading) for level, heading, number in headings]
    if (not starts or starts[0][0] > body_start + 1) and _has_text(
        lines, body_start + 1, (starts[0][0] - 1) if starts else len(lines), in_code
    ):
        starts.insert(0, (body_start + 1, 0, ""))
    trail: list[tuple[int, str]] = []  # (level, heading) of the enclosing headings
    section_spans: list[tuple[int, int, str, tuple[str, ...]]] = []
    for position, (number, level, heading) in enumerate(starts):
        end = starts[position + 1][0] - 1 if position + 1 < len(starts) else len(lines)
        while trail and trail[-1][0] >= level > 0:
            trail.pop()
        if level:
            trail.append((level, heading))
        heading_path = tuple(item for _, item in trail)
        qualname = _unique_name(" > ".join(heading_path) or "(preamble)", taken)
        section_spans.append((number, end, qualname, heading_path))
        section_text = "\n".join(lines[number - 1 : end]).strip("\n")
        units.append(
            ParsedUnit(
                kind="section",
                name=heading or "(preamble)",
                qualname=qualname,
                language="markdown",
                text=section_text,
                start_line=number,
                end_line=end,
                parent="document",
                properties={"level": level, "heading": heading, "heading_path": heading_path},
            )
        )
        section_lines = [
            (line_number, lines[line_number - 1])
            for line_number in range(number, end + 1)
            if line_number not in in_code
        ]
        references.extend(_citations(qualname, section_lines))

    for index, block in enumerate(blocks, start=1):
        owner = next(
            (span for span in section_spans if span[0] <= block.start_line <= span[1]), None
        )
        units.append(_code_block_unit(block, index, owner[2] if owner else "document", owner))
    return ParseResult(
        path=path,
        language="markdown",
        units=tuple(units),
        references=tuple(references),
        warnings=tuple(warnings),
        fallback=False,
        parser="markdown",
        properties={"title": title, "version": version},
    )


def _front_matter(lines: list[str], warnings: list[str]) -> tuple[dict[str, Any], int]:
    """YAML front matter between `---` lines at the very top, and the line it ends on."""
    if not lines or lines[0].strip() != "---":
        return {}, 0
    for index in range(1, len(lines)):
        if lines[index].strip() in ("---", "..."):
            raw = "\n".join(lines[1:index])
            try:
                loaded = yaml.safe_load(raw) if raw.strip() else {}
            except yaml.YAMLError as error:
                warnings.append(f"front matter is not valid YAML: {str(error).splitlines()[0]}")
                loaded = _simple_key_values(lines[1:index])
            if not isinstance(loaded, dict):
                warnings.append("front matter is not a mapping; ignored")
                loaded = {}
            return {str(key): value for key, value in loaded.items()}, index + 1
    return {}, 0


def _simple_key_values(lines: list[str]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for line in lines:
        key, separator, value = line.partition(":")
        if separator and key.strip() and not key.startswith((" ", "\t", "-")):
            values[key.strip()] = value.strip().strip("'\"")
    return values


def _headings(lines: list[str], body_start: int, in_code: set[int]) -> list[tuple[int, str, int]]:
    """(level, heading text, line number) of ATX and setext headings outside code."""
    found: list[tuple[int, str, int]] = []
    for index in range(body_start, len(lines)):
        number = index + 1
        if number in in_code:
            continue
        line = lines[index]
        atx = _ATX_HEADING.match(line)
        if atx:
            found.append((len(atx.group(1)), _inline_text(atx.group(2) or ""), number))
            continue
        underline = (
            _SETEXT_UNDERLINE.match(lines[index + 1])
            if index + 1 < len(lines) and number + 1 not in in_code
            else None
        )
        if (
            underline
            and line.strip()
            and not line.startswith(("    ", "\t"))
            and not re.match(r"^\s*(?:[-*+>]|\d+[.)])\s", line)
            and (index == body_start or not lines[index - 1].strip())
        ):
            level = 1 if underline.group(1).startswith("=") else 2
            found.append((level, _inline_text(line.strip()), number))
    return found


def _inline_text(heading: str) -> str:
    """Heading text without emphasis markers and with link labels instead of links."""
    text = _LINK.sub(lambda match: match["label"], heading)
    return re.sub(r"[*_`]+", "", text).strip()


def _citations(from_qualname: str, numbered_lines: list[tuple[int, str]]) -> list[ParsedReference]:
    references: list[ParsedReference] = []
    seen: set[str] = set()
    for number, line in numbered_lines:
        targets = [(match["target"].strip("<>"), match["label"]) for match in _LINK.finditer(line)]
        targets += [(match.group(1), "") for match in _AUTOLINK.finditer(line)]
        stripped = _AUTOLINK.sub("", _LINK.sub("", line))
        targets += [
            (match.group(0).rstrip(".,;:!?，。；："), "") for match in _BARE_URL.finditer(stripped)
        ]
        for target, label in targets:
            if not target or target.startswith("#") or target in seen:
                continue
            seen.add(target)
            references.append(
                ParsedReference(
                    from_qualname=from_qualname,
                    kind="cites",
                    target=target,
                    line=number,
                    properties={"label": label},
                )
            )
    return references


def _code_block_unit(
    block: CodeBlock,
    index: int,
    parent: str,
    owner: tuple[int, int, str, tuple[str, ...]] | None,
) -> ParsedUnit:
    return ParsedUnit(
        kind="code_block",
        name=f"{block.language} block {index}",
        qualname=f"code_block_{index}",
        language=block.language,
        text=block.code,
        start_line=block.start_line,
        end_line=block.end_line,
        parent=parent,
        properties={
            "info": block.info,
            "tagged": block.tagged,
            "closed": block.closed,
            "heading_path": owner[3] if owner else (),
        },
    )


def _has_text(lines: list[str], first: int, last: int, in_code: set[int]) -> bool:
    return any(lines[number - 1].strip() or number in in_code for number in range(first, last + 1))


def _unique_name(name: str, taken: set[str]) -> str:
    candidate = name
    suffix = 2
    while candidate in taken:
        candidate = f"{name} ({suffix})"
        suffix += 1
    taken.add(candidate)
    return candidate


def _basename(path: str) -> str:
    return path.replace("\\", "/").rsplit("/", 1)[-1]


def _text_value(value: Any) -> str | None:
    if value is None or isinstance(value, Mapping | list):
        return None
    text = str(value).strip()
    return text or None


def _json_ready(value: Any) -> Any:
    """Front matter as JSON-ready values: dates and other objects become strings."""
    if isinstance(value, Mapping):
        return {str(key): _json_ready(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_json_ready(item) for item in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


# --- key_terms ----------------------------------------------------------------------------

_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")
_ENGLISH_WORD = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:[_\-'][A-Za-z0-9]+)*")
# Part-of-speech tags kept for Chinese terms: nouns, names, verbal nouns and English words.
_TERM_POS = ("n", "nr", "ns", "nt", "nz", "nw", "vn", "eng", "an", "l", "j", "i")
_ENGLISH_STOP_WORDS = frozenset(
    str.split(
        """a about above after again against all also am an and any are as at be because been
    before being below between both but by can could did do does doing down during each few
    for from further get got had has have having he her here hers herself him himself his how
    i if in into is it its itself just let like made make many may me might more most much
    must my myself no nor not now of off on once one only or other our ours ourselves out
    over own per same shall she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up upon us use
    used uses using very via was we were what when where which while who whom why will with
    within without would yet you your yours yourself yourselves new first two three see
    e.g i.e etc"""
    )
)

_jieba_lock = threading.Lock()
_jieba_extractor: Any = None


def _extractor() -> Any:
    """A TF-IDF extractor on a private jieba tokenizer, built on first use (it takes ~1 s)."""
    global _jieba_extractor
    with _jieba_lock:
        if _jieba_extractor is None:
            jieba = import_jieba()  # first: without pkg_resources
            analyse = importlib.import_module("jieba.analyse")
            posseg = importlib.import_module("jieba.posseg")

            logging.getLogger("jieba").setLevel(logging.WARNING)
            tokenizer = jieba.Tokenizer()
            extractor = analyse.TFIDF()
            extractor.tokenizer = tokenizer
            extractor.postokenizer = posseg.POSTokenizer(tokenizer)
            _jieba_extractor = extractor
        return _jieba_extractor


def key_terms(text: str, k: int = 10) -> list[str]:
    """The `k` most characteristic terms of a Chinese, English or mixed text, best first."""
    if k <= 0 or not text.strip():
        return []
    if _HAN.search(text):
        return _chinese_terms(text, k)
    return _english_terms(text, k)


def _chinese_terms(text: str, k: int) -> list[str]:
    extractor = _extractor()
    pairs = extractor.extract_tags(text, topK=k * 3, withWeight=True, allowPOS=_TERM_POS)
    terms: list[str] = []
    for word, _weight in pairs:
        term = str(word).strip()
        if (
            len(term) < 2
            or term.lower() in _ENGLISH_STOP_WORDS
            or term.replace(".", "").isdigit()
            or term in terms
        ):
            continue
        terms.append(term)
        if len(terms) == k:
            break
    return terms


def _english_terms(text: str, k: int) -> list[str]:
    """TF-IDF-ish without a corpus: frequent, long, non-stop-word terms and repeated pairs."""
    words = [match.group(0) for match in _ENGLISH_WORD.finditer(text)]
    lowered = [word.lower() for word in words]
    counts: Counter[str] = Counter()
    display: dict[str, str] = {}
    for word, lower in zip(words, lowered, strict=True):
        if lower in _ENGLISH_STOP_WORDS or len(lower) < 3 or lower.isdigit():
            continue
        counts[lower] += 1
        # Show identifiers and acronyms as written; ordinary words lowercased.
        if word.isupper() or "_" in word or any(char.isupper() for char in word[1:]):
            display.setdefault(lower, word)
    scores: dict[str, float] = {}
    for term, count in counts.items():
        # Longer words are rarer in general English: a stand-in for inverse document frequency.
        rarity = 1.0 + min(len(term), 12) / 6.0
        identifier_bonus = 1.5 if term in display else 1.0
        scores[term] = (1.0 + math.log(count)) * rarity * identifier_bonus
    pair_counts: Counter[str] = Counter(
        f"{first} {second}"
        for first, second in itertools.pairwise(lowered)
        if first in counts and second in counts
    )
    for pair, count in pair_counts.items():
        if count >= 2:
            first, second = pair.split(" ")
            scores[pair] = max(scores[first], scores[second]) * (1.0 + 0.25 * count)
    ranked = sorted(scores, key=lambda term: (-scores[term], term))
    chosen: list[str] = []
    for term in ranked:
        parts = term.split(" ")
        if len(parts) == 1 and any(term in other.split(" ") for other in chosen):
            continue  # already covered by a chosen phrase
        chosen.append(" ".join(display.get(part, part) for part in parts))
        if len(chosen) == k:
            break
    return chosen
