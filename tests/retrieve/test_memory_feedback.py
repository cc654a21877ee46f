"""Feedback on memories and the decay that spares used ones, through ContextBase on every
backend: feedback sets a confidence search ranks by (a correction, not a forget), a
failed tool result starts lower, assembled contexts count as uses (written in batches),
linked and often-used memories do not decay, and a forget removes both records."""

from __future__ import annotations

import time

import pytest

from ctxbase import ContextBase
from ctxbase.assemble.trace import explain_trace
from ctxbase.errors import NotFoundError, ValidationError
from ctxbase.store.base import FEEDBACK_SCOPE, USES_SCOPE
from store_calls import StoreCalls

DAY = 86400.0
KEYWORD = {"preset": "keyword"}


def _memories(cb: ContextBase) -> list[str]:
    texts = [
        "the redis cache ttl for orders is 60 seconds",
        "redis cache ttl: set the orders cache to 300 seconds",
        "orders cache uses redis with a ttl of 120 seconds",
    ]
    return [cb.record("assistant_message", session_id="s1", text=t).id for t in texts]


def _ranked(cb: ContextBase, **overrides: object) -> list[str]:
    found = cb.search("redis cache ttl orders", **{**KEYWORD, **overrides})
    return [c.item.owner_id for c in found.results]


def test_feedback_moves_a_memory_and_neutral_undoes_it(cb: ContextBase) -> None:
    ids = _memories(cb)
    before = cb.search("redis cache ttl orders", **KEYWORD)
    order = [c.item.owner_id for c in before.results]
    assert sorted(order) == sorted(ids)
    top = order[0]
    score = {c.item.owner_id: c.score for c in before.results}

    given = cb.feedback(top, "disliked", note="the TTL changed", by="user:li")
    assert (given.node_id, given.label, given.confidence, given.by) == (
        top, "disliked", 0.25, "user:li",
    )  # fmt: skip
    after = cb.search("redis cache ttl orders", **KEYWORD)
    rated = next(c for c in after.results if c.item.owner_id == top)
    assert rated.score == pytest.approx(score[top] * 0.8)
    assert (rated.confidence, rated.confidence_source) == (0.25, "feedback:disliked")
    assert [c.item.owner_id for c in after.results][-1] == top  # still there, ranked lower
    assert cb.get_event(top).text  # a correction, not a forget

    # "wrong" (false) leaves it out of the results; it is listed as considered, and why
    cb.feedback(top, "wrong")
    gone = cb.search("redis cache ttl orders", **KEYWORD)
    assert top not in [c.item.owner_id for c in gone.results]
    dropped = next(c for c in gone.considered if c.item.owner_id == top)
    assert dropped.dropped is not None and "min_confidence" in dropped.dropped
    assert top in _ranked(cb, min_confidence=0.0)  # the floor is the config's

    cb.feedback(top, "neutral")
    assert _ranked(cb) == order
    history = cb.feedback_history(top)
    assert [(h.label, h.confidence, h.version) for h in history] == [
        ("disliked", 0.25, 1),
        ("wrong", 0.0, 2),
        ("neutral", 0.5, 3),
    ]
    current = cb.get_feedback(top)
    assert current is not None and current.version == 3


def test_liked_rises_a_little_and_confidence_weight_0_ignores_feedback(cb: ContextBase) -> None:
    ids = _memories(cb)
    query = "redis cache ttl orders"
    base = {c.item.owner_id: c.score for c in cb.search(query, **KEYWORD).results}
    last = min(base, key=lambda k: base[k])
    cb.feedback(last, "liked")
    liked = {c.item.owner_id: c.score for c in cb.search(query, **KEYWORD).results}
    assert liked[last] == pytest.approx(base[last] * 1.2)
    assert {k: v for k, v in liked.items() if k != last} == {
        k: v for k, v in base.items() if k != last
    }
    off = cb.search(query, **KEYWORD, confidence_weight=0.0)
    assert {c.item.owner_id: c.score for c in off.results} == base
    assert sorted(ids) == sorted(base)


def test_confidence_is_read_once_per_generation_and_seen_across_bases(
    cb: ContextBase, second: ContextBase
) -> None:
    ids = _memories(cb)
    query = "redis cache ttl orders"
    cb.search(query, **KEYWORD)
    cb.flush()  # capture anchoring done: its reads of the events are not the search's
    calls = StoreCalls(cb.store)
    cb.search(query, **KEYWORD)  # nothing changed: the feedback read before holds
    assert "get_state_keys" not in calls.counts and "get_events" not in calls.counts
    before = cb.store.index_generation(cb.project)
    second.feedback(ids[0], "wrong", confidence=0.0)  # another connection, as another process
    assert cb.store.index_generation(cb.project) > before
    assert ids[0] not in [c.item.owner_id for c in cb.search(query, **KEYWORD).results]
    assert calls.counts["get_state_keys"] == 1


