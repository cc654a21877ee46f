"""JavaScript, TypeScript, Go and Java source -> functions, classes, imports, calls.

Uses tree-sitter with the per-language grammar wheels from PyPI (`tree-sitter`,
`tree-sitter-javascript`, `tree-sitter-typescript`, `tree-sitter-go`, `tree-sitter-java`),
which ship compiled grammars and work offline. They are optional: without them
`parse_outline` finds functions and classes with regular expressions instead and says so.
"""

from __future__ import annotations

import importlib
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

from .parsed import ParsedReference, ParsedUnit, ParseResult
from .plaintext import plain_text_result

__all__ = [
    "TREE_SITTER_LANGUAGES",
    "GrammarUnavailableError",
    "parse_outline",
    "parse_treesitter",
    "regex_outline",
    "treesitter_available",
]

# language -> (grammar module, function returning the grammar, PyPI package to install)
_GRAMMARS: dict[str, tuple[str, str, str]] = {
    "javascript": ("tree_sitter_javascript", "language", "tree-sitter-javascript"),
    "typescript": ("tree_sitter_typescript", "language_typescript", "tree-sitter-typescript"),
    "tsx": ("tree_sitter_typescript", "language_tsx", "tree-sitter-typescript"),
    "go": ("tree_sitter_go", "language", "tree-sitter-go"),
    "java": ("tree_sitter_java", "language", "tree-sitter-java"),
}
TREE_SITTER_LANGUAGES = frozenset(_GRAMMARS)

_JS_FAMILY = frozenset({"javascript", "typescript", "tsx"})

# Node types that define a unit: node type -> (unit kind, type kind stored in properties).
_DEFINITIONS: dict[str, dict[str, tuple[str, str]]] = {
    "js": {
        "function_declaration": ("function", "function"),
        "generator_function_declaration": ("function", "generator"),
        "class_declaration": ("class", "class"),
        "abstract_class_declaration": ("class", "abstract class"),
        "interface_declaration": ("class", "interface"),
        "enum_declaration": ("class", "enum"),
        "method_definition": ("method", "method"),
    },
    "go": {
        "function_declaration": ("function", "function"),
        "method_declaration": ("method", "method"),
    },
    "java": {
        "class_declaration": ("class", "class"),
        "interface_declaration": ("class", "interface"),
        "enum_declaration": ("class", "enum"),
        "record_declaration": ("class", "record"),
        "method_declaration": ("method", "method"),
        "constructor_declaration": ("method", "constructor"),
    },
}
_CALL_NODES = {"js": "call_expression", "go": "call_expression", "java": "method_invocation"}


class GrammarUnavailableError(ImportError):
    """tree-sitter or the grammar for a language is not installed."""


class _Point(Protocol):
    @property
    def row(self) -> int: ...


class _Node(Protocol):
    """The part of tree_sitter.Node used here (typed so mypy works without the package)."""

    @property
    def type(self) -> str: ...
    @property
    def text(self) -> bytes | None: ...
    @property
    def start_byte(self) -> int: ...
    @property
    def end_byte(self) -> int: ...
    @property
    def start_point(self) -> _Point: ...
    @property
    def end_point(self) -> _Point: ...
    @property
    def children(self) -> list[_Node]: ...
    @property
    def named_children(self) -> list[_Node]: ...
    @property
    def parent(self) -> _Node | None: ...
    @property
    def prev_named_sibling(self) -> _Node | None: ...
    @property
    def has_error(self) -> bool: ...
    @property
    def is_missing(self) -> bool: ...
    def child_by_field_name(self, name: str, /) -> _Node | None: ...


_languages: dict[str, Any] = {}
_languages_lock = threading.Lock()


def _language(language: str) -> Any:
    """The tree-sitter Language for a language name, loaded once."""
    if language not in _GRAMMARS:
        raise GrammarUnavailableError(f"no tree-sitter grammar is known for {language!r}")
    module_name, function_name, package = _GRAMMARS[language]
    with _languages_lock:
        if language not in _languages:
            try:
                tree_sitter = importlib.import_module("tree_sitter")
                grammar = importlib.import_module(module_name)
            except ImportError as error:
                raise GrammarUnavailableError(
                    f"parsing {language} needs the packages tree-sitter and {package} "
                    f"(pip install tree-sitter {package})"
                ) from error
            _languages[language] = tree_sitter.Language(getattr(grammar, function_name)())
        return _languages[language]


