"""The `remember` tool states its size limit in the unit the library enforces (bytes of
UTF-8), and the limit it states is the one a call meets: a Chinese text of exactly the
limit is stored, one character more is refused naming the bytes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ctxbase import ContextBase
from ctxbase.integrations.tools import TOOLS, ToolScope, run_tool, tool_error
from ctxbase.validation import MAX_JSON_BYTES, MAX_TEXT_BYTES


@pytest.fixture
def scope(tmp_path: Path) -> Any:
    cb = ContextBase(str(tmp_path / "limit.db"), embedder=None)
    yield ToolScope(cb, agent_id="coder")
    cb.close()


def call(scope: ToolScope, args: dict[str, Any]) -> dict[str, Any]:
    try:
        return run_tool(scope, "remember", args)
    except Exception as exc:
        return tool_error(exc)


def test_the_schema_states_the_limit_in_bytes() -> None:
    text = TOOLS["remember"].input_schema()["properties"]["text"]
    # a JSON Schema maxLength counts characters: a CJK text that fits it may not fit
    assert "maxLength" not in text
    assert f"at most {MAX_TEXT_BYTES:,} bytes as UTF-8" in text["description"]


def test_a_text_of_the_stated_bytes_is_stored_and_one_more_is_refused(scope: ToolScope) -> None:
    assert MAX_TEXT_BYTES % 3 == 1  # 333,333 CJK characters fit, 333,334 do not
    fits = "中" * (MAX_TEXT_BYTES // 3)
    assert call(scope, {"text": fits, "session_id": "s"})["kind"] == "event"
    error = call(scope, {"text": fits + "中", "session_id": "s"})["error"]
    assert error["field"] == "text"
    size = len(fits.encode()) + 3
    assert error["message"] == (
        f"text: is {size} bytes as UTF-8, over the limit of {MAX_TEXT_BYTES} bytes"
    )


def test_a_fact_value_counts_its_quotes(scope: ToolScope) -> None:
    fits = "a" * (MAX_JSON_BYTES - 2)  # with its two quotes, exactly the limit
    stored = call(scope, {"text": fits, "fact_key": "blob", "session_id": "s"})
    assert stored["kind"] == "fact"
    error = call(scope, {"text": fits + "a", "fact_key": "blob", "session_id": "s"})["error"]
    assert error["field"] == "text"
    assert f"is {MAX_JSON_BYTES + 1} bytes as a JSON string" in error["message"]