def test_feedback_checks_what_it_names(cb: ContextBase) -> None:
    ids = _memories(cb)
    with pytest.raises(ValidationError):
        cb.feedback(ids[0], "great")
    with pytest.raises(ValidationError):
        cb.feedback(ids[0], "liked", confidence=1.5)
    with pytest.raises(NotFoundError):
        cb.feedback("ev_nosuch", "liked")
    with pytest.raises(NotFoundError):
        cb.feedback(ids[0], "liked", context_id="ctx_nosuch")
    assert cb.get_feedback(ids[0]) is None and cb.feedback_history(ids[0]) == []
    # a read names a node too: a mistyped id is not found, not a node without feedback
    with pytest.raises(NotFoundError):
        cb.get_feedback("ev_nosuch")
    with pytest.raises(NotFoundError):
        cb.feedback_history("ev_nosuch")


def test_feedback_names_the_assembled_context_and_the_trace_shows_confidence(
    cb: ContextBase,
) -> None:
    ids = _memories(cb)
    ctx = cb.assemble_context(agent_role="coder", user_intent="redis cache ttl orders")
    placed = [c["id"] for c in ctx.trace["candidates"] if c["included"]]
    assert placed
    given = cb.feedback(placed[0], "disliked", context_id=ctx.context_id)
    assert given.context_id == ctx.context_id
    again = cb.assemble_context(agent_role="coder", user_intent="redis cache ttl orders")
    shown = next(c for c in again.trace["candidates"] if c["id"] == placed[0])
    assert shown["explain"]["confidence"] == 0.25
    assert shown["explain"]["confidence_source"] == "feedback:disliked"
    others = [c for c in again.trace["candidates"] if c["id"] in ids and c["id"] != placed[0]]
    assert all("confidence" not in (c["explain"] or {}) for c in others)
    assert "confidence 0.25 (feedback:disliked)" in explain_trace(again.trace)


def test_a_failed_tool_result_starts_with_lower_confidence(cb: ContextBase) -> None:
    ok = cb.record("tool_result", session_id="s1", text="deploy of orders service done")
    failed = cb.record(
        "tool_result",
        session_id="s1",
        text="deploy of orders service failed",
        metadata={"exit_code": 1},
    )
    query = "deploy orders service failed"
    found = {c.item.owner_id: c for c in cb.search(query, **KEYWORD).results}
    assert found[failed.id].confidence == 0.3
    assert found[failed.id].confidence_source == "tool_error"
    assert found[ok.id].confidence is None
    plain = cb.search(query, **KEYWORD, tool_error_confidence=None)
    unrated = {c.item.owner_id: c.score for c in plain.results}
    assert found[failed.id].score == pytest.approx(unrated[failed.id] * 0.84)
    # feedback outranks the tool's status
    cb.feedback(failed.id, "helpful", note="the failure explains the outage")
    rated = {c.item.owner_id: c for c in cb.search(query, **KEYWORD).results}
    assert rated[failed.id].confidence_source == "feedback:helpful"


def test_decay_spares_linked_memories_and_those_assemblies_use(cb: ContextBase) -> None:
    now = time.time()
    old = [
        cb.record(
            "assistant_message", session_id="s1", text=f"orders cache ttl note {n}",
            ts=now - 90 * DAY,
        ).id
        for n in range(3)
    ]  # fmt: skip
    # one is referred to by a later event: explicitly linked
    cb.record("user_message", session_id="s1", text="see that note", refers_to=[old[0]])
    decay = {**KEYWORD, "time_decay_half_life_days": 30.0}
    found = {c.item.owner_id: c for c in cb.search("orders cache ttl note", **decay).results}
    assert found[old[0]].decay == 1.0 and found[old[0]].decay_spared == "linked by REFERS_TO"
    assert found[old[1]].decay == pytest.approx(0.125, rel=1e-3)
    assert found[old[1]].decay_spared is None

    # uses noted by assemblies are seen at once, and written in one batch
    usage = cb.searcher.usage
    for _ in range(3):
        usage.note(cb.project, [old[1]])
    assert cb.store.get_state_keys(cb.project, USES_SCOPE, "", [old[1]]) == {}
    used = {c.item.owner_id: c for c in cb.search("orders cache ttl note", **decay).results}
    assert used[old[1]].decay == 1.0 and used[old[1]].decay_spared == "used 3 times"
    assert used[old[2]].decay == pytest.approx(0.125, rel=1e-3)
    usage.flush()
    stored = cb.store.get_state_keys(cb.project, USES_SCOPE, "", [old[1]])
    assert stored[old[1]].version == 3
    # a threshold above the uses: it decays as if 1 + 3 times younger
    fewer = cb.search("orders cache ttl note", **decay, decay_spare_uses=10)
    one = next(c for c in fewer.results if c.item.owner_id == old[1])
    assert one.decay == pytest.approx(0.5**0.75, rel=1e-3)
    # no decay: nothing read, nothing shown
    plain = cb.search("orders cache ttl note", **KEYWORD)
    assert all(c.decay is None and c.decay_spared is None for c in plain.results)


