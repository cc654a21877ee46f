"""The prompt's history stays in time order: only an unanswered user message is the latest
input; an answered question keeps its place before its answer."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

import ctxbase
from ctxbase import ContextBase
from ctxbase.assemble.assembler import Assembler
from ctxbase.assemble.facts import RuleFactExtractor
from ctxbase.assemble.manager import ContextManager
from ctxbase.errors import ValidationError


@pytest.fixture
def cb(tmp_path: Path) -> Iterator[ContextBase]:
    base = ctxbase.open(str(tmp_path / "x.db"), project="p", embedder="hash")
    yield base
    base.close()


@pytest.fixture
def cm(cb: ContextBase) -> ContextManager:
    return ContextManager(cb, extractor=RuleFactExtractor())


def _turns(messages: list[dict[str, str]]) -> list[tuple[str, str]]:
    return [(m["role"], m["content"]) for m in messages if m["role"] != "system"]


WEATHER = [
    ("user", "上海明天天气怎么样？"),
    ("assistant", "明天上海小雨。"),
    ("user", "那后天呢？"),
    ("assistant", "后天转晴。"),
]


def test_an_answered_question_stays_before_its_answer(cm: ContextManager) -> None:
    sid = cm.create_session("u")
    for role, text in WEATHER[:3]:
        cm.add_message(sid, role, text)
    # unanswered: the newest user message is the latest input, last
    assert _turns(cm.get_prompt_messages(sid)) == WEATHER[:3]
    cm.add_message(sid, *WEATHER[3])
    # answered: time order, and nothing asked again after the answer
    assert _turns(cm.get_prompt_messages(sid)) == WEATHER
    # a new input follows the whole history
    asked = cm.get_prompt_messages(sid, user_input="大后天呢？")
    assert _turns(asked) == [*WEATHER, ("user", "大后天呢？")]


def test_a_long_session_ending_on_an_answer_keeps_its_order(cm: ContextManager) -> None:
    sid = cm.create_session("u")
    turns: list[tuple[str, str]] = []
    for i in range(30):
        turns += [("user", f"第{i}轮问题"), ("assistant", f"关于第{i}个细节的回答")]
    for role, text in turns:
        cm.add_message(sid, role, text)
    got = [t for t in _turns(cm.get_prompt_messages(sid, 3000)) if t in turns]
    assert got[-2:] == turns[-2:]  # the question, then its answer
    assert got == sorted(got, key=turns.index)


def test_the_assembler_asks_an_answered_question_again_after_the_history(
    cb: ContextBase, cm: ContextManager
) -> None:
    sid = cm.create_session("u")
    for role, text in WEATHER:
        cm.add_message(sid, role, text)
    ctx = Assembler(cb).assemble(session_id=sid, agent_role="assistant", user_intent="那后天呢？")
    # the caller's intent is a new input: the old question keeps its place, the new one last
    assert _turns(ctx.messages) == [*WEATHER, ("user", "那后天呢？")]


def test_a_question_an_agent_is_still_working_on_stays_the_input(cb: ContextBase) -> None:
    call = {
        "id": "c1",
        "type": "function",
        "function": {"name": "run_sql", "arguments": json.dumps({"sql": "SELECT 1"})},
    }
    cb.capture_messages(
        [
            {"role": "user", "content": "How many orders are there?"},
            {"role": "assistant", "content": "Let me count them.", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": "42"},
        ],
        session_id="s",
        sync=True,
    )
    cb.flush()
    ctx = Assembler(cb).assemble(
        session_id="s", agent_role="assistant", user_intent="How many orders are there?"
    )
    turns = _turns(ctx.messages)
    assert turns[-1] == ("user", "How many orders are there?")
    assert sum(1 for t in turns if t[1] == "How many orders are there?") == 1


def test_seed_code_on_the_base_names_the_id_to_pass(cb: ContextBase) -> None:
    # the seed's `sid = cm.create_session(user_id)` run on the base: a SessionInfo comes back
    info = cb.create_session("u_42")
    assert info.id == info.session_id == "u_42"
    task = cb.switch_task(info.id, "写活动方案")
    assert task.id == task.task_id
    for call in (
        lambda: cb.record("user_message", session_id=info, text="hi"),  # type: ignore[arg-type]
        lambda: cb.get_session(info),  # type: ignore[arg-type]
        lambda: cb.context_manager().add_message(info, "user", "hi"),  # type: ignore[arg-type]
    ):
        with pytest.raises(ValidationError) as err:
            call()
        assert err.value.field == "session_id"
        assert "pass the SessionInfo's id (.id)" in err.value.message
        assert "cb.context_manager()" in err.value.message
    with pytest.raises(ValidationError, match=r"pass the TaskInfo's id \(\.id\)"):
        cb.get_task(task)  # type: ignore[arg-type]
