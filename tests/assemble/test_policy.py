from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest
from pydantic import ValidationError

from ctxbase.assemble.policy import (
    DEFAULT_POLICIES_PATH,
    ONE_STRATEGY_COMPANIONS,
    LayerShares,
    MultiAgentConsensus,
    Policy,
    PolicyError,
)
from ctxbase.assemble.policy_loading import (
    PolicyFile,
    load_default_policies,
    load_policies,
    parse_policies,
)

SMALL = """
version: 1
policies:
  - name: sql_fix
    priority: 20
    match:
      project_id: "shop_*"
      agent_roles: [coder]
      intent_patterns: ["(SQL|查询).*(分页|limit)"]
    strategies:
      - {name: referenced_code_first, max_items: 2}
  - name: shop_coder
    priority: 5
    match: {project_id: "shop_*", agent_roles: [coder]}
    strategies:
      - {name: recent_window, max_messages: 4}
  - name: any_coder
    priority: 5
    match: {agent_roles: [coder]}
  - name: fallback
    match: {default: true}
    strategies:
      - {name: project_scope_fallback, fallback_depth: 7}
"""


def test_presets_cover_the_roles() -> None:
    policies = load_default_policies()
    for role in ("planner", "coder", "tester", "reviewer", "executor"):
        selection = policies.select("proj", role, "do the thing")
        assert selection.policy.name == role
    assert policies.default.name == "default"
    assert policies.select("proj", "unknown_role", "hi").policy.name == "default"
    assert DEFAULT_POLICIES_PATH.is_file()


def test_preset_views_follow_roles() -> None:
    policies = load_default_policies()
    assert policies.select("p", "planner", "x").policy.view == "global"
    assert policies.select("p", "executor", "x").policy.view == "subtask"


def test_reference_words_trigger_referenced_code_first() -> None:
    policies = load_default_policies()
    chinese = policies.select("p", "coder", "把刚才生成的 SQL 改成支持分页")
    assert "referenced_code_first" in chinese.strategy_names
    assert "project_scope_fallback" not in chinese.strategy_names
    assert any("刚才" in reason for reason in chinese.reasons)
    english = policies.select("p", "coder", "Change that SQL to use pagination")
    assert "referenced_code_first" in english.strategy_names
    plain = policies.select("p", "coder", "write an order API")
    assert "referenced_code_first" not in plain.strategy_names
    assert "project_scope_fallback" in plain.strategy_names


def test_error_words_and_flag_trigger_repair() -> None:
    policies = load_default_policies()
    assert "error_driven_repair" in policies.select("p", "coder", "缓存没生效").strategy_names
    assert "error_driven_repair" not in policies.select("p", "coder", "加缓存").strategy_names
    flagged = policies.select("p", "coder", "加缓存", has_error=True)
    assert "error_driven_repair" in flagged.strategy_names


def test_consensus_triggers_for_group_members() -> None:
    policies = load_default_policies()
    tester = policies.select("p", "tester", "为分页接口写测试")
    assert "multi_agent_consensus" in tester.strategy_names
    consensus = tester.policy.strategy("multi_agent_consensus")
    assert isinstance(consensus, MultiAgentConsensus)
    assert consensus.consensus_threshold == 0.8


def test_priority_then_specificity_then_order() -> None:
    policies = parse_policies(SMALL.replace("version: 1", "version: 1\ninherit_presets: false"))
    assert policies.select("shop_1", "coder", "SQL 查询加分页").policy.name == "sql_fix"
    # same priority: the project-specific policy wins over the any-project one
    chosen = policies.select("shop_1", "coder", "write tests")
    assert chosen.policy.name == "shop_coder"
    assert any("any_coder" in r for r in chosen.reasons)
    assert policies.select("blog", "coder", "x").policy.name == "any_coder"
    fallback = policies.select("blog", "tester", "x")
    assert fallback.policy.name == "fallback"
    assert "no policy matched" in fallback.reasons[0]
    assert fallback.strategy_names == ("project_scope_fallback",)


ONE_ROLE = """
version: 1
policies:
  - name: sql_writer
    match: {agent_roles: [sql_writer]}
    strategies:
      - {name: referenced_code_first, max_items: 3}
"""


