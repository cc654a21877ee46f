"""A function's docstring is its first statement: a string written after code is no
docstring (`help()` and `__doc__` lose it), and reads as one to whoever edits the code."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "ctxbase"


def _misplaced(tree: ast.AST) -> list[tuple[str, int]]:
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        for stmt in node.body[1:]:
            if (
                isinstance(stmt, ast.Expr)
                and isinstance(stmt.value, ast.Constant)
                and isinstance(stmt.value.value, str)
            ):
                found.append((node.name, stmt.lineno))
    return found


def test_no_docstring_follows_code() -> None:
    misplaced = []
    for path in sorted(SRC.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        misplaced += [f"{path.relative_to(SRC)}:{line} {name}" for name, line in _misplaced(tree)]
    assert misplaced == []


def test_the_check_sees_a_docstring_after_code() -> None:
    code = 'def f(x):\n    if not x:\n        raise ValueError\n    """Doc."""\n    return x\n'
    assert _misplaced(ast.parse(code)) == [("f", 4)]
    assert _misplaced(ast.parse('def f(x):\n    """Doc."""\n    return x\n')) == []