def test_assembled_contexts_count_as_uses(cb: ContextBase) -> None:
    _memories(cb)
    ctx = cb.assemble_context(agent_role="coder", user_intent="redis cache ttl orders")
    placed = [c["id"] for c in ctx.trace["candidates"] if c["included"]]
    assert placed
    cb.searcher.usage.flush()
    uses = cb.store.get_state_keys(cb.project, USES_SCOPE, "", placed)
    assert {k: f.version for k, f in uses.items()} == dict.fromkeys(placed, 1)


def test_forget_removes_feedback_and_uses(cb: ContextBase) -> None:
    ids = _memories(cb)
    cb.feedback(ids[0], "wrong")
    cb.searcher.usage.note(cb.project, ids[:2])  # noted, not written yet
    cb.forget(event_ids=[ids[0]])
    assert cb.store.get_state_keys(cb.project, FEEDBACK_SCOPE, "", [ids[0]]) == {}
    assert cb.store.state_history(cb.project, FEEDBACK_SCOPE, "", ids[0]) == []
    left = cb.store.get_state_keys(cb.project, USES_SCOPE, "", ids[:2])
    assert list(left) == [ids[1]]


def test_a_rating_reaches_the_other_copy_of_the_same_statement(cb: ContextBase) -> None:
    """Capture anchoring keeps a decision as an entity with the message's text: rating the
    message wrong must not leave its copy in the prompt, nor the other way round."""
    said = cb.record(
        "user_message", session_id="s1", text="决定：订单详情的 Redis 缓存 TTL 设为 60 秒。"
    )
    later = cb.record(
        "user_message", session_id="s2", text="更正：订单详情的 Redis 缓存 TTL 改成 300 秒。"
    )
    cb.flush()
    made = cb.store.list_relations(cb.project, [said.id], direction="out", types=["GENERATES"])
    decision = next(r.to_id for r in made if r.to_id.startswith("decision:"))
    given = cb.feedback(said.id, "wrong")
    assert given.same_statement == [decision]
    rated = cb.get_feedback(decision)
    assert rated is not None and (rated.label, rated.confidence) == ("wrong", 0.0)
    found = [
        c.item.owner_id for c in cb.search("订单详情 Redis 缓存 TTL", preset="keyword").results
    ]
    assert said.id not in found and decision not in found and later.id in found
    ctx = cb.assemble_context(agent_role="coder", user_intent="订单详情 Redis 缓存 TTL 是多少")
    body = "\n".join(str(m["content"]) for m in ctx.messages)
    assert "60 秒" not in body and "300 秒" in body
    # from the entity's side: the message it was anchored from is rated with it
    back = cb.feedback(decision, "neutral")
    assert back.same_statement == [said.id]
    assert cb.get_feedback(said.id).label == "neutral"  # type: ignore[union-attr]