def treesitter_available(language: str) -> bool:
    """Whether tree-sitter and the grammar for `language` can be loaded here."""
    try:
        _language(language)
    except GrammarUnavailableError:
        return False
    return True


def parse_treesitter(source: str, language: str, path: str | None = None) -> ParseResult:
    """Parse with tree-sitter; raises GrammarUnavailableError when it is not installed.

    tree-sitter recovers from syntax errors, so broken code still yields units; the result
    then carries a warning naming the first line with an error.
    """
    grammar = _language(language)
    parser = importlib.import_module("tree_sitter").Parser(grammar)
    data = source.encode("utf-8")
    root = cast(_Node, parser.parse(data).root_node)
    walker = _Walker(data=data, language=language, family=_family(language))
    walker.walk(root)
    warnings: list[str] = []
    if root.has_error:
        line = _first_error_line(root)
        warnings.append(f"{language} syntax error near line {line}; units may be incomplete")
    module_name = walker.package or (_basename(path) if path else "<module>")
    lines = source.splitlines()
    module_unit = ParsedUnit(
        kind="module",
        name=module_name,
        qualname=walker.package or "<module>",
        language=language,
        text=source,
        start_line=1,
        end_line=max(len(lines), 1),
        properties={
            "imports": _distinct(ref.target for ref in walker.references if ref.kind == "imports")
        },
    )
    return ParseResult(
        path=path,
        language=language,
        units=(module_unit, *walker.units),
        references=tuple(walker.references),
        warnings=tuple(warnings),
        fallback=False,
        parser="tree_sitter",
        properties={"package": walker.package},
    )


def parse_outline(source: str, language: str, path: str | None = None) -> ParseResult:
    """tree-sitter when installed, else a regex outline, else plain text; never raises."""
    if treesitter_available(language):
        try:
            return parse_treesitter(source, language, path)
        except (ValueError, RuntimeError, UnicodeError) as error:
            warning = f"tree-sitter failed on {language}: {error}"
            return regex_outline(source, language, path, (warning,))
    _, _, package = _GRAMMARS.get(language, ("", "", "a tree-sitter grammar"))
    warning = (
        f"tree-sitter grammar for {language} is not installed (pip install tree-sitter "
        f"{package}); functions and classes found by regular expressions"
    )
    return regex_outline(source, language, path, (warning,))


