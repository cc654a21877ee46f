"""Entities and relations from a chat model, added to the rules' on capture anchoring.

The model is a real HTTP peer: a small OpenAI-compatible chat-completions server started on a
free local port (tests/chat_server.py), answering deterministic JSON chosen by the message
it is sent (a good extraction, text that is not JSON, an HTTP 500, an answer held back past
the timeout).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from chat_server import GOOD, TEXT, ChatServer, running_chat_server
from ctxbase import ContextBase
from ctxbase.anchor.capture_anchor import AnchorConfig
from ctxbase.anchor.llm_extract import (
    LOGGER_NAME,
    LLMExtractConfig,
    MalformedAnswer,
    entity_kind,
    parse_extraction,
)
from ctxbase.capture.bus import CaptureError
from ctxbase.model import Relation, make_entity_id
from ctxbase.store.base import Store


@pytest.fixture
def chat_server() -> Iterator[ChatServer]:
    with running_chat_server() as server:
        yield server


def _config(server: ChatServer, **options: Any) -> AnchorConfig:
    llm = LLMExtractConfig(
        base_url=server.url, model="tiny-extractor", api_key_env="CTXBASE_TEST_EXTRACT_KEY"
    )
    return AnchorConfig(llm=llm.model_copy(update=options))


def _base(store: Store | str, project: str, server: ChatServer, **options: Any) -> ContextBase:
    return ContextBase(
        store, project=project, embedder="hash", anchoring=_config(server, **options)
    )


def _edges(cb: ContextBase, event_id: str) -> set[tuple[str, str, str, str, float]]:
    """The event's edges and those of the entities it reaches, by name."""
    names = {e.id: e.name for e in cb.list_entities()}
    out: set[tuple[str, str, str, str, float]] = set()
    seen: list[Relation] = cb.relationships(event_id, direction="out")
    for r in list(seen):
        if r.to_id in names:
            seen.extend(cb.relationships(r.to_id, direction="out"))
    for r in seen:
        a = "EVENT" if r.from_id == event_id else names.get(r.from_id, r.from_id)
        out.add((a, r.type, names.get(r.to_id, r.to_id), r.source, r.confidence))
    return out


def _rule_edge(cb: ContextBase, event_id: str) -> set[tuple[str, str, str]]:
    """The rules' edge every test text carries: the event MENTIONS the orders table."""
    table = make_entity_id("mention", "table:orders")
    return {
        (r.type, r.to_id, r.source)
        for r in cb.relationships(event_id, direction="out", types=["MENTIONS"])
        if r.to_id == table
    }