def test_a_memory_rated_wrong_is_left_out_where_no_search_brings_it(cb: ContextBase) -> None:
    """The session's own history window and the strategies that follow references reach
    memories without a search: a message or entity rated wrong is left out there too,
    and the trace says why."""
    said = cb.record(
        "user_message", session_id="s1", text="We decided: the orders cache TTL is 60 s."
    )
    sql = cb.record(
        "assistant_message",
        session_id="s1",
        text="```sql\nSELECT id, total FROM orders WHERE status = 'open'\n```",
    )
    cb.flush()
    intent = "what is the orders cache TTL, and the SQL for open orders"

    def body() -> tuple[str, str]:
        ctx = cb.assemble_context(agent_role="coder", user_intent=intent, session_id="s1")
        return "\n".join(str(m["content"]) for m in ctx.messages), ctx.context_id

    before, _ = body()
    assert "60 s" in before and "SELECT id, total" in before  # the history holds both
    cb.feedback(said.id, "wrong")
    cb.feedback(sql.id, "wrong")
    after, context_id = body()
    assert "60 s" not in after and "SELECT id, total" not in after
    trace = cb.get_trace(context_id)
    reasons = {(d["id"], d["reason"]) for d in trace["dropped"]}
    assert (said.id, "rated false") in reasons and (sql.id, "rated false") in reasons
    assert cb.get_event(said.id).text  # still stored: a correction, not a forget
    # the SQL entity anchored from the message is rated with it: brought by the code
    # strategy ("the SQL just generated"), not by a search, it stays out
    other = cb.assemble_context(
        agent_role="coder", user_intent="把刚才生成的 SQL 改成支持分页", session_id="s1"
    )
    assert "SELECT id, total" not in "\n".join(str(m["content"]) for m in other.messages)
    cb.feedback(said.id, "neutral")  # undone: back in the history
    again, _ = body()
    assert "60 s" in again


def test_a_decision_cut_from_a_longer_message_stands_or_falls_with_it(cb: ContextBase) -> None:
    """Anchoring cuts a decision out of a message that says more: rating the message wrong
    rates the decision with it; rating the decision leaves the message (which says more)
    alone and names it; retracting the message takes the decision out of prompts."""
    said = cb.record(
        "assistant_message",
        session_id="s1",
        agent_id="coder",
        text="Decision: we will use MongoDB for billing. I checked the benchmarks yesterday.",
    )
    cb.flush()
    made = cb.store.list_relations(cb.project, [said.id], direction="out", types=["GENERATES"])
    decision = next(r.to_id for r in made if r.to_id.startswith("decision:"))
    intent = "which database do we use for billing?"

    def prompt(session: str = "s2") -> str:
        ctx = cb.assemble_context(agent_role="planner", user_intent=intent, session_id=session)
        return "\n".join(str(m["content"]) for m in ctx.messages)

    assert "MongoDB" in prompt()
    given = cb.feedback(said.id, "wrong", note="we use PostgreSQL")
    assert given.same_statement == [decision] and given.also_said_in == []
    assert cb.get_feedback(decision).label == "wrong"  # type: ignore[union-attr]
    found = [c.item.owner_id for c in cb.search("database for billing MongoDB").results]
    assert said.id not in found and decision not in found
    # the rating's note stands in its place, quoting what it replaces (corrections.py)
    corrected = prompt()
    assert "Correction (rated wrong on " in corrected and "we use PostgreSQL" in corrected
    said_where = [line for line in corrected.splitlines() if "MongoDB" in line]
    assert len(said_where) == 1 and said_where[0].startswith("Correction (rated wrong")

    cb.feedback(said.id, "neutral")  # undone for both
    assert "MongoDB" in prompt()
    # the decision rated alone: its message says more, so it is not rated, and is named
    alone = cb.feedback(decision, "disliked")
    assert alone.same_statement == [] and alone.also_said_in == [said.id]
    assert cb.get_feedback(said.id).label == "neutral"  # type: ignore[union-attr]
    cb.feedback(decision, "neutral")

    # a retracted message takes the statement cut from it out of every later prompt
    cb.expire_message("s1", said.id)
    assert "MongoDB" not in prompt() and "MongoDB" not in prompt("s1")


def test_a_rating_given_before_the_statement_rule_still_holds_in_assembly(
    cb: ContextBase,
) -> None:
    """A message rated wrong whose decision carries no rating of its own (rated before
    ratings reached the statements cut from it): assembly reads the message's rating."""
    said = cb.record(
        "assistant_message",
        session_id="s1",
        text="Decision: we will use MongoDB for billing. I checked the benchmarks yesterday.",
    )
    cb.flush()
    from ctxbase.model import StateFact

    cb.store.set_state(
        StateFact(
            project_id=cb.project,
            scope=FEEDBACK_SCOPE,
            scope_id="",
            key=said.id,
            value={"label": "wrong", "confidence": 0.0, "by": "user:old"},
            cause="feedback wrong",
        )
    )
    cb.store.touch_index(cb.project)
    ctx = cb.assemble_context(
        agent_role="planner", user_intent="which database do we use for billing?", session_id="s2"
    )
    assert "MongoDB" not in "\n".join(str(m["content"]) for m in ctx.messages)
    trace = cb.get_trace(ctx.context_id)
    assert any(d["reason"] == "rated false" and said.id in d["detail"] for d in trace["dropped"])
