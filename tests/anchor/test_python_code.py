"""parse_python on real code, broken code, and on ctxbase's own source tree."""

from __future__ import annotations

import ast
from pathlib import Path

from ctxbase.anchor.python_code import module_name_for_path, parse_python

SOURCE = '''"""Order service."""
import os.path
import numpy as np
from . import cache
from ..core.db import session as db_session

def load(order_id, *, fresh=False):
    """Load one order."""
    if fresh:
        cache.evict(order_id)
    return db_session.get(os.path.join("orders", str(order_id)))

@dataclass(frozen=True)
class PaidOrder(Order, metaclass=Registry):
    """An order that was paid."""

    @property
    def total(self):
        return np.sum(self.lines)

    async def refund(self, amount: int) -> None:
        await self.notify(amount)
        def audit():
            log("refund")
        audit()

    def notify(self, amount):
        return load(self.id)
'''


def test_units_have_qualified_names_lines_and_docstrings() -> None:
    result = parse_python(SOURCE, "src/shop/orders/service.py")
    assert not result.fallback and result.parser == "python_ast"
    by_name = {unit.qualname: unit for unit in result.units}
    assert by_name["shop.orders.service"].kind == "module"
    assert by_name["shop.orders.service"].docstring == "Order service."
    load = by_name["shop.orders.service.load"]
    assert (load.kind, load.start_line, load.end_line) == ("function", 7, 11)
    assert load.docstring == "Load one order."
    assert load.properties["parameters"] == ("order_id", "fresh")
    cls = by_name["shop.orders.service.PaidOrder"]
    assert cls.kind == "class" and cls.start_line == 13  # decorator line included
    assert cls.properties["bases"] == ("Order",)
    assert cls.properties["decorators"] == ("dataclass(frozen=True)",)
    total = by_name["shop.orders.service.PaidOrder.total"]
    assert total.kind == "method" and total.properties["is_property"] is True
    refund = by_name["shop.orders.service.PaidOrder.refund"]
    assert refund.properties["is_async"] is True
    assert refund.properties["returns"] == "None"
    assert refund.parent == "shop.orders.service.PaidOrder"
    inner = by_name["shop.orders.service.PaidOrder.refund.audit"]
    assert inner.kind == "function" and inner.properties["nested"] is True
    assert inner.text.strip().startswith("def audit():")


def test_imports_resolve_relative_modules_against_the_path() -> None:
    result = parse_python(SOURCE, "src/shop/orders/service.py")
    imports = {ref.target: ref for ref in result.references_of("imports")}
    assert set(imports) == {
        "os.path",
        "numpy",
        "shop.orders.cache",
        "shop.core.db.session",
    }
    assert imports["shop.core.db.session"].properties["alias"] == "db_session"
    assert all(ref.confidence == 1.0 for ref in imports.values())


def test_relative_import_without_a_path_stays_relative_and_is_less_certain() -> None:
    result = parse_python("from ..core import db\n")
    (ref,) = result.references_of("imports")
    assert ref.target == "..core.db"
    assert ref.properties["resolved"] is False and ref.confidence < 1.0


def test_calls_are_attributed_to_their_function_and_resolved_through_imports() -> None:
    result = parse_python(SOURCE, "src/shop/orders/service.py")
    calls: dict[str, set[str]] = {}
    for ref in result.references_of("calls"):
        calls.setdefault(ref.from_qualname, set()).add(ref.target)
    prefix = "shop.orders.service"
    assert calls[f"{prefix}.load"] == {
        "shop.orders.cache.evict",
        "shop.core.db.session.get",
        "os.path.join",
        "str",
    }
    assert calls[f"{prefix}.PaidOrder.total"] == {"numpy.sum"}
    # self.notify resolves to the method; the nested function's call stays inside it.
    assert calls[f"{prefix}.PaidOrder.refund"] == {
        f"{prefix}.PaidOrder.notify",
        f"{prefix}.PaidOrder.refund.audit",
    }
    assert calls[f"{prefix}.PaidOrder.refund.audit"] == {"log"}
    assert calls[f"{prefix}.PaidOrder.notify"] == {f"{prefix}.load"}
    inherits = result.references_of("inherits")
    assert [(ref.from_qualname, ref.target) for ref in inherits] == [
        (f"{prefix}.PaidOrder", "Order")
    ]


