"""referenced_code_first selects the code an intent names by an identifier, a file or a
table, never every entity of a kind an intent only names by a kind word ("that function",
"那个函数"): on every backend."""

from __future__ import annotations

from ctxbase import ContextBase

CODE = {
    "renderCart": "function renderCart(items) {\n  return items.length;\n}",
    "showTotal": "function showTotal(total) {\n  console.log(total);\n}",
    "applyCoupon": "function applyCoupon(cart, code) {\n  return cart;\n}",
}


def _picked(cb: ContextBase, intent: str) -> tuple[list[str], list[str]]:
    ctx = cb.assemble_context(agent_role="coder", user_intent=intent)
    picked = [
        c["id"] for c in ctx.trace["candidates"] if "referenced_code_first" in c["strategies"]
    ]
    return picked, list(ctx.trace["notes"])


def test_a_kind_word_alone_selects_no_code(cb: ContextBase) -> None:
    ids = {n: cb.upsert_entity("code", n, text, id=f"code_{n}").id for n, text in CODE.items()}
    cb.upsert_entity("sql", "orders by day", "SELECT day, count(*) FROM orders GROUP BY day")
    for intent in ("that function", "the previous function", "那个函数", "上次那个SQL"):
        picked, notes = _picked(cb, intent)
        assert picked == [], intent
        assert "referenced_code_first: nothing referenced or named; no code added" in notes
    picked, _ = _picked(cb, "that function renderCart")
    assert picked[:1] == [ids["renderCart"]]
    assert ids["showTotal"] not in picked and ids["applyCoupon"] not in picked
    picked, _ = _picked(cb, "那个函数 applyCoupon 有问题")
    assert picked[:1] == [ids["applyCoupon"]]