def test_a_user_file_is_layered_over_the_shipped_presets() -> None:
    layered = parse_policies(ONE_ROLE)
    mine = layered.select("shop", "sql_writer", "分页 SQL")
    assert mine.policy.name == "sql_writer"
    assert mine.source == "inline YAML (over the shipped presets)"  # the user's text
    shipped = f"{DEFAULT_POLICIES_PATH} (shipped presets)"
    # the README's roles keep their shipped policies: the file only added one
    for role, preset in (("code_gen", "coder"), ("test_gen", "tester"), ("planner", "planner")):
        chosen = layered.select("shop", role, "把上次那个SQL改成游标分页")
        assert chosen.policy.name == preset
        assert "shipped preset" in chosen.reasons[0]
        assert chosen.source == shipped  # where the trace header says it comes from
    fallback = layered.select("shop", "unknown", "x")
    assert fallback.policy.name == "default"  # the shipped one
    assert fallback.source == shipped
    # the file's policies are tried first: one with no role list takes every role
    anyone = parse_policies(ONE_ROLE.replace("match: {agent_roles: [sql_writer]}", "match: {}"))
    assert anyone.select("shop", "code_gen", "x").policy.name == "sql_writer"
    # a file's policy named as a preset replaces it; its own default is the default
    own = parse_policies(
        ONE_ROLE.replace("name: sql_writer", "name: coder")
        + "  - name: mine\n    match: {default: true}\n"
    )
    assert own.select("shop", "code_gen", "x").policy.name == "mine"
    assert own.select("shop", "tester", "x").policy.name == "tester"
    # inherit_presets: false replaces the presets; a file without a default policy of its
    # own falls to the shipped default (as the README says), named as the presets'
    alone = parse_policies(ONE_ROLE.replace("version: 1", "version: 1\ninherit_presets: false"))
    chosen = alone.select("shop", "code_gen", "x")
    assert chosen.policy.name == "default" and "no policy matched" in chosen.reasons[0]
    assert (chosen.source, chosen.origin) == (shipped, "preset")
    assert chosen.policy.strategies == load_default_policies().default.strategies
    assert alone.select("shop", "sql_writer", "x").source == "inline YAML"


def test_reasons_explain_the_match() -> None:
    selection = parse_policies(SMALL).select("shop_9", "coder", "那个 SQL 查询要加 limit")
    first = selection.reasons[0]
    assert "sql_fix" in first and "shop_*" in first and "coder" in first and "intent" in first


def test_role_match_ignores_case() -> None:
    assert parse_policies(SMALL).select("x", "Coder", "y").policy.name == "any_coder"


def test_disabled_strategy_never_triggers() -> None:
    text = """
policies:
  - name: p
    strategies:
      - {name: recent_window, enabled: false}
      - {name: semantic_recall}
"""
    selection = parse_policies(text).select("x", "y", "find docs")
    assert selection.strategy_names == ("semantic_recall",)
    assert "recent_window: disabled" in selection.reasons


def test_short_form_from_the_seed_document() -> None:
    text = """
policies:
  - name: ecommerce_api_dev
    match: {project_id: ecommerce_backend_v2, agent_roles: [code_gen, test_gen]}
    strategy: multi_agent_consensus
    parameters: {agents: [code_gen, test_gen], consensus_threshold: 0.8}
  - name: default_fallback
    match: {default: true}
    strategy: project_scope_fallback
    parameters: {fallback_depth: 5}
"""
    policies = parse_policies(text)
    selection = policies.select("ecommerce_backend_v2", "test_gen", "写测试")
    assert selection.policy.name == "ecommerce_api_dev"
    # the named strategy leads; the others run by their own triggers, at their defaults
    names = [s.name for s in selection.policy.strategies]
    assert names == ["multi_agent_consensus", *ONE_STRATEGY_COMPANIONS]
    assert selection.strategy_names[0] == "multi_agent_consensus"
    assert {"semantic_recall", "recent_window"} <= set(selection.strategy_names)
    assert "referenced_code_first: not triggered" in selection.reasons
    assert "error_driven_repair: not triggered" in selection.reasons
    after_error = policies.select(
        "ecommerce_backend_v2", "code_gen", "刚才那段代码", has_error=True
    )
    assert {"referenced_code_first", "error_driven_repair"} <= set(after_error.strategy_names)
    fallback = [s.name for s in policies.default.strategies]
    assert fallback[0] == "project_scope_fallback" and fallback.count("project_scope_fallback") == 1
    assert policies.default.strategies[0].model_dump()["fallback_depth"] == 5
    # the list form is exact
    exact = parse_policies(
        text.replace(
            "strategy: multi_agent_consensus\n    parameters: {agents: [code_gen, test_gen], "
            "consensus_threshold: 0.8}",
            "strategies: [{name: multi_agent_consensus, agents: [code_gen, test_gen]}]",
        )
    )
    assert exact.select("ecommerce_backend_v2", "test_gen", "写测试").strategy_names == (
        "multi_agent_consensus",
    )