def test_a_good_answer_adds_typed_entities_and_clamped_relations(
    store: Store, project_id: str, chat_server: ChatServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CTXBASE_TEST_EXTRACT_KEY", "sekret")
    cb = _base(store, project_id, chat_server)
    try:
        ev = cb.record("user_message", session_id="s1", text=TEXT)
        cb.flush()
        llm = {e for e in _edges(cb, ev.id) if e[3] == "ctxbase:llm"}
        assert llm == {
            ("EVENT", "MENTIONS", "billing-service", "ctxbase:llm", 0.7),
            ("EVENT", "MENTIONS", "Alice", "ctxbase:llm", 0.7),
            ("Alice", "OWNS", "billing-service", "ctxbase:llm", 0.9),
            ("billing-service", "READS", "orders", "ctxbase:llm", 1.0),  # 1.7 clamped
            # -0.3 clamped to 0 is under min_confidence; Bob was never listed; "high" is
            # no confidence: those three are not written
        }
        # merged: the table the rules found is the same entity; their edge keeps its source
        assert _rule_edge(cb, ev.id) == {
            ("MENTIONS", make_entity_id("mention", "table:orders"), "ctxbase:table_name")
        }
        # the requirement the model names is the one the rules stored for that sentence
        (req,) = cb.list_entities(type="requirement")
        assert req.text == "We must refund within 7 days."
        kinds = {e.name: (e.type, e.properties.get("kind")) for e in cb.list_entities()}
        assert kinds["Alice"] == ("mention", "person")
        assert kinds["billing-service"] == ("mention", "concept")
        assert (
            cb.get_entity(make_entity_id("mention", "concept:billing-service")).properties[
                "llm_type"
            ]
            == "service"
        )
        (sent,) = chat_server.requests
        assert sent["path"] == "/v1/chat/completions" and sent["model"] == "tiny-extractor"
        assert sent["messages"][-1]["content"] == TEXT
        assert chat_server.auth == ["Bearer sekret"]  # read from the named variable
        stats = cb.anchor_stats().llm
        assert stats is not None and (stats.requests, stats.extracted, stats.errors) == (1, 1, 0)
    finally:
        cb.close()


def test_malformed_output_is_ignored_with_a_warning_and_the_rules_stand(
    tmp_path: Path, chat_server: ChatServer, caplog: pytest.LogCaptureFixture
) -> None:
    cb = _base(str(tmp_path / "m.db"), "p", chat_server)
    try:
        with caplog.at_level(logging.WARNING, logger=LOGGER_NAME):
            ev = cb.record("user_message", session_id="s1", text="[garbage] " + TEXT)
            cb.flush()
        assert cb.get_event(ev.id).text == "[garbage] " + TEXT  # the capture is kept
        assert _rule_edge(cb, ev.id)  # anchored by the rules
        assert not {e for e in _edges(cb, ev.id) if e[3] == "ctxbase:llm"}
        stats = cb.anchor_stats()
        assert stats.errors == 0 and stats.llm is not None
        assert (stats.llm.malformed, stats.llm.extracted) == (1, 0)
        assert "not JSON" in (stats.llm.last_error or "")
        assert any("answer ignored" in r.getMessage() for r in caplog.records)
    finally:
        cb.close()


def test_an_http_500_is_counted_and_the_endpoint_is_left_alone_for_a_while(
    tmp_path: Path, chat_server: ChatServer, caplog: pytest.LogCaptureFixture
) -> None:
    cb = _base(str(tmp_path / "e.db"), "p", chat_server, retry_after_s=600)
    try:
        with caplog.at_level(logging.WARNING, logger=LOGGER_NAME):
            first = cb.record("user_message", session_id="s1", text="[500] " + TEXT)
            second = cb.record("user_message", session_id="s1", text=TEXT)
            cb.flush()
        for ev in (first, second):
            assert _rule_edge(cb, ev.id)
            assert not {e for e in _edges(cb, ev.id) if e[3] == "ctxbase:llm"}
        stats = cb.anchor_stats().llm
        assert stats is not None
        assert (stats.requests, stats.errors, stats.skipped) == (1, 1, 1)
        assert "HTTP 500" in (stats.last_error or "")
        assert len(chat_server.requests) == 1  # the second event was not sent
        assert sum("HTTP 500" in r.getMessage() for r in caplog.records) == 1
    finally:
        cb.close()


def test_a_timeout_is_counted_and_the_next_event_is_tried_again(
    tmp_path: Path, chat_server: ChatServer
) -> None:
    cb = _base(str(tmp_path / "t.db"), "p", chat_server, timeout_s=0.3, retry_after_s=0)
    try:
        slow = cb.record("user_message", session_id="s1", text="[slow] " + TEXT)
        fine = cb.record("user_message", session_id="s1", text=TEXT)
        cb.flush()
        stats = cb.anchor_stats().llm
        assert stats is not None
        assert (stats.requests, stats.timeouts, stats.errors, stats.extracted) == (2, 1, 0, 1)
        assert "Timeout" in (stats.last_error or "")
        assert _rule_edge(cb, slow.id)
        assert not {e for e in _edges(cb, slow.id) if e[3] == "ctxbase:llm"}
        assert {e for e in _edges(cb, fine.id) if e[3] == "ctxbase:llm"}
    finally:
        cb.close()


def test_capture_search_and_assembly_never_wait_on_the_model(
    tmp_path: Path, chat_server: ChatServer
) -> None:
    cb = _base(str(tmp_path / "w.db"), "p", chat_server, timeout_s=300)
    try:
        held = cb.capture("user_message", session_id="s1", text="[hold] " + TEXT)
        assert held is not None
        assert chat_server.received.wait(20), "the anchoring thread asks the model"
        # the model has not answered: capture, a synchronous record, search and assembly
        # all go on without it
        ev = cb.record("assistant_message", session_id="s1", text="Noted: billing-service.")
        assert cb.get_event(ev.id).text == "Noted: billing-service."
        assert cb.search("billing-service").results
        ctx = cb.assemble_context(agent_role="coder", user_intent="who owns billing-service?")
        assert ctx.context_id
        # all of that went on while the model held its answer (capture waiting on it would
        # have blocked here until the gate opened)
        assert not chat_server.released.is_set() and len(chat_server.requests) == 1
        # a flush with a timeout says it ran out, and on what, instead of returning as if done
        with pytest.raises(CaptureError, match=r"written, but .* not yet anchored"):
            cb.flush(timeout=0.2)
        chat_server.gate.set()
        cb.flush()
        assert {e for e in _edges(cb, held) if e[3] == "ctxbase:llm"}
        # two messages sent in all: neither the search nor the assembly asked the model
        assert len(chat_server.requests) == 2
    finally:
        chat_server.gate.set()
        cb.close()


def test_off_by_default_and_configured_by_the_environment(
    tmp_path: Path, chat_server: ChatServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("CTXBASE_EXTRACT_BASE_URL", "CTXBASE_EXTRACT_MODEL"):
        monkeypatch.delenv(name, raising=False)
    off = ContextBase(str(tmp_path / "off.db"), embedder="hash")
    try:
        off.record("user_message", session_id="s1", text=TEXT)
        off.flush()
        assert off.anchor_stats().llm is None and chat_server.requests == []
    finally:
        off.close()
    monkeypatch.setenv("CTXBASE_EXTRACT_BASE_URL", chat_server.url)
    monkeypatch.setenv("CTXBASE_EXTRACT_MODEL", "env-model")
    monkeypatch.setenv("CTXBASE_EXTRACT_API_KEY", "from-env")
    on = ContextBase(str(tmp_path / "on.db"), embedder="hash")
    try:
        on.record("user_message", session_id="s1", text=TEXT)
        on.flush()
        stats = on.anchor_stats().llm
        assert stats is not None and stats.extracted == 1
        assert chat_server.requests[-1]["model"] == "env-model"
        assert chat_server.auth[-1] == "Bearer from-env"
    finally:
        on.close()


def test_parse_extraction_checks_each_item() -> None:
    found = parse_extraction(json.dumps(GOOD))
    assert [(e.name, e.kind) for e in found.entities] == [
        ("billing-service", "concept"),
        ("orders", "table"),
        ("Alice", "person"),
        ("We must refund within 7 days", "requirement"),
    ]
    assert [(r.type, r.confidence) for r in found.relations] == [
        ("OWNS", 0.9),
        ("READS", 1.0),
        ("DEPENDS_ON", 0.0),
        ("USES", 0.9),
    ]
    assert len(found.ignored) == 2  # the nameless entity, the confidence "high"
    for bad in ("not json", "[1, 2]", '{"entities": {}}'):
        with pytest.raises(MalformedAnswer):
            parse_extraction(bad)
    nan = parse_extraction(
        '{"relations": [{"from": "a", "to": "b", "type": "X", "confidence": NaN}]}'
    )
    assert nan.relations == () and nan.ignored
    assert [entity_kind(t) for t in ("Tables", "API endpoint", "Function", "library")] == [
        "table",
        "api",
        "code",
        "concept",
    ]
