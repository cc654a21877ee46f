"""Roles named in the other language: the vocabulary, and search favouring the role's events
(every backend: the `cb` fixture is parametrised)."""

from __future__ import annotations

from ctxbase import ContextBase
from ctxbase.retrieve.config import get_preset
from ctxbase.retrieve.query_actors import query_subject
from ctxbase.retrieve.role_names import role_names
from ctxbase.retrieve.search import actor_free_query, favoured_actors, named_actors
from ctxbase.store.base import SearchItem


def test_role_ids_get_their_chinese_names() -> None:
    assert role_names("tester")[0] == "tester"
    assert "测试" in role_names("tester")
    assert "开发" in role_names("coder")
    # compound roles: a qualifier with a role suffix, never the bare qualifier
    names = role_names("research_assistant")
    assert "研究助理" in names and "研究助手" in names and "研究" not in names
    assert "健康助理" in role_names("health-assistant")
    assert "测试工程师" in role_names("qa_engineer")
    # a Chinese role id gets its English names
    assert "tester" in role_names("测试")
    # unknown ids, people's names and the user are only themselves
    assert role_names("melanie") == ("melanie",)
    assert role_names("user") == ("user",)
    assert role_names("blue_widget") == ("blue_widget",)


def _item(agent: str) -> SearchItem:
    return SearchItem(
        item_id=agent, owner_id=agent, kind="event", type="user_message", text="", terms="",
        ts=0.0, agent_id=agent,
    )  # fmt: skip


def test_actors_named_by_their_other_names() -> None:
    team = [_item("tester"), _item("coder"), _item("planner"), _item("user")]
    query = "测试报的时区问题，开发是怎么修的？"
    assert named_actors(query, team) == []
    assert named_actors(query, team, other_names=True) == ["coder", "tester"]
    names = {"tester": role_names("tester"), "coder": role_names("coder")}
    assert query_subject(query, ["coder", "tester"], names.__getitem__) == "tester"
    assert (
        actor_free_query(query, [*names["tester"], *names["coder"]])
        == "报的时区问题， 是怎么修的？"
    )
    # subject_actor: the first named; in a team with team_actors: every named one
    subject = get_preset("hybrid", subject_actor=True, role_names=True)
    assert favoured_actors(query, team, subject) == {"tester"}
    together = subject.model_copy(update={"team_actors": True})
    assert favoured_actors(query, team, together) == {"tester", "coder"}
    # in a conversation of two, naming both still favours the subject
    pair = [_item("tester"), _item("coder")]
    assert favoured_actors(query, pair, together) == {"tester"}


def test_search_favours_the_roles_a_chinese_query_names(cb: ContextBase) -> None:
    def say(agent: str, text: str) -> str:
        return cb.record("user_message", session_id="s", text=text, agent_id=agent).id

    bug = say("tester", "发现会员能在同一时段约两节课")
    fix = say("coder", "下单时加了冲突检查，放在同一个事务里")
    for n in range(3):
        say("planner", f"同一时段约两节课的冲突检查要写进需求，第{n}条")
    say("user", "同一时段的课别冲突")
    cb.wait_for_embeddings()
    query = "测试发现同一时段能约两节课，开发怎么修的？"
    base = get_preset("hybrid", subject_actor=True, actor_boost=3.0, top_k=2)
    plain = {c.item.owner_id for c in cb.search(query, config=base).results}
    assert plain != {bug, fix}
    named = base.model_copy(update={"role_names": True, "team_actors": True})
    assert {c.item.owner_id for c in cb.search(query, config=named).results} == {bug, fix}
