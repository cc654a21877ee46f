"""Seed 003's budget split is the default: 10 % system, 20 % state, 10 % task, 40 % history,
20 % kept for the latest input (never cut); "memory_heavy" is a named profile."""

from __future__ import annotations

import re

import pytest

from ctxbase import ContextBase
from ctxbase.assemble.assembler import Assembler
from ctxbase.assemble.budget import BudgetItem, allocate_budget, layer_quota
from ctxbase.assemble.policy import LayerShares, PolicyError
from ctxbase.assemble.policy_loading import parse_policies

_TOKEN = re.compile(r"\S+")


class Words:
    def count(self, text: str) -> int:
        return len(_TOKEN.findall(text))

    def truncate(self, text: str, max_tokens: int) -> str:
        return " ".join(_TOKEN.findall(text)[: max(0, max_tokens)])


def _items(layer: str, n: int, size: int) -> list[BudgetItem]:
    return [
        BudgetItem(f"{layer}{i}", " ".join([f"{layer}{i}"] * size), 1.0 - i / 100) for i in range(n)
    ]


def test_the_article_split_decides_the_quotas() -> None:
    shares = LayerShares()
    items = {name: _items(name, 100, 10) for name in ("system", "state", "task", "history")}
    alloc = allocate_budget(
        1000,
        shares.as_mapping(),
        Words(),
        items,
        latest_input=" ".join(["q"] * 50),
        latest_share=shares.latest,
    )
    quotas = {name: layer.quota for name, layer in alloc.layers.items()}
    # shares of the whole budget while the input (50) fits in its 20 % (200)
    assert quotas == {"system": 100, "state": 200, "task": 100, "memory": 0, "history": 400}
    # the input's unused reserve is not lost: the pool hands it out, to the facts first
    assert alloc.total_tokens == 1000 and alloc.layers["state"].tokens > 200
    # a longer input is never cut; the layers shrink in proportion
    assert layer_quota(0.4, 0.2, 1000, 300) == 350
    assert layer_quota(0.4, 0.0, 1000, 300) == 280  # no reserve: 40 % of what is left


def test_memory_heavy_is_a_named_profile() -> None:
    policy = parse_policies("policies:\n  - name: r\n    budget: memory_heavy\n").policies[0]
    assert (policy.budget.memory, policy.budget.history, policy.budget.latest) == (0.4, 0.2, 0.0)
    with pytest.raises(PolicyError, match=r"unknown budget profile 'heavy'.*memory_heavy"):
        parse_policies("policies:\n  - name: r\n    budget: heavy\n")
    # a file whose shares fill the budget keeps working: nothing is reserved for the input
    full = parse_policies(
        "policies:\n  - name: r\n    budget: {system: 0.1, state: 0.2, task: 0.1, "
        "memory: 0.4, history: 0.2}\n"
    )
    assert full.policies[0].budget.latest == 0.0


def test_default_assembly_gives_history_forty_percent(cb: ContextBase) -> None:
    for i in range(40):
        cb.record(
            "user_message" if i % 2 == 0 else "assistant_message",
            session_id="s1",
            text=f"第{i}轮：订单查询接口的缓存方案讨论，过期时间和分页参数都要记录下来 {i}",
        )
    for i in range(10):
        cb.upsert_entity("document", f"规范{i}", "订单查询接口缓存规范：过期时间必须设置 " * 20)
    ctx = Assembler(cb).assemble(
        agent_role="assistant", user_intent="缓存怎么设置", session_id="s1", max_tokens=2000
    )
    layers = ctx.trace["layers"]
    assert layers["memory"]["quota"] == 0  # memory lives on what the others leave
    assert 0.37 * 2000 <= layers["history"]["quota"] <= 0.4 * 2000
    assert layers["history"]["tokens"] > 0.2 * 2000  # more than the old 20 % could hold
    heavy = parse_policies(
        "policies:\n  - {name: d, match: {default: true}, budget: memory_heavy}\n"
    )
    ctx = Assembler(cb, heavy).assemble(
        agent_role="assistant", user_intent="缓存怎么设置", session_id="s1", max_tokens=2000
    )
    layers = ctx.trace["layers"]
    assert layers["memory"]["quota"] >= 0.37 * 2000 and layers["history"]["quota"] < 0.2 * 2000
