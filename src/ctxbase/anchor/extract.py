"""What a message says, found by rules (no model): pure functions over text.

- `statements`: requirement sentences ("我们需要/必须 ...", "we must/should/need to ...") and
  decisions ("决定/选用/采用 ...", "we decided / we'll go with / let's go with ...").
- `spec_references`: "符合/参考/按照/遵循 X 规范", "per / following / according to the X
  spec": the phrase naming a document, matched to known documents by `match_document`.
- `mentions`: file paths, table names, API routes and people (@handles) a text names. A
  table name is an identifier next to "table" / "表" or after a SQL keyword ("orders
  table", "表 orders", "join orders_v2"); a function word or SQL keyword standing there
  ("and table orders", "from table t", "create table") is none.

Each finding carries the rule that produced it and a confidence; anchoring turns them into
entities and edges with source `ctxbase:<rule>`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from ..retrieve.tokenize import index_terms

__all__ = [
    "Mention",
    "SpecReference",
    "Statement",
    "code_asked_for",
    "match_document",
    "mentions",
    "spec_references",
    "split_sentences",
    "statements",
]

_EN_SPLIT = re.compile(r"(?<=[a-z0-9)\]][.])\s+(?=[A-Z])")

# Requirement: a demand on the system, said in the first person plural or about the system.
_REQ_ZH = re.compile(r"(需要|必须|务必|应当|须要|得支持|要支持)")
_REQ_EN = re.compile(
    r"\b(?:we|the (?:system|service|api|endpoint|function|code|app|page|query|job)|it)\s+"
    r"(?:must|should|needs? to|have to|has to|is required to|are required to)\b"
    r"|^\s*(?:requirement|req)\s*[:：]",
    re.IGNORECASE,
)
_DEC_ZH = re.compile(r"(决定|选用|采用|就用|定为|敲定|拍板)")
_DEC_EN = re.compile(
    r"\b(?:we(?:'ve| have)? decided|we(?:'ll| will) go with|let'?s go with|we chose|"
    r"we(?:'re| are) going with)\b|^\s*decision\s*[:：]",
    re.IGNORECASE,
)
_SPEC_WORDS = "规范|标准|规定|文档|指南|手册|约定"
_SPEC_ZH = re.compile(
    rf"(?:符合|参考|参照|按照|遵循|遵守|依照|根据|依据|按)\s*(?:《)?\s*"
    rf"([^，,。；;！？!?\n《》]{{0,24}}?(?:{_SPEC_WORDS}))"
)
_SPEC_EN = re.compile(
    r"\b(?:per|following|according to|comply with|complies with|as (?:described|defined) in|"
    r"see|follow|follows)\s+(?:the\s+|our\s+)?"
    r"([\w .-]{1,40}?\s(?:spec|specification|guide|guidelines|standard|conventions?|doc))\b",
    re.IGNORECASE,
)
# Words every spec phrase has: they say "a document", not which one.
_GENERIC_TERMS = frozenset(
    {
        "公司",
        "我们",
        "团队",
        "规范",
        "标准",
        "规定",
        "文档",
        "指南",
        "手册",
        "约定",
        "spec",
        "specif",
        "specification",
        "guid",
        "guide",
        "guidelin",
        "standard",
        "convent",
        "convention",
        "doc",
        "compani",
        "company",
        "team",
        "our",
    }
)

_PATH = re.compile(
    r"(?<![\w/.@-])((?:[\w.-]+/)*[\w-][\w.-]*\.(?:py|pyi|sql|md|txt|rst|ts|tsx|js|jsx|go|"
    r"java|kt|rs|rb|php|c|h|cpp|hpp|cs|ya?ml|toml|json|ini|cfg|sh|csv|proto))(?![\w/])"
)
_IDENT = r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)?"
_TABLE_BEFORE = re.compile(
    rf"\b(?:from|join|into|update|table|tables)\s+(?:if\s+(?:not\s+)?exists\s+)?"
    rf"[`\"\[]?({_IDENT})[`\"\]]?",
    re.IGNORECASE,
)
# A name can only start where a run of identifier characters starts (after its leading
# digits) or after a dot in it: a later start in the run ends where the first one did and
# fails as it did. Without that a long run ("a" * 20_000, a hex dump) took quadratic time.
_TABLE_AFTER = re.compile(
    rf"[`\"]?(?<![A-Za-z0-9_])[0-9]*({_IDENT})[`\"]?\s*(?:表|数据表|\btable\b)", re.IGNORECASE
)
# "和表 orders": in Chinese prose an ASCII word right after 表 is the table's name
_TABLE_AFTER_ZH = re.compile(rf"(?:表|数据表)\s*[`\"]?({_IDENT})(?![A-Za-z0-9_.])[`\"]?")
_ROUTE = re.compile(
    r"(?:\b(GET|POST|PUT|PATCH|DELETE)\s+|(?<![\w/.:]))(/(?:api|v\d+)?[\w{}:.-]*(?:/[\w{}:.-]+)*)",
)
_PERSON = re.compile(r"(?<![\w.])@([A-Za-z][\w.-]{1,30}[A-Za-z0-9])")
# Words that stand next to "table" / "表" without naming one ("see x.py and table orders",
# "read from table t", "create table t"): function words and SQL keywords. Chinese ones
# ("和", "以及", "与") never match: a table name is an ASCII identifier.
_NOT_TABLES = frozenset(
    {
        # articles, determiners, pronouns
        *("the", "a", "an", "this", "that", "these", "those", "which", "what", "whose"),
        *("where", "when", "each", "every", "any", "some", "all", "both", "either", "neither"),
        *("another", "other", "such", "same", "its", "our", "your", "their", "his", "her"),
        *("one", "new", "they", "you"),
        # conjunctions
        *("and", "nor", "but", "yet", "plus", "then", "also", "than", "while", "whereas"),
        # prepositions
        *("from", "into", "onto", "with", "without", "within", "via", "per", "about", "over"),
        *("under", "after", "before", "between", "across", "through", "like", "against"),
        *("off", "out", "for"),
        # verbs seen before "table"
        *("are", "was", "were", "been", "has", "have", "had", "see", "use", "check", "read"),
        # SQL
        *("select", "set", "values", "create", "alter", "drop", "truncate", "rename", "lock"),
        *("temporary", "temp", "exists", "not", "join", "update", "delete", "insert"),
    }
)


@dataclass(frozen=True)
class Statement:
    """A requirement or a decision sentence."""

    kind: str  # "requirement" | "decision"
    text: str
    rule: str
    confidence: float


@dataclass(frozen=True)
class SpecReference:
    """A phrase naming a document the text says to follow."""

    phrase: str
    sentence: str
    rule: str
    confidence: float


@dataclass(frozen=True)
class Mention:
    """Something named in free text: kind is file, table, api or person."""

    kind: str
    value: str
    rule: str
    confidence: float


def split_sentences(text: str) -> list[str]:
    """Sentences of Chinese or English prose (stripped, empty ones dropped)."""
    out: list[str] = []
    for chunk in re.split(r"(?<=[。！？!?；;])|\n+", text):
        for part in _EN_SPLIT.split(chunk):
            part = part.strip()
            if part:
                out.append(part)
    return out


def statements(text: str) -> list[Statement]:
    """Requirement and decision sentences, in order (a sentence is one or the other)."""
    found: list[Statement] = []
    for sentence in split_sentences(text):
        if len(sentence) < 6 or sentence.endswith(("?", "？")):
            continue  # a question asks for something; it does not state it
        if _DEC_ZH.search(sentence) or _DEC_EN.search(sentence):
            found.append(Statement("decision", sentence, "decision", 0.75))
        elif _REQ_ZH.search(sentence) or _REQ_EN.search(sentence):
            found.append(Statement("requirement", sentence, "requirement", 0.8))
    return found


def spec_references(text: str) -> list[SpecReference]:
    """Phrases that name a document to follow ("符合公司 Redis 规范", "per the API spec")."""
    found: list[SpecReference] = []
    for sentence in split_sentences(text):
        for pattern, rule in ((_SPEC_ZH, "spec_reference"), (_SPEC_EN, "spec_reference")):
            for m in pattern.finditer(sentence):
                phrase = m.group(1).strip(" 《》\"'`")
                if phrase:
                    found.append(SpecReference(phrase, sentence, rule, 0.9))
    return found


# Code a sentence asks to change, or points back at: "修改 SQL", "改一下刚才的函数", "fix
# that query". Writing new code ("写一个接口") names no code that exists yet.
_SQL_NOUN = re.compile(r"sql|查询语句|\bquer(?:y|ies)\b", re.IGNORECASE)
_CODE_NOUN = re.compile(r"代码|函数|方法|脚本|\b(?:code|function|method|script)\b", re.IGNORECASE)
_CHANGE_OR_BACK = re.compile(
    r"改|修|调整|优化|重构|补上|加上|刚才|刚刚|上一个|上次|之前|前面|那个|那段|"
    r"\b(?:fix|change|update|modify|refactor|rewrite|adjust|previous|earlier|that|last)\b",
    re.IGNORECASE,
)


def code_asked_for(sentence: str) -> str | None:
    """The kind of existing code a sentence asks to change or points back at: "sql",
    "code", or None."""
    if not _CHANGE_OR_BACK.search(sentence):
        return None
    if _SQL_NOUN.search(sentence):
        return "sql"
    if _CODE_NOUN.search(sentence):
        return "code"
    return None


def _terms(text: str) -> set[str]:
    return {t for t in index_terms(text) if not t.isdigit()}


def match_document(
    phrase: str, titles: Mapping[str, str], *, min_score: float = 0.5
) -> tuple[str, float] | None:
    """The known document (id -> title) a spec phrase names best, with a confidence in
    [0.6, 0.9]: the share of the phrase's distinctive words the title has. Generic words
    (规范, spec, 公司) alone match nothing; ties are no match (the phrase is ambiguous)."""
    wanted = _terms(phrase) - _GENERIC_TERMS
    if not wanted:
        return None
    scored: list[tuple[float, str]] = []
    for doc_id, title in titles.items():
        share = len(wanted & _terms(title)) / len(wanted)
        if share >= min_score:
            scored.append((share, doc_id))
    if not scored:
        return None
    scored.sort(key=lambda s: (-s[0], s[1]))
    if len(scored) > 1 and scored[1][0] == scored[0][0]:
        return None
    return scored[0][1], round(0.6 + 0.3 * scored[0][0], 3)


def _add(out: dict[tuple[str, str], Mention], m: Mention) -> None:
    key = (m.kind, m.value.lower() if m.kind != "file" else m.value)
    if key not in out or out[key].confidence < m.confidence:
        out[key] = m


def mentions(text: str) -> list[Mention]:
    """Files, tables, API routes and people a text names, each once, in kind order."""
    out: dict[tuple[str, str], Mention] = {}
    for m in _PATH.finditer(text):
        value = m.group(1).removeprefix("./")
        if "/" in value or "_" in value or value.count(".") == 1:
            _add(out, Mention("file", value, "file_path", 0.9 if "/" in value else 0.8))
    for pattern in (_TABLE_BEFORE, _TABLE_AFTER, _TABLE_AFTER_ZH):
        for m in pattern.finditer(text):
            name = m.group(1)
            if name.lower() in _NOT_TABLES or len(name) < 3:
                continue
            # "from/table X" in prose: only an identifier-like X ("the table has" is not one)
            plain = not re.search(r"[_.\d]", name) and "`" not in m.group(0)
            if pattern is _TABLE_BEFORE and plain:
                continue
            if _PATH.fullmatch(name):
                continue
            _add(out, Mention("table", name.lower(), "table_name", 0.8))
    for m in _ROUTE.finditer(text):
        method, route = m.group(1), m.group(2).rstrip(".")
        if route.count("/") < 1 or len(route) < 3 or route.endswith("/"):
            continue
        versioned = route.startswith(("/api", "/v1", "/v2", "/v3"))
        if not method and not versioned and route.count("/") < 2 and "{" not in route:
            continue  # a lone "/orders" in prose is too often something else
        value = f"{method} {route}" if method else route
        _add(out, Mention("api", value, "api_route", 0.85 if method else 0.7))
    for m in _PERSON.finditer(text):
        _add(out, Mention("person", m.group(1), "person_handle", 0.7))
    order = {"file": 0, "table": 1, "api": 2, "person": 3}
    return sorted(out.values(), key=lambda m: (order[m.kind], m.value))
