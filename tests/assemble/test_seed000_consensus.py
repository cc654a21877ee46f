"""Seed 000's policy file (section 3.3) as written: `multi_agent_consensus` over
`agents: [code_gen, test_gen]`, both roles matched by one policy. The two stay two agents:
each one's last context is its own, and the merge compares two contexts, not one twice."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

import ctxbase
from ctxbase import ContextBase
from ctxbase.assemble.assembler import Assembler
from ctxbase.assemble.policy_loading import PolicySet
from ctxbase.assemble.role_aliases import agent_aliases
from seed000_policy import SEED_POLICY

PROJECT = "ecommerce_backend_v2"
INTENT = "把订单查询接口加上缓存"


@pytest.fixture
def cb(tmp_path: Path) -> Iterator[ContextBase]:
    base = ctxbase.open(str(tmp_path / "x.db"), project=PROJECT, embedder="hash")
    yield base
    base.close()


def _merged(notes: list[str]) -> list[str]:
    line = next(n for n in notes if "multi_agent_consensus: merged" in n)
    return re.findall(r"ctx_[0-9a-f]+", line.split(":", 2)[1])


def test_the_seeds_two_agents_stay_two_agents(cb: ContextBase) -> None:
    doc = cb.upsert_entity("document", "Redis 规范 V3.2", "所有查询接口的缓存必须设置过期时间")
    code = cb.upsert_entity("code", "sql_202", "SELECT * FROM orders WHERE user_id = %s")
    cb.upsert_relationship(doc.id, "MUST_CACHE", code.id, source="human", confidence=0.95)
    assembler = Assembler(cb, SEED_POLICY)
    policies = assembler.policies
    assert isinstance(policies, PolicySet)
    # neither listed agent is the other's alias, though both select ecommerce_api_dev
    aliases = agent_aliases(policies, PROJECT, INTENT, ["code_gen", "test_gen"])
    assert aliases == {"code_gen": ("code_gen",), "test_gen": ("test_gen",)}

    # before any context there is nothing to merge, and the trace says so
    alone = assembler.assemble(agent_role="test_gen", user_intent=INTENT)
    assert any("no context assembled for code_gen, test_gen" in n for n in alone.trace["notes"])
    # each agent's own context (the article's step 2 names the strategy), then the merge
    coder = assembler.assemble(
        agent_role="code_gen", user_intent=INTENT, strategy="referenced_code_first"
    )
    tester = assembler.assemble(
        agent_role="test_gen", user_intent=INTENT, strategy="referenced_code_first"
    )
    assert coder.context_id != tester.context_id
    assert {doc.id, code.id} <= set(coder.included_ids) & set(tester.included_ids)
    merged = assembler.assemble(agent_role="code_gen", user_intent=INTENT)
    assert merged.policy == "ecommerce_api_dev" and "multi_agent_consensus" in merged.strategies
    assert _merged(merged.trace["notes"]) == [coder.context_id, tester.context_id]
    label = f"code_gen ({coder.context_id}), test_gen ({tester.context_id})"
    for eid in (doc.id, code.id):
        reasons = next(c for c in merged.trace["candidates"] if c["id"] == eid)["reasons"]
        assert any(label in r for r in reasons), reasons
    assert (doc.id, "MUST_CACHE", code.id) in {
        (r["from"], r["type"], r["to"]) for r in merged.relationships
    }
    assert not any("count as" in n for n in merged.trace["notes"])
