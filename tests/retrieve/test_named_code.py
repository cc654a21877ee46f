"""Which names of code a query says (retrieve/named_code.py): identifiers, files and tables
select code; kind words, articles and demonstratives, in English or Chinese, name nothing."""

from __future__ import annotations

import pytest

from ctxbase.retrieve.named_code import code_names, names_code


@pytest.mark.parametrize(
    "query",
    [
        "the function",
        "that function",
        "the previous function",
        "the function is slow",
        "function that returns the total",
        "that table",
        "that table has a lock",
        "that query",
        "the code",
        "这个函数",
        "这个函数有问题",
        "那个表",
        "那张表的索引",
        "上次那个SQL",
        "刚才那段代码",
        "data from yesterday",
        "e.g. the handler",
        "redis 的配置",
    ],
)
def test_kind_words_alone_name_nothing(query: str) -> None:
    assert code_names(query) == ()
    assert not names_code(query)


@pytest.mark.parametrize(
    ("query", "names"),
    [
        ("fix compute_discount", ("compute_discount",)),
        ("renderCart is broken", ("renderCart",)),
        ("why does billing.compute_discount round down", ("billing.compute_discount",)),
        ("look at src/app/cart.ts and billing.py", ("src/app/cart.ts", "billing.py")),
        ("the orders table", ("orders",)),
        ("table orders has a lock", ("orders",)),
        ("call render() twice", ("render",)),
        ("`orders` is slow", ("orders",)),
        ("SELECT * FROM orders JOIN customers", ("orders", "customers")),
        ("the function render", ("render",)),
        ("v2_orders 慢了", ("v2_orders",)),
        ("这个函数 compute_discount 有问题", ("compute_discount",)),
        ("orders 表的索引", ("orders",)),
        ("修改 orders表", ("orders",)),
        ("表 customers 加一列", ("customers",)),
        ("函数 render 报错", ("render",)),
        (
            "把 `apply_coupon` 和 cart.py 里的 renderCart 对一下",
            ("apply_coupon", "cart.py", "renderCart"),
        ),
    ],
)
def test_names_are_found_in_order_each_once(query: str, names: tuple[str, ...]) -> None:
    assert code_names(query) == names
    assert names_code(query)


def test_a_name_said_twice_is_one_name() -> None:
    assert code_names("compute_discount calls compute_discount") == ("compute_discount",)
