"""Recalled memory is dated: each item's label shows the UTC day it was said (an event) or
last changed (an entity), so a reader given two memories that disagree can tell the later
one, and a "last Tuesday" said back then can be placed."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

import ctxbase
from ctxbase import ContextBase
from ctxbase.assemble.memory_candidate import label_day, label_for
from ctxbase.assemble.memory_section import MEMORY_HEADER

DAY = 86400.0
OLD = "The billing database runs on MySQL 8."
NEW = "We moved the billing database to PostgreSQL 18; MySQL is gone."


@pytest.fixture
def cb(tmp_path: Path) -> Iterator[ContextBase]:
    base = ctxbase.open(str(tmp_path / "t.db"), project="p", embedder="hash")
    try:
        yield base
    finally:
        base.close()


def _memory(ctx: Any) -> str:
    (memory,) = [m["content"] for m in ctx.messages if m["content"].startswith("Retrieved")]
    return memory


def test_label_day_is_the_utc_day_and_empty_when_unknown() -> None:
    # 23:30 UTC on 8 May 2023 is the 9th east of UTC+1: the label says UTC's day
    at = datetime(2023, 5, 8, 23, 30, tzinfo=UTC).timestamp()
    assert label_day(at) == "2023-05-08"
    assert label_day(None) == ""
    assert label_day(1e20) == ""  # past any calendar: no day rather than an error
    assert label_for("user_message", "ev_1", day="2023-05-08") == "[message ev_1, 2023-05-08]"
    assert (
        label_for("tool_result", "ev_2", answers="ev_1 run_sql", day="2023-05-08")
        == "[tool result ev_2 of ev_1 run_sql, 2023-05-08]"
    )
    assert label_for("document", "doc_1", "Redis 规范") == "[document doc_1] Redis 规范"


def test_two_memories_that_disagree_each_show_their_day(cb: ContextBase) -> None:
    now = time.time()
    old = cb.capture("user_message", session_id="march", text=OLD, ts=now - 40 * DAY)
    new = cb.capture("user_message", session_id="may", text=NEW, ts=now - 3 * DAY)
    cb.flush()
    cb.wait_for_embeddings()
    ctx = cb.assemble_context(
        agent_role="coder", user_intent="Which database does billing use?", session_id="today"
    )
    memory = _memory(ctx)
    assert memory.startswith(MEMORY_HEADER) and "date, UTC" in MEMORY_HEADER
    assert f"[message {old}, {label_day(now - 40 * DAY)}]\n{OLD}" in memory
    assert f"[message {new}, {label_day(now - 3 * DAY)}]\n{NEW}" in memory
    assert label_day(now - 40 * DAY) < label_day(now - 3 * DAY)  # ISO days sort as they read
    # the trace still has the minute; the prompt spends a day's few tokens per item
    said = {e["id"]: e["said_at"] for e in ctx.events}
    assert said[old] == pytest.approx(now - 40 * DAY)


def test_an_entity_shows_the_day_it_last_changed(cb: ContextBase) -> None:
    cb.upsert_entity("document", "Redis 缓存规范", "缓存过期时间必须是整数秒。", id="doc_1")
    cb.wait_for_embeddings()
    ctx = cb.assemble_context(agent_role="coder", user_intent="Redis 缓存规范怎么要求过期时间")
    memory = _memory(ctx)
    (day,) = re.findall(r"\[document doc_1, (\d{4}-\d\d-\d\d)\] Redis 缓存规范", memory)
    assert day == label_day(cb.get_entity("doc_1").updated_at)
