"""Refusals a new user meets first say what the rule is and what to pass instead."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

import ctxbase
from ctxbase import ContextBase, ValidationError

Opener = Callable[..., ContextBase]


def test_a_chinese_id_is_refused_naming_the_ascii_rule(tmp_path: Path, cb: ContextBase) -> None:
    with pytest.raises(ValidationError) as err:
        ctxbase.open(str(tmp_path / "zh.db"), project="电商", embedder=None)
    assert err.value.field == "project"
    assert "ASCII" in err.value.message and "A-Z a-z" in err.value.message
    assert "'电商'" in err.value.message
    for field, value in (("session_id", "第一天"), ("agent_id", "小明"), ("task_id", "任务1")):
        kwargs = {"session_id": "s", field: value}
        with pytest.raises(ValidationError) as err:
            cb.capture("user_message", text="hi", **kwargs)
        assert err.value.field == field
        assert "ASCII" in err.value.message
    # a role is text, not an id: Chinese is fine there
    assert cb.record("user_message", session_id="s", text="hi", agent_role="测试").seq == 1