@dataclass
class _Walker:
    """One pass over a syntax tree, collecting units and references with their owners."""

    data: bytes
    language: str
    family: str
    units: list[ParsedUnit] = field(default_factory=list)
    references: list[ParsedReference] = field(default_factory=list)
    package: str | None = None
    taken: set[str] = field(default_factory=set)
    call_targets: set[tuple[str, str]] = field(default_factory=set)

    def text(self, node: _Node | None) -> str:
        if node is None:
            return ""
        return self.data[node.start_byte : node.end_byte].decode("utf-8", errors="replace")

    def qualify(self, *names: str) -> str:
        return ".".join(name for name in (self.package, *names) if name)

    def walk(self, root: _Node) -> None:
        # The package comes first in Go and Java files; read it before naming anything.
        for child in root.named_children:
            if child.type in ("package_declaration", "package_clause"):
                self._reference(child, "<module>")
        self._visit(root, (), self.package or "<module>", None)

    def _visit(
        self, node: _Node, scope: tuple[str, ...], owner: str, owner_kind: str | None
    ) -> None:
        for child in node.named_children:
            definition = self._definition(child, owner_kind)
            if definition is not None:
                kind, type_kind, name, body_scope = definition
                names = (*scope, *body_scope, name)
                qualname = self._unique(self.qualify(*names))
                # A Go method belongs to its receiver type when that type is defined here.
                receiver = self.qualify(*scope, *body_scope) if body_scope else None
                parent = receiver if receiver in self.taken else owner
                self._add_unit(child, kind, type_kind, name, qualname, parent or owner)
                self._inheritance(child, qualname)
                self._visit(child, names, qualname, kind)
                continue
            self._reference(child, owner)
            self._visit(child, scope, owner, owner_kind)

    def _definition(
        self, node: _Node, owner_kind: str | None
    ) -> tuple[str, str, str, tuple[str, ...]] | None:
        """(kind, type kind, name, extra scope) when `node` defines a unit."""
        table = _DEFINITIONS[self.family]
        if node.type in table:
            kind, type_kind = table[node.type]
            name = self.text(node.child_by_field_name("name")) or "<anonymous>"
            extra: tuple[str, ...] = ()
            if node.type == "method_declaration" and self.family == "go":
                receiver = self._go_receiver(node)
                extra = (receiver,) if receiver else ()
            return kind, type_kind, name, extra
        if self.family == "go" and node.type == "type_spec":
            value = node.child_by_field_name("type")
            if value is not None and value.type in ("struct_type", "interface_type"):
                name = self.text(node.child_by_field_name("name"))
                return "class", value.type.removesuffix("_type"), name, ()
        if self.family == "js" and node.type == "variable_declarator":
            value = node.child_by_field_name("value")
            if value is not None and value.type in (
                "arrow_function",
                "function_expression",
                "function",
                "generator_function",
            ):
                name = self.text(node.child_by_field_name("name"))
                return "function", value.type, name, ()
        return None

    def _go_receiver(self, node: _Node) -> str:
        receiver = node.child_by_field_name("receiver")
        if receiver is None:
            return ""
        match = re.search(r"\*?\s*([A-Za-z_]\w*)\s*(?:\[[^\]]*\])?\s*\)\s*$", self.text(receiver))
        return match.group(1) if match else ""

    def _add_unit(
        self, node: _Node, kind: str, type_kind: str, name: str, qualname: str, parent: str
    ) -> None:
        self.units.append(
            ParsedUnit(
                kind=kind,
                name=name,
                qualname=qualname,
                language=self.language,
                text=self.text(node),
                start_line=node.start_point.row + 1,
                end_line=node.end_point.row + 1,
                docstring=self._doc_comment(node),
                parent=parent,
                properties={
                    "type_kind": type_kind,
                    "signature": self._signature(node),
                    "exported": node.parent is not None and node.parent.type == "export_statement",
                },
            )
        )

    def _signature(self, node: _Node) -> str:
        """The definition's text up to its body, on one line."""
        body = node.child_by_field_name("body")
        end = body.start_byte if body is not None else node.end_byte
        head = self.data[node.start_byte : end].decode("utf-8", errors="replace")
        return re.sub(r"\s+", " ", head).strip()[:300]

    def _doc_comment(self, node: _Node) -> str | None:
        """The comment block right above a definition (JSDoc, Javadoc, Go doc comment)."""
        anchor = node
        if node.parent is not None and node.parent.type == "export_statement":
            anchor = node.parent
        comments: list[str] = []
        expected_row = anchor.start_point.row
        sibling = anchor.prev_named_sibling
        while sibling is not None and "comment" in sibling.type:
            if sibling.end_point.row < expected_row - 1:
                break
            comments.insert(0, self.text(sibling))
            expected_row = sibling.start_point.row
            sibling = sibling.prev_named_sibling
        if not comments:
            return None
        return _clean_comment("\n".join(comments)) or None

    def _inheritance(self, node: _Node, qualname: str) -> None:
        targets: list[str] = []
        if self.family == "js":
            for child in node.named_children:
                if child.type == "class_heritage":
                    targets.extend(self._heritage_names(child))
        elif self.family == "java":
            for field_name in ("superclass", "interfaces"):
                clause = node.child_by_field_name(field_name)
                if clause is not None:
                    targets.extend(
                        self.text(item)
                        for item in _descendants(clause)
                        if item.type in ("type_identifier", "scoped_type_identifier")
                        and (item.parent is None or item.parent.type != "scoped_type_identifier")
                    )
            if node.type == "interface_declaration":
                for child in node.named_children:
                    if child.type == "extends_interfaces":
                        targets.extend(
                            self.text(item)
                            for item in _descendants(child)
                            if item.type == "type_identifier"
                        )
        for target in _distinct(targets):
            self.references.append(
                ParsedReference(qualname, "inherits", target, node.start_point.row + 1, 0.9)
            )

    def _heritage_names(self, heritage: _Node) -> list[str]:
        names: list[str] = []
        for child in heritage.named_children:
            if child.type in ("extends_clause", "implements_clause"):
                names.extend(self._heritage_names(child))
            elif child.type in ("identifier", "type_identifier", "member_expression"):
                names.append(self.text(child))
            elif child.type == "generic_type":
                names.append(self.text(child.child_by_field_name("name")))
        return names

    def _reference(self, node: _Node, owner: str) -> None:
        line = node.start_point.row + 1
        if self.family == "java" and node.type == "package_declaration":
            self.package = self.text(node).removeprefix("package").strip().rstrip(";").strip()
        elif self.family == "go" and node.type == "package_clause":
            self.package = self.text(node).removeprefix("package").strip()
        elif self.family == "js" and node.type in ("import_statement", "export_statement"):
            source = node.child_by_field_name("source")
            if source is not None:
                self._add_import(owner, _unquote(self.text(source)), line)
        elif self.family == "go" and node.type == "import_spec":
            alias = self.text(node.child_by_field_name("name")) or None
            target = _unquote(self.text(node.child_by_field_name("path")))
            self._add_import(owner, target, line, alias)
        elif self.family == "java" and node.type == "import_declaration":
            target = self.text(node).removeprefix("import").strip().rstrip(";").strip()
            self._add_import(owner, target.removeprefix("static ").strip(), line)
        elif node.type == _CALL_NODES[self.family]:
            self._add_call(node, owner, line)

    def _add_import(self, owner: str, target: str, line: int, alias: str | None = None) -> None:
        if target:
            self.references.append(
                ParsedReference(owner, "imports", target, line, 1.0, {"alias": alias})
            )

    def _add_call(self, node: _Node, owner: str, line: int) -> None:
        if self.family == "java":
            receiver = self.text(node.child_by_field_name("object"))
            name = self.text(node.child_by_field_name("name"))
            target = f"{receiver}.{name}" if receiver else name
        else:
            target = self.text(node.child_by_field_name("function"))
        target = re.sub(r"\s+", "", target)
        if not re.fullmatch(r"[A-Za-z_$][\w$]*(?:\??\.[A-Za-z_$][\w$]*)*", target):
            return  # a computed callee: (a || b)(), f()(), obj[key]()
        if self.family == "js" and target == "require":
            arguments = node.child_by_field_name("arguments")
            literal = (
                arguments.named_children[0] if arguments and arguments.named_children else None
            )
            if literal is not None and literal.type == "string":
                self._add_import(owner, _unquote(self.text(literal)), line)
            return
        if (owner, target) in self.call_targets:
            return
        self.call_targets.add((owner, target))
        self.references.append(ParsedReference(owner, "calls", target, line, 0.7))

    def _unique(self, qualname: str) -> str:
        candidate = qualname
        suffix = 2
        while candidate in self.taken:
            candidate = f"{qualname}#{suffix}"  # Java overloads share a name
            suffix += 1
        self.taken.add(candidate)
        return candidate