def test_relation_thresholds_merge_with_defaults() -> None:
    policies = parse_policies(
        "policies:\n  - name: p\n    relation_thresholds: {REFERENCES: 0.9, MUST_CACHE: 0.5}\n",
        presets=False,
    )
    assert policies.default.name == "builtin_default"  # the file has no default policy
    chosen = policies.policies[0]
    assert chosen.threshold_for("REFERENCES") == 0.9
    assert chosen.threshold_for("MODIFIES") == 0.7
    assert chosen.threshold_for("MUST_CACHE") == 0.5
    assert chosen.threshold_for("UNSEEN") == chosen.default_relation_threshold


def test_default_budget_shares_follow_the_layers() -> None:
    # seed 003's split: 10 % system, 20 % state, 10 % task, 40 % history, 20 % latest input
    shares = LayerShares().as_mapping()
    assert shares == {"system": 0.1, "state": 0.2, "task": 0.1, "memory": 0.0, "history": 0.4}
    assert LayerShares().latest == 0.2
    with pytest.raises(ValidationError, match=r"must not exceed 1\.0"):
        LayerShares(memory=0.9)


def test_models_are_frozen() -> None:
    policy = Policy(name="p")
    with pytest.raises(ValidationError):
        policy.priority = 3


def _problems(text: str) -> list[str]:
    with pytest.raises(PolicyError) as info:
        parse_policies(text, source="team.yaml")
    assert str(info.value).startswith("team.yaml: ")
    return [str(issue) for issue in info.value.issues]


def test_out_of_range_value_names_the_yaml_path() -> None:
    problems = _problems(
        """
policies:
  - name: a
  - name: b
  - name: c
    strategies:
      - {name: multi_agent_consensus, agents: [x, y], consensus_threshold: 1.5}
"""
    )
    assert len(problems) == 1
    assert problems[0].startswith("policies[2].strategies[0].consensus_threshold: ")
    assert "1.5" in problems[0]


def test_unknown_strategy_lists_valid_ones_and_suggests() -> None:
    (problem,) = _problems("policies:\n  - name: a\n    strategies: [{name: semantic_recal}]\n")
    assert problem.startswith("policies[0].strategies[0]: unknown strategy 'semantic_recal'")
    assert "did you mean 'semantic_recall'" in problem
    assert "multi_agent_consensus" in problem


def test_the_short_form_is_named_as_the_file_writes_it() -> None:
    # `strategy:` + `parameters:` (seed 000's form) is a one-item `strategies` list inside;
    # its problems are named at the keys the file holds
    (name,) = _problems("policies:\n  - name: a\n    strategy: referenced_code_frist\n")
    assert name.startswith("policies[0].strategy: unknown strategy 'referenced_code_frist'")
    assert "did you mean 'referenced_code_first'" in name
    short = "policies:\n  - name: a\n    strategy: project_scope_fallback\n"
    (param,) = _problems(short + "    parameters: {fallback_depth: -5}\n")
    assert param.startswith("policies[0].parameters.fallback_depth: ") and "-5" in param
    (beside,) = _problems(short + "    fallback_depth: -5\n")
    assert beside.startswith("policies[0].fallback_depth: ") and "-5" in beside


def test_typo_in_key_suggests_the_closest() -> None:
    problems = _problems(
        """
policies:
  - name: a
    prority: 3
    strategies: [{name: recent_window, max_mesages: 3}]
    match: {agent_role: [coder]}
"""
    )
    joined = "\n".join(problems)
    assert "policies[0].prority: unknown key 'prority' (did you mean 'priority'?)" in joined
    assert "policies[0].strategies[0].max_mesages: unknown key" in joined
    assert "did you mean 'max_messages'" in joined
    assert "policies[0].match.agent_role: unknown key" in joined
    assert "did you mean 'agent_roles'" in joined


