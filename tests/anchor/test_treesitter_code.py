"""JavaScript/TypeScript/Go/Java outlines with tree-sitter, and the regex fallback."""

from __future__ import annotations

import pytest

from ctxbase.anchor.treesitter_code import (
    GrammarUnavailableError,
    parse_outline,
    parse_treesitter,
    regex_outline,
    treesitter_available,
)

JAVASCRIPT = """import express from 'express';
const db = require('./db');

/** Sum the order lines. */
export function total(lines) {
  return lines.reduce((sum, line) => sum + line.price, 0);
}

const fetchOrder = async (id) => db.orders.findById(id);

class OrderService extends BaseService {
  refund(order) {
    this.audit(order);
    return total(order.lines);
  }
}
"""

TYPESCRIPT = """interface Order { id: number }
// Service doc.
export class OrderService extends Base<Order> implements Auditable {
  constructor(private repo: Repo) { super(); }
  find(id: number): Order { return this.repo.get(id); }
}
enum Status { Paid, Refunded }
"""

GO = """package orders

import (
\t"fmt"
\tdb "example.com/shop/db"
)

// Order is a paid order.
type Order struct {
\tID int
}

type Store interface {
\tGet(id int) Order
}

// Total sums the order.
func (o *Order) Total() int {
\treturn db.Sum(o.ID)
}

func Print(o Order) {
\tfmt.Println(o.Total())
}
"""

JAVA = """package com.shop.orders;

import java.util.List;

/** Handles orders. */
public class OrderService extends BaseService implements Auditable, Closeable {
    public OrderService() {}

    public int total(List<Line> lines) {
        return calculator.sum(lines);
    }

    public int total(Line line) { return line.price(); }
}
"""

needs_grammars = pytest.mark.skipif(
    not all(treesitter_available(name) for name in ("javascript", "typescript", "go", "java")),
    reason="tree-sitter grammars are not installed",
)


@needs_grammars
def test_javascript() -> None:
    result = parse_treesitter(JAVASCRIPT, "javascript", "web/orders.js")
    assert result.parser == "tree_sitter" and not result.fallback and not result.warnings
    units = {unit.qualname: unit for unit in result.units}
    assert units["total"].kind == "function" and units["total"].docstring == "Sum the order lines."
    assert units["total"].properties["exported"] is True
    assert (units["total"].start_line, units["total"].end_line) == (5, 7)
    assert units["fetchOrder"].kind == "function"
    assert units["OrderService"].kind == "class"
    assert units["OrderService.refund"].kind == "method"
    assert units["OrderService.refund"].parent == "OrderService"
    refs = {(ref.from_qualname, ref.kind, ref.target) for ref in result.references}
    assert ("<module>", "imports", "express") in refs
    assert ("<module>", "imports", "./db") in refs
    assert ("OrderService", "inherits", "BaseService") in refs
    assert ("OrderService.refund", "calls", "this.audit") in refs
    assert ("OrderService.refund", "calls", "total") in refs
    assert ("fetchOrder", "calls", "db.orders.findById") in refs


@needs_grammars
def test_typescript() -> None:
    result = parse_treesitter(TYPESCRIPT, "typescript")
    kinds = {unit.qualname: unit.properties.get("type_kind") for unit in result.units[1:]}
    assert kinds == {
        "Order": "interface",
        "OrderService": "class",
        "OrderService.constructor": "method",
        "OrderService.find": "method",
        "Status": "enum",
    }
    inherits = {ref.target for ref in result.references_of("inherits")}
    assert inherits == {"Base", "Auditable"}
    assert result.unit("OrderService") is not None
    assert result.unit("OrderService").docstring == "Service doc."  # type: ignore[union-attr]


@needs_grammars
def test_go() -> None:
    result = parse_treesitter(GO, "go", "orders/order.go")
    assert result.properties["package"] == "orders"
    units = {unit.qualname: unit for unit in result.units}
    assert units["orders.Order"].properties["type_kind"] == "struct"
    assert units["orders.Store"].properties["type_kind"] == "interface"
    method = units["orders.Order.Total"]
    assert method.kind == "method" and method.parent == "orders.Order"
    assert method.docstring == "Total sums the order."
    assert units["orders.Print"].kind == "function"
    imports = {(ref.target, ref.properties["alias"]) for ref in result.references_of("imports")}
    assert imports == {("fmt", None), ("example.com/shop/db", "db")}
    calls = {(ref.from_qualname, ref.target) for ref in result.references_of("calls")}
    assert ("orders.Order.Total", "db.Sum") in calls
    assert ("orders.Print", "fmt.Println") in calls


@needs_grammars
def test_java_with_overloads() -> None:
    result = parse_treesitter(JAVA, "java")
    names = [unit.qualname for unit in result.units]
    assert names == [
        "com.shop.orders",
        "com.shop.orders.OrderService",
        "com.shop.orders.OrderService.OrderService",
        "com.shop.orders.OrderService.total",
        "com.shop.orders.OrderService.total#2",
    ]
    assert result.units[1].docstring == "Handles orders."
    inherits = [ref.target for ref in result.references_of("inherits")]
    assert inherits == ["BaseService", "Auditable", "Closeable"]
    assert [ref.target for ref in result.references_of("imports")] == ["java.util.List"]
    calls = {ref.target for ref in result.references_of("calls")}
    assert calls == {"calculator.sum", "line.price"}


@needs_grammars
def test_syntax_errors_give_a_warning_not_an_exception() -> None:
    result = parse_treesitter("function ok() {}\nfunction broken( {\n", "javascript")
    assert result.warnings and "line" in result.warnings[0]
    assert result.unit("ok") is not None


def test_unknown_language_raises_a_clear_error() -> None:
    with pytest.raises(GrammarUnavailableError, match="cobol"):
        parse_treesitter("IDENTIFICATION DIVISION.", "cobol")


def test_regex_outline_is_a_marked_fallback() -> None:
    result = regex_outline(GO, "go", warnings=("no grammar",))
    assert result.fallback is True and result.parser == "regex_outline"
    assert [(unit.kind, unit.name) for unit in result.units] == [
        ("class", "Order"),
        ("class", "Store"),
        ("method", "Total"),
        ("function", "Print"),
    ]
    total = result.units[2]
    assert (total.start_line, total.end_line) == (18, 20)
    assert result.warnings == ("no grammar",)


def test_parse_outline_never_raises() -> None:
    result = parse_outline(JAVA, "java")
    assert result.units and result.parser in ("tree_sitter", "regex_outline")
