"""Python source -> units (module, classes, functions, methods) and references, with `ast`.

References are what relationship weaving needs from code: what a module imports, what each
function calls (by dotted name, resolved through the module's imports where possible) and
which classes a class inherits from. Source that does not parse is anchored as plain text.
"""

from __future__ import annotations

import ast
import posixpath
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from .parsed import ParsedReference, ParsedUnit, ParseResult
from .plaintext import plain_text_result

__all__ = ["ascii_reading", "module_name_for_path", "parse_python"]

# Folders that sit above the import root; the module name starts after the last of them.
_ROOT_MARKERS = ("src", "lib", "site-packages", "dist-packages")

# Confidence of a call target guessed from its name alone (it may be shadowed at run time).
_CALL_CONFIDENCE = 0.8
_UNRESOLVED_CONFIDENCE = 0.5

_FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef
_ScopeNode = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


def module_name_for_path(path: str) -> str:
    """The dotted module name a file path most likely imports as.

    `src/ctxbase/anchor/sql.py` -> `ctxbase.anchor.sql`; `pkg/__init__.py` -> `pkg`. An
    absolute path with no `src`-like folder gives only the file's own name.
    """
    normalized = path.replace("\\", "/")
    parts = [part for part in normalized.split("/") if part and part != "."]
    if not parts:
        return ""
    stem = parts[-1]
    for suffix in (".pyi", ".py"):
        if stem.endswith(suffix):
            stem = stem[: -len(suffix)]
            break
    parts[-1] = stem
    markers = [index for index, part in enumerate(parts[:-1]) if part in _ROOT_MARKERS]
    if markers:
        parts = parts[markers[-1] + 1 :]
    elif normalized.startswith("/"):
        parts = parts[-1:]
    if parts and parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(part for part in parts if part.isidentifier())


# Full-width punctuation that Chinese input methods put into pasted code (seed 000, 5.1:
# "用户上传的代码含非常规字符（如中文括号、全角空格），AST 解析器崩溃"), each read as the
# ASCII character it stands for. One character for one keeps every line and column.
_FULL_WIDTH_CODE = str.maketrans("（）：，；【】＝\u3000", "():,;[]= ")


def ascii_reading(source: str) -> str:
    """`source` with full-width punctuation read as ASCII (same length, same lines)."""
    return source.translate(_FULL_WIDTH_CODE)


def _parse_tree(source: str, path: str | None) -> tuple[ast.Module, tuple[str, ...]]:
    """The module's tree; source that fails only for full-width punctuation is parsed as
    its ASCII reading (said in the warnings returned). Raises the first SyntaxError."""
    try:
        return ast.parse(source, filename=path or "<string>", type_comments=False), ()
    except SyntaxError:
        readable = ascii_reading(source)
        if readable == source:
            raise
        try:
            tree = ast.parse(readable, filename=path or "<string>", type_comments=False)
        except SyntaxError:
            pass
        else:
            return tree, ("full-width punctuation read as ASCII to parse",)
        raise


def parse_python(source: str, path: str | None = None) -> ParseResult:
    """Parse Python source into units and references; never raises on bad source."""
    try:
        tree, repaired = _parse_tree(source, path)
    except SyntaxError as error:
        where = f"line {error.lineno}" if error.lineno else "an unknown line"
        warning = f"SyntaxError at {where}: {error.msg}; anchored as plain text"
        return plain_text_result(source, path, "python", (warning,))
    except (ValueError, RecursionError, MemoryError) as error:
        # ValueError: NUL bytes in the source; RecursionError: absurdly deep nesting.
        warning = f"{type(error).__name__}: {error}; anchored as plain text"
        return plain_text_result(source, path, "python", (warning,))

    module_name = module_name_for_path(path) if path else ""
    is_package = bool(path) and posixpath.basename((path or "").replace("\\", "/")) in (
        "__init__.py",
        "__init__.pyi",
    )
    collector = _Collector(
        source_lines=source.splitlines(),
        module_name=module_name,
        is_package=is_package,
    )
    collector.collect(tree)
    return ParseResult(
        path=path,
        language="python",
        units=tuple(collector.units),
        references=tuple(collector.references),
        warnings=(*repaired, *collector.warnings),
        fallback=False,
        parser="python_ast",
        properties={"module": module_name or None},
    )