def test_a_typo_far_from_every_whole_key_is_matched_by_its_words() -> None:
    problems = _problems(
        """
policies:
  - name: a
    match: {rolee: [coder]}
  - name: b
    rolee: [coder]
  - name: c
    match: {default: true}
    budget: {memroy: 0.3}
"""
    )
    # "rolee" is too far from "agent_roles" as a whole, close to its word "roles"
    assert problems[0].startswith(
        "policies[0].match.rolee: unknown key 'rolee' (did you mean 'agent_roles'?); valid keys: "
    )
    # written a level too high: the key it belongs under is named
    hint = "(did you mean 'match.agent_roles'?)"
    assert problems[1].startswith(f"policies[1].rolee: unknown key 'rolee' {hint}")
    hint = "(did you mean 'memory'?)"
    assert problems[2].startswith(f"policies[2].budget.memroy: unknown key 'memroy' {hint}")


def test_a_key_like_no_valid_one_gets_no_guess() -> None:
    (problem,) = _problems("policies:\n  - name: a\n    zzz: 1\n")
    assert problem.startswith("policies[0].zzz: unknown key 'zzz'; valid keys: ")


def test_a_budget_over_one_names_the_defaults_it_counts() -> None:
    """`{system: 0.5, memory: 0.9}` is 1.4 as written: the 2.1 of the error is explained by
    the default shares of the layers left out, each named."""
    (problem,) = _problems("policies:\n  - name: a\n    budget: {system: 0.5, memory: 0.9}\n")
    assert problem.startswith("policies[0].budget: ")
    assert "layer shares add up to 2.100: system 0.5 + memory 0.9 = 1.400 as written" in problem
    assert (
        "plus the defaults of the layers not written: state 0.2 + task 0.1 + history 0.4 = 0.700"
        in problem
    )
    assert "write 0 for a layer that should have no share" in problem
    # all five written: nothing else counted, nothing else named
    (problem,) = _problems(
        "policies:\n  - name: a\n    budget: "
        "{system: 0.5, state: 0.2, task: 0.1, memory: 0.3, history: 0.4, latest: 0}\n"
    )
    written = "system 0.5 + state 0.2 + task 0.1 + memory 0.3 + history 0.4"
    assert f"add up to 1.500: {written} = 1.500 as written" in problem
    assert "defaults" not in problem and "latest input" not in problem
    # a written reserve for the input is named as such
    (problem,) = _problems("policies:\n  - name: a\n    budget: {history: 0.5, latest: 0.3}\n")
    assert "0.3 kept for the latest input (`latest`)" in problem


def test_other_errors() -> None:
    assert (
        "invalid regular expression"
        in _problems("policies:\n  - name: a\n    match: {intent_patterns: ['(']}\n")[0]
    )
    assert (
        "must not exceed 1.0"
        in _problems("policies:\n  - name: a\n    budget: {memory: 0.9, history: 0.5}\n")[0]
    )
    assert (
        "only one policy may be the default"
        in _problems(
            "policies:\n  - {name: a, match: {default: true}}\n"
            "  - {name: b, match: {default: true}}\n"
        )[0]
    )
    assert "unique" in _problems("policies:\n  - name: a\n  - name: a\n")[0]
    assert "at least one" in _problems("policies: []\n")[0]
    assert (
        "UPPER_SNAKE_CASE"
        in _problems("policies:\n  - name: a\n    relation_thresholds: {references: 0.3}\n")[0]
    )
    assert (
        "more than once"
        in _problems(
            "policies:\n  - name: a\n"
            "    strategies: [{name: recent_window}, {name: recent_window}]\n"
        )[0]
    )


