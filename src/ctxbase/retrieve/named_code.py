"""The names of code a query actually says: identifiers, file names, table names.

"the function", "that table", "这个函数", "那张表" name a kind, not a thing: every function
is "the function". Selecting code by such a word brings every entity of that kind, so only
the names a query carries may select code entities (assemble/strategies.py:
referenced_code_first's "code the intent names itself"):

- a word in backticks: `orders`, `render`;
- a file name or path with a known extension: billing.py, src/app/cart.ts;
- a distinctive identifier: snake_case, CamelCase, dotted (billing.compute_discount), with
  digits (v2_orders), or called (render());
- a plain word next to a kind word that says what it is: "table orders", "the orders
  table", "orders 表", "表 orders", "function render", "FROM orders".

Kind words, articles and demonstratives ("function", "table", "the", "that") are never
names, whatever language they come in: Chinese text around a name does not matter (names
are ASCII words), and a query in Chinese with no ASCII name names no code. Pure functions.
"""

from __future__ import annotations

import re

__all__ = ["KIND_WORDS", "code_names", "names_code"]

# Words that say what kind of thing is meant; never a name of one.
KIND_WORDS = frozenset(
    {
        "api", "apis", "class", "classes", "code", "def", "endpoint", "endpoints", "file",
        "files", "func", "function", "functions", "handler", "handlers", "method", "methods",
        "module", "modules", "procedure", "query", "queries", "script", "scripts", "snippet",
        "snippets", "sql", "statement", "table", "tables", "test", "tests", "view", "views",
    }
)  # fmt: skip
# Words that can stand next to a kind word without naming anything ("the function is slow",
# "that table has", "function that returns").
_COMMON = frozenset(
    {
        "a", "all", "an", "and", "any", "are", "as", "at", "be", "but", "by", "can", "could",
        "did", "do", "does", "each", "every", "for", "from", "has", "have", "here", "i", "in",
        "into", "is", "it", "its", "just", "last", "latest", "my", "new", "no", "not", "now",
        "of", "old", "on", "one", "or", "our", "previous", "same", "should", "so", "some",
        "that", "the", "their", "them", "then", "there", "these", "this", "those", "to",
        "was", "we", "were", "what", "when", "which", "who", "why", "will", "with", "would",
        "you", "your", "where", "how", "again", "still", "above", "below", "first", "second",
        "other", "another", "main", "returns", "fails", "failed", "works", "called", "runs",
        "slow", "fast", "broken", "wrong", "right", "set", "select", "update", "join",
    }
)  # fmt: skip
_ABBREVIATIONS = frozenset({"e.g", "i.e", "etc.", "vs."})
_BACKTICKED = re.compile(r"`([^`\n]{1,80})`")
_PATH = re.compile(
    r"(?<![\w/.-])((?:[\w.-]+/)*[\w-][\w.-]*\.(?:py|pyi|sql|md|txt|rst|ts|tsx|js|jsx|go|java|"
    r"rs|rb|php|c|h|cc|cpp|hpp|cs|kt|swift|vue|sh|ya?ml|toml|json|ini|cfg))(?![\w/])"
)
_IDENT = re.compile(
    r"(?<![A-Za-z0-9_.$])([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)(\s*\(\s*\))?"
    r"(?![A-Za-z0-9_])"
)
# A plain word a kind word says is a name: after "table", "function", "FROM" ...; before
# "table" or "表" ("the orders table", "orders 表").
_AFTER_KIND = re.compile(
    r"(?<![A-Za-z0-9_])(?:(?i:tables?|functions?|func|def|class|methods?|modules?|views?)"
    r"|FROM|JOIN|INTO|UPDATE)\s+([A-Za-z_][A-Za-z0-9_.]*)"
    r"|(?:表|函数|方法|类)\s*([A-Za-z_][A-Za-z0-9_.]*)"
)  # SQL keywords in capitals only: "data from yesterday" names nothing
_BEFORE_KIND = re.compile(
    r"(?<![A-Za-z0-9_.])([A-Za-z_][A-Za-z0-9_.]*)\s*(?:(?:tables?|functions?|methods?|class"
    r"|module)(?![A-Za-z0-9_])|表|函数|方法|类)",
    re.IGNORECASE,
)


def _distinctive(word: str) -> bool:
    """An identifier that names one thing: snake_case, CamelCase, dotted, digits."""
    core = word.strip("_")
    if len(core) < 3:
        return False
    if "_" in core or ("." in core and core.casefold() not in _ABBREVIATIONS):
        return True
    inner_upper = any(c.isupper() for c in core[1:])
    return (inner_upper and any(c.islower() for c in core)) or any(c.isdigit() for c in core)


def _plain(word: str) -> bool:
    """A word that may be a name where a kind word says it is one."""
    return len(word) >= 2 and word.casefold() not in KIND_WORDS | _COMMON


def code_names(query: str) -> tuple[str, ...]:
    """The names of code, files and tables `query` says, in order of appearance, each
    once; none when it only names kinds ("the function", "这个函数")."""
    found: list[tuple[int, str]] = []
    for m in _BACKTICKED.finditer(query):
        name = m.group(1).strip().rstrip("()").strip()
        if name and name.casefold() not in KIND_WORDS:
            found.append((m.start(), name))
    outside = _BACKTICKED.sub(lambda m: " " * len(m.group(0)), query)
    paths = list(_PATH.finditer(outside))
    found += [(m.start(), m.group(1)) for m in paths]
    for m in paths:  # a path's parts are not names of their own
        outside = outside[: m.start()] + " " * (m.end() - m.start()) + outside[m.end() :]
    for m in _IDENT.finditer(outside):
        word, called = m.group(1), m.group(2)
        if _distinctive(word) or (called and _plain(word)):
            found.append((m.start(), word))
    for pattern in (_AFTER_KIND, _BEFORE_KIND):
        for m in pattern.finditer(outside):
            word = next(g for g in m.groups() if g)
            if _plain(word):
                found.append((m.start(), word.rstrip(".")))
    found.sort()
    return tuple(dict.fromkeys(name for _, name in found))


def names_code(query: str) -> bool:
    """Whether `query` says the name of any code, file or table."""
    return bool(code_names(query))