def _family(language: str) -> str:
    return "js" if language in _JS_FAMILY else language


def _descendants(node: _Node) -> Iterator[_Node]:
    for child in node.named_children:
        yield child
        yield from _descendants(child)


def _first_error_line(root: _Node) -> int:
    stack = [root]
    while stack:
        node = stack.pop(0)
        if node.type == "ERROR" or node.is_missing:
            return node.start_point.row + 1
        stack = [
            child
            for child in node.children
            if child.has_error or child.is_missing or child.type == "ERROR"
        ] + stack
    return root.start_point.row + 1


def _clean_comment(comment: str) -> str:
    lines = []
    for line in comment.splitlines():
        line = line.strip()
        line = re.sub(r"^(?:/\*\*?|\*/|\*|//+)\s?", "", line)
        line = re.sub(r"\s*\*/$", "", line)
        lines.append(line.rstrip())
    return "\n".join(lines).strip()


def _unquote(text: str) -> str:
    return text.strip().strip("'\"`")


def _basename(path: str) -> str:
    return path.replace("\\", "/").rsplit("/", 1)[-1]


def _distinct(items: Any) -> list[str]:
    return list(dict.fromkeys(str(item) for item in items))


# --- regex outline --------------------------------------------------------------------------

_JS_NAME = r"([A-Za-z_$][\w$]*)"
_JAVA_MODIFIERS = r"(?:public|private|protected|static|final|abstract|synchronized|native|default)"
_OUTLINE_PATTERNS: dict[str, tuple[tuple[str, re.Pattern[str]], ...]] = {
    "js": (
        (
            "function",
            re.compile(
                r"^\s*(?:export\s+)?(?:default\s+)?(?:async\s+)?function\s*\*?\s*" + _JS_NAME
            ),
        ),
        (
            "class",
            re.compile(
                r"^\s*(?:export\s+)?(?:default\s+)?(?:abstract\s+)?(?:class|interface|enum)\s+"
                + _JS_NAME
            ),
        ),
        (
            "function",
            re.compile(
                r"^\s*(?:export\s+)?(?:const|let|var)\s+" + _JS_NAME + r"\s*(?::[^=]+)?=\s*"
                r"(?:async\s+)?(?:function\b|\([^)]*\)\s*(?::[^=]+)?=>|[A-Za-z_$][\w$]*\s*=>)"
            ),
        ),
    ),
    "go": (
        (
            "method",
            re.compile(
                r"^func\s+\([^)]*?\*?\s*[A-Za-z_]\w*(?:\[[^\]]*\])?\s*\)\s*([A-Za-z_]\w*)\s*[(\[]"
            ),
        ),
        ("function", re.compile(r"^func\s+([A-Za-z_]\w*)\s*[(\[]")),
        ("class", re.compile(r"^type\s+([A-Za-z_]\w*)\s+(?:struct|interface)\b")),
    ),
    "java": (
        (
            "class",
            re.compile(
                r"^\s*(?:(?:public|private|protected|static|final|abstract|sealed|non-sealed)\s+)*"
                r"(?:class|interface|enum|record)\s+([A-Za-z_]\w*)"
            ),
        ),
        (
            "method",
            re.compile(
                r"^\s*(?:@\w+\s+)*(?:" + _JAVA_MODIFIERS + r"\s+)+(?:<[^>]+>\s+)?"
                r"[\w<>\[\],.?\s]*?\b([A-Za-z_]\w*)\s*\([^;]*$"
            ),
        ),
    ),
}