def test_the_fresh_users_three_mistakes_get_paths_hints_and_valid_values() -> None:
    (preset,) = _problems(
        "policies:\n  - name: a\n    strategies: [{name: semantic_recall, search_preset: hybird}]\n"
    )
    assert preset.startswith("policies[0].strategies[0].search_preset: unknown search preset")
    assert "did you mean 'hybrid'?" in preset and "valid presets: default, hybrid" in preset
    # a single string where a list is expected is a list of one; a bare strategy name is
    # that strategy with its defaults
    policies = parse_policies(
        "policies:\n  - name: a\n    match: {agent_roles: sql_writer}\n"
        "    strategies: [recent_window, semantic_recall]\n",
        presets=False,
    )
    (policy,) = policies.policies
    assert policy.match.agent_roles == ("sql_writer",)
    assert [s.name for s in policy.strategies] == ["recent_window", "semantic_recall"]
    (bare,) = _problems("policies:\n  - name: a\n    strategies: [recent_windw]\n")
    assert bare.startswith("policies[0].strategies[0]: unknown strategy 'recent_windw'")
    assert "did you mean 'recent_window'?" in bare and "valid strategies: " in bare
    # what still cannot be read says what shape it wants, in the file's words
    (match,) = _problems("policies:\n  - name: a\n    match: coder\n")
    assert match == (
        "policies[0].match: must be a mapping (key: value) with the keys agent_roles, default,"
        " intent_keywords, intent_patterns, project_id (got 'coder')"
    )
    (roles,) = _problems("policies:\n  - name: a\n    match: {agent_roles: {a: 1}}\n")
    assert roles == "policies[0].match.agent_roles: must be a list, such as [a, b]"
    for problem in (preset, bare, match, roles):
        assert "Input should be" not in problem and "valid dictionary" not in problem


def test_yaml_syntax_error_gives_line() -> None:
    (problem,) = _problems("policies:\n  - name: [unclosed\n")
    assert "line " in problem and "invalid YAML" in problem
    assert "empty" in _problems("")[0]
    assert "mapping" in _problems("- just a list\n")[0]


def test_load_from_path_and_text(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(SMALL, encoding="utf-8")
    assert load_policies(path).source == f"{path} (over the shipped presets)"
    assert load_policies(str(path)).policies[0].name == "sql_fix"
    assert load_policies(SMALL).source == "inline YAML (over the shipped presets)"
    with pytest.raises(PolicyError, match=r"missing\.yaml"):
        load_policies(str(tmp_path / "missing.yaml"))
    # one line that is not YAML policies is a path: one with a typo, no suffix or a
    # stray space is not found, not read as YAML text
    for given in (str(tmp_path / "policies"), f"{path} ", ""):
        with pytest.raises(PolicyError) as info:
            load_policies(given)
        assert str(info.value) == f"{given!r}: no such policy file (nor YAML policies text)"


def test_a_yes_or_no_where_a_number_belongs_is_refused() -> None:
    """YAML reads `on` and `yes` as true, which pydantic alone takes as 1: `top_k: on` was
    a top 1 without a word."""
    head = "policies:\n  - name: a\n    match: {default: true}\n"
    assert _problems(head + "    max_tokens: yes\n") == [
        "policies[0].max_tokens: must be a number (got true: YAML reads yes, on and true,"
        " no, off and false as a yes/no value)"
    ]
    (problem,) = _problems(head + "    strategies:\n      - {name: semantic_recall, top_k: on}\n")
    assert problem.startswith("policies[0].strategies[0].top_k: must be a number (got true")
    assert parse_policies(head + "    max_tokens: 500\n").default.name == "a"  # default: true


def test_a_key_written_twice_is_refused_with_its_line() -> None:
    """YAML alone keeps the last of two equal keys without a word; a policy file says
    where the second is."""
    twice = (
        "policies:\n  - name: a\n    match: {agent_roles: [other]}\n"
        "    max_tokens: 400\n    match: {default: true}\n"
    )
    (problem,) = _problems(twice)
    assert problem == (
        "line 5, column 5: invalid YAML: found the key 'match' twice"
        " (the second would replace the first)"
    )
    assert load_policies(twice.replace("    match: {default: true}\n", "")).policies


def _bump(path: Path, text: str, step: int) -> None:
    path.write_text(text, encoding="utf-8")
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + step * 1_000_000_000))


def test_policy_file_reloads_and_keeps_last_good(tmp_path: Path) -> None:
    path = tmp_path / "policies.yaml"
    path.write_text(SMALL, encoding="utf-8")
    watched = PolicyFile(path)
    assert watched.current().policies[0].name == "sql_fix"
    assert watched.reload_count == 1
    assert not watched.reload_if_changed()

    _bump(path, SMALL.replace("sql_fix", "sql_fix_v2"), 1)
    assert watched.select("shop_1", "coder", "SQL 分页").policy.name == "sql_fix_v2"
    assert watched.last_error is None

    _bump(path, SMALL.replace("max_items: 2", "max_items: 0"), 2)
    current = watched.current()
    assert current.policies[0].name == "sql_fix_v2"  # last good version kept
    assert isinstance(watched.last_error, PolicyError)
    assert "policies[0].strategies[0].max_items" in str(watched.last_error)

    path.unlink()
    assert watched.current().policies[0].name == "sql_fix_v2"
    assert "cannot read" in str(watched.last_error)

    _bump(path, SMALL, 3)
    assert watched.current().policies[0].name == "sql_fix"
    assert watched.last_error is None