def test_without_a_path_qualnames_start_at_the_top_level_name() -> None:
    result = parse_python("class A:\n    def m(self):\n        pass\n")
    assert [unit.qualname for unit in result.units] == ["<module>", "A", "A.m"]


def test_syntax_error_falls_back_to_plain_text_with_the_line() -> None:
    broken = "def ok():\n    return 1\n\ndef broken(:\n    pass\n"
    result = parse_python(broken, "pkg/bad.py")
    assert result.fallback is True and result.parser == "plain_text"
    assert len(result.warnings) == 1 and "line 4" in result.warnings[0]
    assert "SyntaxError" in result.warnings[0]
    assert all(unit.kind == "text_chunk" for unit in result.units)
    assert "def broken(:" in "\n".join(unit.text for unit in result.units)


def test_nul_bytes_do_not_raise() -> None:
    result = parse_python("x = 1\x00\n")
    assert result.fallback is True and result.warnings


def test_module_name_for_path() -> None:
    assert module_name_for_path("src/ctxbase/anchor/sql.py") == "ctxbase.anchor.sql"
    assert module_name_for_path("pkg/sub/__init__.py") == "pkg.sub"
    assert module_name_for_path("/tmp/scratch/tool.py") == "tool"
    assert module_name_for_path("C:\\work\\src\\app\\main.py") == "app.main"


def test_package_init_resolves_single_dot_to_itself() -> None:
    result = parse_python("from .model import Entity\n", "src/ctxbase/__init__.py")
    (ref,) = result.references_of("imports")
    assert ref.target == "ctxbase.model.Entity"


def test_counts_match_an_independent_ast_walk_over_ctxbase_sources() -> None:
    package_root = Path(__file__).resolve().parents[2] / "src" / "ctxbase"
    files = sorted(package_root.rglob("*.py"))
    assert files, "the package has Python files"
    for file in files:
        source = file.read_text(encoding="utf-8")
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue  # another module being written right now; not this parser's concern
        expected_functions = sum(
            isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) for node in ast.walk(tree)
        )
        expected_classes = sum(isinstance(node, ast.ClassDef) for node in ast.walk(tree))
        result = parse_python(source, str(file.relative_to(package_root.parent.parent)))
        assert not result.fallback, file
        functions = len(result.units_of("function", "method"))
        classes = len(result.units_of("class"))
        assert (functions, classes) == (expected_functions, expected_classes), file
        qualnames = [unit.qualname for unit in result.units]
        assert len(qualnames) == len(set(qualnames)), file


def test_redefinitions_get_distinct_qualnames() -> None:
    source = (
        "class C:\n    @property\n    def x(self):\n        return 1\n"
        "    @x.setter\n    def x(self, value):\n        pass\n"
    )
    result = parse_python(source, "src/m.py")
    assert [unit.qualname for unit in result.units_of("method")] == ["m.C.x", "m.C.x#2"]


def test_full_width_punctuation_is_read_as_ascii() -> None:
    # seed 000, 5.1: code pasted with Chinese brackets and full-width spaces still parses
    source = "def pay（user_id， amount）：\n\u3000\u3000return charge（user_id）\n"
    result = parse_python(source, "pay.py")
    assert not result.fallback and result.parser == "python_ast"
    (fn,) = [u for u in result.units if u.kind == "function"]
    assert fn.name == "pay" and fn.properties["parameters"] == ("user_id", "amount")
    assert fn.text == source.rstrip("\n")  # the stored text is what was written
    assert any("full-width" in w for w in result.warnings)
    assert "charge" in {r.target for r in result.references}
    # code that is broken for another reason stays plain text
    broken = parse_python("def pay（user_id）：\n    return (\n", "pay.py")
    assert broken.fallback and "SyntaxError" in broken.warnings[0]