def regex_outline(
    source: str, language: str, path: str | None = None, warnings: tuple[str, ...] = ()
) -> ParseResult:
    """Functions and classes found line by line; ends follow braces. Marked as fallback."""
    patterns = _OUTLINE_PATTERNS.get(_family(language))
    if patterns is None:
        return plain_text_result(source, path, language, warnings)
    lines = source.splitlines()
    units: list[ParsedUnit] = []
    taken: set[str] = set()
    for index, line in enumerate(lines):
        for kind, pattern in patterns:
            match = pattern.match(line)
            if match is None or match.group(1) in ("if", "for", "while", "switch", "return"):
                continue
            end = _brace_end(lines, index)
            name = match.group(1)
            qualname = name
            suffix = 2
            while qualname in taken:
                qualname = f"{name}#{suffix}"
                suffix += 1
            taken.add(qualname)
            units.append(
                ParsedUnit(
                    kind=kind,
                    name=name,
                    qualname=qualname,
                    language=language,
                    text="\n".join(lines[index : end + 1]),
                    start_line=index + 1,
                    end_line=end + 1,
                    properties={"approximate": True, "signature": line.strip()[:300]},
                )
            )
            break
    if not units:
        return plain_text_result(source, path, language, warnings)
    return ParseResult(
        path=path,
        language=language,
        units=tuple(units),
        references=(),
        warnings=warnings,
        fallback=True,
        parser="regex_outline",
    )


def _brace_end(lines: list[str], start: int) -> int:
    """Index of the line where the braces opened at or after `start` balance again."""
    if "{" not in lines[start] and lines[start].rstrip().endswith((";", ")")):
        return start  # a one-line arrow function or a prototype
    depth = 0
    opened = False
    for index in range(start, len(lines)):
        # Strings and comments are not skipped: this is an approximation by design.
        for char in lines[index]:
            if char == "{":
                depth += 1
                opened = True
            elif char == "}":
                depth -= 1
        if opened and depth <= 0:
            return index
        if not opened and index - start >= 3:
            return start  # a declaration without a body (an abstract method, a prototype)
    return len(lines) - 1 if opened else start