def test_a_broken_or_deleted_policy_file_is_logged_once_per_change(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "policies.yaml"
    path.write_text(SMALL, encoding="utf-8")
    watched = PolicyFile(path)
    assert watched.stale_note() is None and watched.status()["ok"] is True

    def warnings() -> list[str]:
        return [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]

    caplog.set_level(logging.WARNING, logger="ctxbase.assemble")
    _bump(path, SMALL.replace("max_items: 2", "max_items: 0"), 1)
    for _ in range(3):
        watched.current()
    (logged,) = warnings()
    assert str(path) in logged and "policies[0].strategies[0].max_items" in logged
    note = watched.stale_note()
    assert note is not None and str(path) in note and "max_items" in note
    status = watched.status()
    assert status["ok"] is False and "max_items" in status["error"]

    path.unlink()
    for _ in range(3):
        watched.current()
    assert len(warnings()) == 2 and "cannot read" in warnings()[1]

    _bump(path, SMALL, 2)
    watched.current()
    assert len(warnings()) == 3 and "loaded again" in warnings()[2]
    assert watched.stale_note() is None and watched.status()["ok"] is True


def test_policy_file_without_good_version(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("policies: nope\n", encoding="utf-8")
    with pytest.raises(PolicyError):
        PolicyFile(path)
    fallback = load_default_policies()
    watched = PolicyFile(path, fallback=fallback)
    assert watched.current() is fallback
    assert watched.last_error is not None


def test_strategy_parameters_beside_the_strategy_seed_000_table() -> None:
    # Seed 000's table of strategies writes each parameter beside `strategy:`.
    text = """
policies:
  - name: fallback
    match: {agent_roles: [planner]}
    strategy: project_scope_fallback
    fallback_depth: 3
  - name: repair
    match: {agent_roles: [fixer]}
    strategy: error_driven_repair
    max_retry: 1
    top_k: 7
  - name: consensus
    match: {agent_roles: [code_gen, test_gen]}
    strategy: multi_agent_consensus
    agents: [code_gen, test_gen]
"""
    policies = parse_policies(text)
    fallback = policies.get("fallback")
    assert fallback is not None and fallback.strategies[0].model_dump()["fallback_depth"] == 3
    repair = policies.get("repair")
    assert repair is not None and repair.strategies[0].model_dump()["max_retry"] == 1
    assert repair.top_k == 7  # a policy field stays the policy's
    consensus = policies.select("x", "test_gen", "写测试")
    assert consensus.strategy_names[0] == "multi_agent_consensus"
    assert consensus.policy.strategies[0].model_dump()["agents"] == ("code_gen", "test_gen")
    twice = "    fallback_depth: 3\n    parameters: {fallback_depth: 4}"
    both = text.replace("    fallback_depth: 3", twice)
    with pytest.raises(PolicyError, match="fallback_depth"):
        parse_policies(both)
    with pytest.raises(PolicyError, match="max_retri"):  # a typo is still named
        parse_policies(text.replace("max_retry: 1", "max_retri: 1"))


BAD_STRATEGY = (
    "policies:\n  - name: y\n    match: {agent_roles: [sql_writer]}\n"
    "    strategies: [semantc_recall]\n"
)


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("file", "unknown strategy 'semantc_recall' (did you mean 'semantic_recall'?)"),
        ("missing", "missing.yaml: cannot read"),
        ("mapping", "policies[0].strategies[0]: unknown strategy 'nope'"),
        ("text", "unknown strategy 'semantc_recall'"),
        ("number", "must be a file path, YAML text or a mapping (got int)"),
    ],
)
def test_open_refuses_bad_policies_at_once(tmp_path: Path, given: str, expected: str) -> None:
    """A bad policy file, text or mapping is refused by `open`, not by the first assembly,
    and leaves no database behind (the store is not opened)."""
    import ctxbase

    bad = tmp_path / "bad.yaml"
    bad.write_text(BAD_STRATEGY, encoding="utf-8")
    policies: object = {
        "file": str(bad),
        "missing": str(tmp_path / "missing.yaml"),
        "mapping": {"policies": [{"name": "x", "strategies": ["nope"]}]},
        "text": BAD_STRATEGY,
        "number": 42,
    }[given]
    db = tmp_path / "memory.db"
    with pytest.raises(PolicyError) as info:
        ctxbase.open(str(db), embedder="hash", policies=policies)
    assert expected in str(info.value)
    assert not db.exists()