@dataclass
class _Collector:
    """Walks one module's tree once, keeping the import aliases needed to resolve names."""

    source_lines: list[str]
    module_name: str
    is_package: bool
    units: list[ParsedUnit] = field(default_factory=list)
    references: list[ParsedReference] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # Local name -> dotted target, from import statements (module-wide, good enough to link).
    aliases: dict[str, str] = field(default_factory=dict)
    # Qualnames of everything defined in this module, to resolve calls to local definitions.
    defined: set[str] = field(default_factory=set)
    # Owner qualname -> call targets already emitted, so each callee is referenced once.
    call_targets: dict[str, set[str]] = field(default_factory=dict)
    # Qualnames handed out; a redefinition (property setter, overload) gets `name#2`.
    taken: set[str] = field(default_factory=set)

    @property
    def module_qualname(self) -> str:
        return self.module_name or "<module>"

    def qualify(self, *names: str) -> str:
        return ".".join(name for name in (self.module_name, *names) if name)

    def collect(self, tree: ast.Module) -> None:
        # Imports and definitions first, so calls anywhere can be resolved against them.
        import_nodes = [
            node for node in ast.walk(tree) if isinstance(node, ast.Import | ast.ImportFrom)
        ]
        for node in import_nodes:
            self._remember_aliases(node)
        self._remember_definitions(tree.body, ())
        imports = [target for node in import_nodes for target, _ in self._import_targets(node)]
        last_line = max(len(self.source_lines), 1)
        self.units.append(
            ParsedUnit(
                kind="module",
                name=self.module_name.rsplit(".", 1)[-1] if self.module_name else "<module>",
                qualname=self.module_qualname,
                language="python",
                text="\n".join(self.source_lines),
                start_line=1,
                end_line=last_line,
                docstring=ast.get_docstring(tree),
                parent=None,
                properties={
                    "imports": sorted(set(imports)),
                    "package": self.is_package,
                },
            )
        )
        self._visit_body(tree.body, (), self.module_qualname, owner_is_class=False)

    def _remember_definitions(self, body: list[ast.stmt], scope: tuple[str, ...]) -> None:
        for node in _nested_statements(body):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names = (*scope, node.name)
                self.defined.add(".".join(names))
                self._remember_definitions(node.body, names)

    def _visit_body(
        self,
        body: list[ast.stmt],
        scope: tuple[str, ...],
        owner_qualname: str,
        owner_is_class: bool,
    ) -> None:
        """Emit units for definitions in `body`, and references for its other statements."""
        for node in _nested_statements(body):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                self._visit_function(node, scope, owner_qualname, owner_is_class)
            elif isinstance(node, ast.ClassDef):
                self._visit_class(node, scope, owner_qualname)
            else:
                self._emit_statement_references(node, owner_qualname, scope)

    def _visit_function(
        self,
        node: _FunctionNode,
        scope: tuple[str, ...],
        owner_qualname: str,
        owner_is_class: bool,
    ) -> None:
        names = (*scope, node.name)
        qualname = self._unique(self.qualify(*names))
        decorators = tuple(_expression_text(item) for item in node.decorator_list)
        decorator_names = {decorator.split("(", 1)[0] for decorator in decorators}
        properties: dict[str, Any] = {
            "is_async": isinstance(node, ast.AsyncFunctionDef),
            "decorators": decorators,
            "parameters": _parameter_names(node.args),
            "signature": _signature_text(node),
            "returns": _expression_text(node.returns) if node.returns else None,
            "def_line": node.lineno,
            "nested": bool(scope) and not owner_is_class,
        }
        if owner_is_class:
            properties["is_staticmethod"] = "staticmethod" in decorator_names
            properties["is_classmethod"] = "classmethod" in decorator_names
            properties["is_property"] = bool(
                decorator_names & {"property", "functools.cached_property", "cached_property"}
            ) or any(name.endswith((".setter", ".getter", ".deleter")) for name in decorator_names)
        self._append_unit(
            node,
            kind="method" if owner_is_class else "function",
            qualname=qualname,
            parent=owner_qualname,
            properties=properties,
        )
        for decorator in node.decorator_list:
            self._emit_calls(decorator, owner_qualname, scope)
        for default in (*node.args.defaults, *node.args.kw_defaults):
            if default is not None:
                self._emit_calls(default, owner_qualname, scope)
        self._visit_body(node.body, names, qualname, owner_is_class=False)

    def _visit_class(self, node: ast.ClassDef, scope: tuple[str, ...], owner_qualname: str) -> None:
        names = (*scope, node.name)
        qualname = self._unique(self.qualify(*names))
        bases = tuple(_expression_text(base) for base in node.bases)
        keywords = {
            keyword.arg: _expression_text(keyword.value)
            for keyword in node.keywords
            if keyword.arg is not None
        }
        self._append_unit(
            node,
            kind="class",
            qualname=qualname,
            parent=owner_qualname,
            properties={
                "decorators": tuple(_expression_text(item) for item in node.decorator_list),
                "bases": bases,
                "keywords": keywords,
                "def_line": node.lineno,
                "nested": bool(scope),
            },
        )
        for base in node.bases:
            dotted = _dotted_name(base)
            if dotted is None:
                continue
            target, confidence = self._resolve(dotted, scope)
            self.references.append(
                ParsedReference(
                    from_qualname=qualname,
                    kind="inherits",
                    target=target,
                    line=base.lineno,
                    confidence=confidence,
                    properties={"written": dotted},
                )
            )
        for item in (*node.decorator_list, *node.bases, *(kw.value for kw in node.keywords)):
            self._emit_calls(item, owner_qualname, scope)
        self._visit_body(node.body, names, qualname, owner_is_class=True)

    def _unique(self, qualname: str) -> str:
        candidate = qualname
        suffix = 2
        while candidate in self.taken:
            candidate = f"{qualname}#{suffix}"
            suffix += 1
        self.taken.add(candidate)
        return candidate

    def _append_unit(
        self,
        node: _ScopeNode,
        kind: str,
        qualname: str,
        parent: str,
        properties: dict[str, Any],
    ) -> None:
        start = min([node.lineno, *(item.lineno for item in node.decorator_list)])
        end = node.end_lineno or node.lineno
        self.units.append(
            ParsedUnit(
                kind=kind,
                name=node.name,
                qualname=qualname,
                language="python",
                text="\n".join(self.source_lines[start - 1 : end]),
                start_line=start,
                end_line=end,
                docstring=ast.get_docstring(node),
                parent=parent,
                properties=properties,
            )
        )

    def _emit_statement_references(
        self, node: ast.stmt, owner_qualname: str, scope: tuple[str, ...]
    ) -> None:
        if isinstance(node, ast.Import | ast.ImportFrom):
            for target, details in self._import_targets(node):
                resolved = bool(details.get("resolved", True))
                self.references.append(
                    ParsedReference(
                        from_qualname=owner_qualname,
                        kind="imports",
                        target=target,
                        line=node.lineno,
                        confidence=1.0 if resolved else _UNRESOLVED_CONFIDENCE,
                        properties=details,
                    )
                )
            return
        self._emit_calls(node, owner_qualname, scope)

    def _emit_calls(self, node: ast.AST, owner_qualname: str, scope: tuple[str, ...]) -> None:
        """One `calls` reference per distinct callee in `node`, skipping nested definitions."""
        seen = self.call_targets.setdefault(owner_qualname, set())
        for call in _calls_outside_definitions(node):
            dotted = _dotted_name(call.func)
            if dotted is None:
                continue
            target, confidence = self._resolve(dotted, scope)
            if target in seen:
                continue
            seen.add(target)
            self.references.append(
                ParsedReference(
                    from_qualname=owner_qualname,
                    kind="calls",
                    target=target,
                    line=call.lineno,
                    confidence=min(confidence, _CALL_CONFIDENCE),
                    properties={"written": dotted},
                )
            )

    def _resolve(self, dotted: str, scope: tuple[str, ...]) -> tuple[str, float]:
        """Map a name as written to a fully dotted target, and how sure that is."""
        head, _, rest = dotted.partition(".")
        # `self.method` / `cls.method` inside a class: the enclosing class's method.
        if head in ("self", "cls") and rest:
            for depth in range(len(scope), 0, -1):
                candidate = ".".join((*scope[:depth], rest))
                if candidate in self.defined:
                    return self.qualify(candidate), 0.9
            return dotted, 0.6
        # A name defined in an enclosing scope or at module level.
        for depth in range(len(scope), -1, -1):
            candidate = ".".join((*scope[:depth], dotted))
            if candidate in self.defined:
                return self.qualify(candidate), 0.9
        if head in self.aliases:
            base = self.aliases[head]
            return (f"{base}.{rest}" if rest else base), 0.9
        return dotted, 0.7

    def _remember_aliases(self, node: ast.Import | ast.ImportFrom) -> None:
        for target, details in self._import_targets(node):
            local = details.get("alias") or details.get("name")
            if isinstance(node, ast.Import) and not details.get("alias"):
                # `import a.b` binds `a`; calls through it are written as `a.b.f`.
                local = target.split(".", 1)[0]
                target = local
            if isinstance(local, str) and local != "*":
                self.aliases[local] = target

    def _import_targets(
        self, node: ast.Import | ast.ImportFrom
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        """(dotted target, details) for each name an import statement brings in."""
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, {"module": alias.name, "name": None, "alias": alias.asname}
            return
        base, resolved = self._import_base(node.module, node.level)
        for alias in node.names:
            target = (
                f"{base}.{alias.name}" if base and not base.endswith(".") else base + alias.name
            )
            yield (
                target,
                {
                    "module": base,
                    "name": alias.name,
                    "alias": alias.asname,
                    "level": node.level,
                    "resolved": resolved,
                },
            )

    def _import_base(self, module: str | None, level: int) -> tuple[str, bool]:
        """The absolute module a `from ... import` reads from; relative dots kept if unknown."""
        if level == 0:
            return module or "", True
        parts = self.module_name.split(".") if self.module_name else []
        package = parts if self.is_package else parts[:-1]
        climb = level - 1
        if climb >= len(package):
            return "." * level + (module or ""), False
        base = package[: len(package) - climb]
        return ".".join([*base, *([module] if module else [])]), True


def _nested_statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Statements of a body, descending into if/try/with/for/while/match blocks.

    Definitions under `if TYPE_CHECKING:` or `try: ... except ImportError:` still belong to
    the enclosing scope, so they must be found; function and class bodies are not entered.
    """
    for node in body:
        yield node
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        blocks: list[list[ast.stmt]] = []
        if isinstance(node, ast.If | ast.For | ast.AsyncFor | ast.While):
            blocks = [node.body, node.orelse]
        elif isinstance(node, ast.With | ast.AsyncWith):
            blocks = [node.body]
        elif isinstance(node, ast.Try | ast.TryStar):
            blocks = [node.body, *(handler.body for handler in node.handlers)]
            blocks += [node.orelse, node.finalbody]
        elif isinstance(node, ast.Match):
            blocks = [case.body for case in node.cases]
        for block in blocks:
            yield from _nested_statements(block)


def _calls_outside_definitions(node: ast.AST) -> list[ast.Call]:
    """Call nodes under `node` in source order, without entering nested statements.

    Nested statements are either definitions (they get their own units) or the inner
    statements of compound ones, which `_nested_statements` yields separately.
    """
    calls: list[ast.Call] = []
    stack: list[ast.AST] = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, ast.Call):
            calls.append(current)
        stack.extend(
            child for child in ast.iter_child_nodes(current) if not isinstance(child, ast.stmt)
        )
    return sorted(calls, key=lambda call: (call.lineno, call.col_offset))


def _dotted_name(node: ast.expr) -> str | None:
    """`a.b.c` for Name/Attribute chains; None for anything computed (calls, subscripts)."""
    parts: list[str] = []
    current: ast.expr = node
    while isinstance(current, ast.Attribute):
        parts.append(current.attr)
        current = current.value
    if isinstance(current, ast.Name):
        parts.append(current.id)
        return ".".join(reversed(parts))
    return None


def _expression_text(node: ast.expr) -> str:
    try:
        return ast.unparse(node)
    except (ValueError, RecursionError):  # pragma: no cover - unparse of a parsed tree
        return "<expression>"


def _parameter_names(arguments: ast.arguments) -> tuple[str, ...]:
    names = [arg.arg for arg in (*arguments.posonlyargs, *arguments.args)]
    if arguments.vararg:
        names.append("*" + arguments.vararg.arg)
    names.extend(arg.arg for arg in arguments.kwonlyargs)
    if arguments.kwarg:
        names.append("**" + arguments.kwarg.arg)
    return tuple(names)


def _signature_text(node: _FunctionNode) -> str:
    prefix = "async def" if isinstance(node, ast.AsyncFunctionDef) else "def"
    returns = f" -> {_expression_text(node.returns)}" if node.returns else ""
    return f"{prefix} {node.name}({_expression_text_arguments(node.args)}){returns}"


def _expression_text_arguments(arguments: ast.arguments) -> str:
    try:
        return ast.unparse(arguments)
    except (ValueError, RecursionError):  # pragma: no cover
        return ", ".join(_parameter_names(arguments))
