"""The state layer: versioned facts, rollback, rule and LLM extraction into state."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest

import ctxbase
from ctxbase import ContextBase
from ctxbase.assemble.facts import RuleFactExtractor
from ctxbase.assemble.state import (
    LLMConfig,
    default_extractor,
    extract_into_state,
    fact_history,
    get_facts,
    render_fact,
    rollback_fact,
    set_fact,
)
from ctxbase.errors import ConflictError, NotFoundError, ValidationError


@pytest.fixture
def cb(tmp_path: Path) -> Iterator[ContextBase]:
    base = ctxbase.open(str(tmp_path / "x.db"), project="p", embedder="hash")
    yield base
    base.close()


class FakeChat:
    """A real HTTP server on 127.0.0.1 answering chat completions with a fixed content."""

    def __init__(self, content: str, status: int = 200) -> None:
        self.requests: list[dict[str, Any]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                outer.requests.append(json.loads(body))
                answer = json.dumps({"choices": [{"message": {"content": content}}]})
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(answer.encode())

            def log_message(self, *args: Any) -> None:
                pass

        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_changes_are_versioned_with_old_new_time_and_cause(cb: ContextBase) -> None:
    set_fact(cb, "budget", 50000, scope_id="t1", cause="user said 5万")
    stored = set_fact(cb, "budget", 80000, scope_id="t1", cause="user raised it")
    assert stored.version == 2
    history = fact_history(cb, "budget", scope_id="t1")
    assert [(c.old_value, c.new_value, c.cause) for c in history] == [
        (None, 50000, "user said 5万"),
        (50000, 80000, "user raised it"),
    ]
    assert history[1].ts >= history[0].ts


def test_rollback_restores_an_earlier_value_as_a_new_version(cb: ContextBase) -> None:
    set_fact(cb, "color", "blue", scope_id="t1")
    set_fact(cb, "color", "red", scope_id="t1")
    back = rollback_fact(cb, "color", 1, scope_id="t1")
    assert back is not None and back.value == "blue" and back.version == 3
    assert get_facts(cb, scope_id="t1")["color"].value == "blue"
    assert fact_history(cb, "color", scope_id="t1")[-1].cause == "rollback to v1"
    with pytest.raises(NotFoundError, match="versions: 1, 2, 3"):
        rollback_fact(cb, "color", 9, scope_id="t1")


def test_rollback_of_a_key_the_scope_lacks_names_its_keys(cb: ContextBase) -> None:
    set_fact(cb, "color", "blue", scope_id="t1")
    set_fact(cb, "size", "L", scope_id="t1")
    with pytest.raises(NotFoundError) as exc:
        rollback_fact(cb, "colour", 1, scope_id="t1")
    assert str(exc.value) == (
        "no fact 'colour' in task 't1' (did you mean 'color'?); its facts: color, size"
    )
    with pytest.raises(NotFoundError, match="no fact 'color' in task 't2'; it holds no fact"):
        rollback_fact(cb, "color", 1, scope_id="t2")
    assert [c.version for c in fact_history(cb, "color", scope_id="t1")] == [1]  # unchanged


def test_scopes_are_separate_and_checked(cb: ContextBase) -> None:
    set_fact(cb, "deadline", "月底", scope="session", scope_id="s1")
    assert get_facts(cb, scope_id="s1") == {}
    assert get_facts(cb, scope="session", scope_id="s1")["deadline"].value == "月底"
    with pytest.raises(ValidationError, match="scope"):
        set_fact(cb, "x", 1, scope="global", scope_id="s1")  # type: ignore[arg-type]


def test_rule_extraction_writes_the_budget_and_skips_questions(cb: ContextBase) -> None:
    written = extract_into_state(
        cb, "把预算控制在5万以内", scope_id="t1", extractor=RuleFactExtractor()
    )
    assert [f.key for f in written] == ["budget"]
    value = get_facts(cb, scope_id="t1")["budget"].value
    assert value == {"op": "<=", "amount": 50000, "currency": "CNY"}
    assert render_fact("budget", value) == "budget <= 50000 CNY"
    # A follow-up question is not a fact; restating the budget is not a change.
    assert extract_into_state(cb, "那时间呢", scope_id="t1", extractor=RuleFactExtractor()) == []
    extract_into_state(cb, "预算控制在5万以内", scope_id="t1", extractor=RuleFactExtractor())
    assert len(fact_history(cb, "budget", scope_id="t1")) == 1


def test_llm_config_from_env_and_extraction_through_a_real_endpoint(cb: ContextBase) -> None:
    assert LLMConfig.from_env({}) is None
    answer = json.dumps(
        {
            "facts": [
                {
                    "key": "tech.database",
                    "value": {"choice": "PostgreSQL"},
                    "confidence": 0.9,
                    "evidence": "PostgreSQL",
                }
            ]
        }
    )
    server = FakeChat(answer)
    try:
        config = LLMConfig.from_env(
            {
                "CTXBASE_LLM_BASE_URL": server.base_url,
                "CTXBASE_LLM_MODEL": "tiny",
                "CTXBASE_LLM_API_KEY": "k",
            }
        )
        assert config is not None and config.model == "tiny"
        written = extract_into_state(
            cb, "数据库就用 PostgreSQL 吧", scope_id="t1", extractor=default_extractor(config)
        )
        assert [(f.key, f.value) for f in written] == [("tech.database", {"choice": "PostgreSQL"})]
        assert server.requests[0]["model"] == "tiny"
        assert written[0].cause is not None and "llm:tiny" in written[0].cause
    finally:
        server.close()


def test_a_failing_endpoint_falls_back_to_the_rules(cb: ContextBase) -> None:
    server = FakeChat("oops", status=500)
    try:
        config = LLMConfig(base_url=server.base_url, model="tiny")
        written = extract_into_state(
            cb, "budget under $3k", scope_id="t1", extractor=default_extractor(config)
        )
        assert [f.key for f in written] == ["budget"]
        assert written[0].value == {"op": "<=", "amount": 3000, "currency": "USD"}
    finally:
        server.close()


def test_a_session_archived_or_expired_takes_no_facts_from_any_path(cb: ContextBase) -> None:
    cm = cb.context_manager()
    sid = cm.create_session("u1")
    cm.add_message(sid, "user", "budget is 5000")
    cb.set_fact("budget", 5000, scope="session", scope_id=sid)  # live: taken
    cb.expire_session(sid)
    for write in (
        lambda: cb.set_fact("budget", 6000, scope="session", scope_id=sid),
        lambda: cb.rollback_fact("budget", 1, scope="session", scope_id=sid),
        lambda: cm.set_state(sid, "budget", 6000, scope="session"),
    ):
        with pytest.raises(ConflictError, match="expired; it takes no writes"):
            write()
    cb.resume_session(sid)
    assert cb.set_fact("budget", 7000, scope="session", scope_id=sid).value == 7000
    cb.archive_session(sid)
    with pytest.raises(ConflictError, match="archived; it takes no writes"):
        cb.set_fact("budget", 8000, scope="session", scope_id=sid)
    assert cb.get_facts(scope="session", scope_id=sid)["budget"].value == 7000
    # a scope the store has no record of stays writable (facts may come before the session)
    assert cb.set_fact("x", 1, scope="session", scope_id="not-yet").value == 1