def test_open_takes_policies_as_a_mapping(tmp_path: Path) -> None:
    """The mapping a YAML file loads to works as the file does, layered over the presets."""
    import ctxbase

    mapping = {
        "policies": [
            {"name": "sql_writer", "match": {"agent_roles": ["sql_writer"]}, "top_k": 3},
        ]
    }
    with ctxbase.open(str(tmp_path / "m.db"), embedder="hash", policies=mapping) as cb:
        ctx = cb.assemble_context(agent_role="sql_writer", user_intent="分页 SQL")
        assert ctx.policy == "sql_writer"
        assert cb.assemble_context(agent_role="coder", user_intent="x").policy == "coder"


def test_seed_002_words_lead_to_the_keys_that_do_it() -> None:
    # spelling alone suggested 'relation_thresholds' for seed 002's similarity threshold
    def problem(extra: str, strategy: str = "") -> str:
        text = "version: 1\npolicies:\n  - name: x\n    match: {agent_roles: [x]}\n" + extra
        if strategy:
            text += f"    strategies:\n      - {strategy}\n"
        with pytest.raises(PolicyError) as err:
            parse_policies(text)
        return str(err.value)

    said = problem("    similarity_threshold: 0.78\n")
    assert "unknown key 'similarity_threshold' (did you mean 'relevance_floor'?)" in said
    said = problem("    top_k_range: [3, 7]\n")
    assert "(did you mean 'dynamic_top_k', as [min, max]?)" in said
    assert "chunking is set where text is stored" in problem("    chunk_size: 256\n")
    said = problem("", "{name: semantic_recall, similarity_threshold: 0.78}")
    assert "strategies[0].similarity_threshold" in said
    assert "did you mean 'relevance_floor', a key of the policy itself beside 'strategies'?" in said
    said = problem("", "{name: recent_window, window_size: 6}")
    assert "(did you mean 'max_messages'?)" in said
    # an ordinary misspelling still gets the closest key
    assert "(did you mean 'relevance_floor'?)" in problem("    relevance_flor: 0.8\n")


def test_the_trace_header_names_where_the_chosen_policy_comes_from(tmp_path: Path) -> None:
    """A shipped preset chosen over a user's file is not attributed to that file."""
    import ctxbase
    from ctxbase.assemble.trace import explain_trace

    path = tmp_path / "mine.yaml"
    path.write_text(ONE_ROLE, encoding="utf-8")
    with ctxbase.open(str(tmp_path / "t.db"), embedder="hash", policies=str(path)) as cb:
        preset = explain_trace(cb.assemble_context(agent_role="code_gen", user_intent="x").trace)
        own = explain_trace(cb.assemble_context(agent_role="sql_writer", user_intent="x").trace)
    assert f"policy 'coder' from {DEFAULT_POLICIES_PATH} (shipped presets)," in preset
    assert str(path) not in preset.splitlines()[1]
    assert f"policy 'sql_writer' from {path} (over the shipped presets)," in own


def test_default_written_beside_match_is_pointed_to_match_default() -> None:
    """`default: true` beside `name:` belongs under `match:`: the hint names that place, not
    the nearest spelling of this level's keys (`default_relation_threshold`)."""
    (problem,) = _problems("policies:\n  - name: a\n    default: true\n")
    assert problem.startswith(
        "policies[0].default: unknown key 'default' (did you mean 'match.default'?)"
    )


def test_the_roles_of_the_files_default_policy_count_as_roles_with_a_policy() -> None:
    text = (
        "inherit_presets: false\npolicies:\n"
        "  - name: a\n    match: {agent_roles: [x], default: true}\n"
        "  - name: b\n    match: {agent_roles: [y]}\n"
    )
    policies = load_policies(text)
    assert policies.roles() == ("x", "y")
    note = policies.select("p", "coder", "hi").role_note
    assert note == (
        "no policy is for role 'coder', so the default policy was used (roles with a policy: x, y)"
    )
