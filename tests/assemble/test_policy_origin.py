"""Seed 000's policy file with its storage settings loads, and every assembly's trace says
where its policy came from: the shipped presets, a file, or policies given inline."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import yaml

import ctxbase
from ctxbase.assemble.policy import DEFAULT_POLICIES_PATH
from ctxbase.assemble.policy_issues import PolicyError
from ctxbase.assemble.policy_loading import PolicyFile, load_policies, parse_policies
from seed000_policy import SEED_POLICY

# Section 3.3's context_policy.yaml as the article prints it, with the storage settings of its
# client (section 3.2, step one) written beside the policies, as a deployment keeps them.
STORAGE = """\
nebula_config: {address: "nebula:9669"}
milvus_config: {uri: "http://milvus:19530"}
"""
PROJECT = "ecommerce_backend_v2"
SHIPPED = f"{DEFAULT_POLICIES_PATH} (shipped presets)"


def test_the_seeds_storage_settings_load_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="ctxbase.assemble"):
        policies = parse_policies(STORAGE + SEED_POLICY)
    assert [p.name for p in policies.policies] == ["ecommerce_api_dev"]
    assert policies.default.name == "default_fallback"
    chosen = policies.select(PROJECT, "test_gen", "为刚写的分页接口写测试用例")
    assert chosen.strategy_names[0] == "multi_agent_consensus"  # the others by their triggers
    said = [r.getMessage() for r in caplog.records]
    for key in ("nebula_config", "milvus_config"):
        (line,) = [m for m in said if f": {key} is ignored" in m]
        assert "its own store" in line and "inline YAML" in line
    # written inside a policy, the key is named by its YAML path
    caplog.clear()
    inside = SEED_POLICY.replace(
        "    strategy: multi_agent_consensus\n",
        '    strategy: multi_agent_consensus\n    milvus_config: {uri: "http://m:19530"}\n',
    )
    with caplog.at_level(logging.WARNING, logger="ctxbase.assemble"):
        assert parse_policies(inside).policies[0].name == "ecommerce_api_dev"
    assert any("policies[0].milvus_config is ignored" in r.getMessage() for r in caplog.records)
    # any other unknown key is still refused
    with pytest.raises(PolicyError, match="redis_config"):
        parse_policies("redis_config: {}\n" + SEED_POLICY)


def test_the_seeds_file_opens_a_base(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "context_policy.yaml"
    path.write_text(STORAGE + SEED_POLICY, encoding="utf-8")
    db = str(tmp_path / "x.db")
    with (
        caplog.at_level(logging.WARNING, logger="ctxbase.assemble"),
        ctxbase.open(db, project=PROJECT, policies=str(path)) as cb,
    ):
        ctx = cb.assemble_context(agent_role="code_gen", user_intent="把订单查询接口加上缓存")
    assert ctx.policy == "ecommerce_api_dev"
    said = [r.getMessage() for r in caplog.records]
    assert any(str(path) in m and "nebula_config" in m for m in said)


def _origin(cb: ctxbase.ContextBase, role: str) -> tuple[str, str, str]:
    trace = cb.assemble_context(agent_role=role, user_intent="写测试").trace
    stored = cb.get_trace(trace["context_id"])
    assert stored["policy_source"] == trace["policy_source"]  # kept with the trace
    return trace["policy"], trace["policy_source"], trace["policy_origin"]


@pytest.mark.parametrize("given", ["file", "watched", "text", "mapping", "loaded"])
def test_the_trace_says_where_the_policy_came_from(tmp_path: Path, given: str) -> None:
    path = tmp_path / "context_policy.yaml"
    path.write_text(SEED_POLICY, encoding="utf-8")
    policies: object = {
        "file": str(path),
        "watched": PolicyFile(path),
        "text": SEED_POLICY,
        "mapping": yaml.safe_load(SEED_POLICY),
        "loaded": load_policies(path),
    }[given]
    own, kind = {
        "file": (str(path), "file"),
        "watched": (str(path), "file"),
        "loaded": (str(path), "file"),
        "text": ("inline YAML", "inline"),
        "mapping": ("inline mapping", "inline"),
    }[given]
    mine = f"{own} (over the shipped presets)"
    with ctxbase.open(str(tmp_path / "x.db"), project=PROJECT, policies=policies) as cb:
        assert _origin(cb, "code_gen") == ("ecommerce_api_dev", mine, kind)
        # a role only a shipped preset names: the preset, not the file
        assert _origin(cb, "planner") == ("planner", SHIPPED, "preset")
        # no policy for the role: the file's own default, not the presets'
        assert _origin(cb, "nobody") == ("default_fallback", mine, kind)


def test_without_a_default_of_its_own_the_presets_default_is_named(tmp_path: Path) -> None:
    text = "policies:\n  - name: sql_writer\n    match: {agent_roles: [sql_writer]}\n"
    with ctxbase.open(str(tmp_path / "x.db"), project=PROJECT, policies=text) as cb:
        assert _origin(cb, "sql_writer")[1:] == ("inline YAML (over the shipped presets)", "inline")
        assert _origin(cb, "nobody") == ("default", SHIPPED, "preset")
    with ctxbase.open(str(tmp_path / "y.db"), project=PROJECT) as cb:  # no policies given
        assert _origin(cb, "coder") == ("coder", SHIPPED, "preset")
        assert _origin(cb, "nobody") == ("default", SHIPPED, "preset")
        forced = cb.assemble_context(
            agent_role="coder", user_intent="x", strategy="semantic_recall"
        ).trace
        assert (forced["policy_source"], forced["policy_origin"]) == (SHIPPED, "preset")


def test_the_seeds_client_settings_open_a_base(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Section 3.2, step one: PowerContextClient(project_id=..., nebula_config=...,
    milvus_config=...) as ctxbase.open."""
    with (
        caplog.at_level(logging.WARNING, logger="ctxbase"),
        ctxbase.open(
            str(tmp_path / "x.db"),
            project_id="ecommerce_backend_v2",
            nebula_config={"address": "nebula:9669"},
            milvus_config={"uri": "http://milvus:19530"},
        ) as cb,
    ):
        assert cb.project == "ecommerce_backend_v2"
    said = [r.getMessage() for r in caplog.records]
    for key in ("nebula_config", "milvus_config"):
        assert any(m.startswith(f"ctxbase.open: {key} is ignored") for m in said), said
    with pytest.raises(TypeError):  # any other unknown keyword is still refused
        ctxbase.open(str(tmp_path / "y.db"), redis_config={})
