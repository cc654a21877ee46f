"""The tool definitions and the OpenAI-format dispatcher, against a real context base on
both backends: what a model's tool call does, and what it gets back when it is wrong."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from ctxbase import ContextBase
from ctxbase.errors import NotFoundError, UnknownReposError, ValidationError
from ctxbase.integrations.tools import TOOLS, ToolScope, handle_tool_call, openai_tools
from ctxbase.retrieve.config import SearchConfig
from ctxbase.store.base import ItemFilter


def call(scope: ToolScope, name: str, arguments: object) -> dict:
    return json.loads(handle_tool_call(scope, name, arguments))  # type: ignore[arg-type]


def test_openai_export_is_valid_function_calling_json() -> None:
    tools = openai_tools()
    assert [t["function"]["name"] for t in tools] == list(TOOLS)
    for t in tools:
        assert t["type"] == "function"
        params = t["function"]["parameters"]
        assert params["type"] == "object" and params["additionalProperties"] is False
        assert set(params.get("required", [])) <= set(params["properties"])
        assert "project" not in params["properties"]  # the host decides the project
        json.dumps(t)  # plain JSON
    assert [t["function"]["name"] for t in openai_tools(["search_memory"])] == ["search_memory"]


def test_remember_stores_the_text_as_written(cb: ContextBase) -> None:
    """A code snippet keeps its first line's indentation and its last newline, as record()
    keeps them; the names around it are trimmed."""
    scope = ToolScope(cb, agent_id="coder")
    snippet = "    return cache.get(key)\n  # end\n"
    stored = call(scope, "remember", {"text": snippet, "session_id": " s1 "})
    assert "error" not in stored, stored
    (event,) = cb.last_events("s1", 1)
    assert event.text == snippet


def test_errors_name_the_arguments_the_model_wrote(cb: ContextBase) -> None:
    """Not the library's own names (filters.types, key), and list items as the library
    writes them (parent_event_ids[0], not parent_event_ids.0)."""
    scope = ToolScope(cb, agent_id="coder")
    for name, arguments, field in (
        ("search_memory", {"query": "x", "types": ["nope"]}, "types"),
        ("remember", {"text": "v", "fact_key": "k\nk"}, "fact_key"),
        ("remember", {"text": "x", "parent_event_ids": [None]}, "parent_event_ids[0]"),
        ("remember", {"text": "x", "parent_event_ids": ["ev_nope"]}, "parent_event_ids[0]"),
        # a yes/no is no number, whichever number argument it is given for
        ("assemble_context", {"intent": "x", "max_tokens": True}, "max_tokens"),
        ("search_memory", {"query": "x", "min_similarity": True}, "min_similarity"),
        ("search_memory", {"query": "x", "top_k": False}, "top_k"),
    ):
        error = call(scope, name, arguments)["error"]
        assert error["field"] == field and error["message"].startswith(f"{field}: "), error


def test_dispatcher_runs_model_calls(cb: ContextBase) -> None:
    writes: list[str] = []
    scope = ToolScope(cb, agent_id="coder", agent_role="coder", on_write=writes.append)
    # Arguments arrive as the JSON string the chat API returns.
    stored = call(scope, "remember", '{"text": "cache TTL is 60 s", "session_id": "s1"}')
    assert stored["kind"] == "event"
    assert writes == [cb.project, cb.project]  # before and after the write
    fact = call(scope, "remember", {"text": "50000", "fact_key": "budget", "fact_scope": "project"})
    assert fact == {"kind": "fact", "key": "budget", "scope": "project", "version": 1}
    hits = call(scope, "search_memory", '{"query": "cache TTL", "mode": "keyword"}')["results"]
    assert hits[0]["id"] == stored["event_id"] and hits[0]["agent_id"] == "coder"
    ctx = call(scope, "assemble_context", {"intent": "what is the budget"})
    assert "50000" in json.dumps(ctx["messages"])
    assert call(scope, "get_trace", {"context_id": ctx["context_id"]})["policy"]
    assert call(scope, "forget", {"session_id": "s1"}) == {
        "hard": False,
        "hidden": 1,
        "unchanged": [],
        "not_found": [],
        "already_forgotten": [],
        "sources_hidden": [],
        "sources_still_visible": [],
        "same_text_still_visible": [],
        "facts_deleted": [],
    }
    assert call(scope, "search_memory", {"query": "cache TTL", "mode": "keyword"})["results"] == []
    gone = call(scope, "forget", {"event_ids": [stored["event_id"]], "hard": True})
    assert gone["hard"] is True and gone["removed"]
    assert gone["not_found"] == [] and gone["already_forgotten"] == []
    # a retried forget says what it found forgotten already, and what it never found
    again = call(scope, "forget", {"event_ids": [stored["event_id"], "ev_typo"], "hard": True})
    assert again["already_forgotten"] == [stored["event_id"]] and again["not_found"] == ["ev_typo"]


def test_forget_names_a_session_it_does_not_find(cb: ContextBase) -> None:
    """As the CLI and the library: an unknown session is not found, alone an error; a
    session hard-forgotten before is already forgotten, no error."""
    scope = ToolScope(cb)
    err = call(scope, "forget", {"session_id": "nope"})["error"]
    assert err["code"] == "not_found" and "session 'nope'" in err["message"], err
    kept = call(scope, "remember", {"text": "cache TTL is 60 s", "session_id": "s1"})["event_id"]
    done = call(scope, "forget", {"event_ids": [kept], "session_id": "nope"})
    assert done["hidden"] == 1 and done["not_found"] == ["nope"], done
    err = call(scope, "forget", {"event_ids": ["ev_typo"], "session_id": "nope"})["error"]
    assert err["code"] == "not_found" and "'ev_typo', session 'nope'" in err["message"], err
    call(scope, "remember", {"text": "to be forgotten", "session_id": "gone"})
    assert call(scope, "forget", {"session_id": "gone", "hard": True})["removed"]["events"] == 1
    again = call(scope, "forget", {"session_id": "gone"})
    assert again["hidden"] == 0 and again["already_forgotten"] == ["gone"], again
    assert again["not_found"] == []
    both = call(scope, "forget", {"event_ids": ["ev_typo"], "session_id": "gone"})
    assert both["already_forgotten"] == ["gone"] and both["not_found"] == ["ev_typo"], both


def test_bad_calls_come_back_as_errors(cb: ContextBase) -> None:
    scope = ToolScope(cb)
    cases: list[tuple[str, object, str]] = [
        ("search_memory", "{not json", "arguments"),
        ("search_memory", "[1, 2]", "arguments"),
        ("search_memory", {}, "query"),
        ("search_memory", {"query": "x", "top_k": 500}, "top_k"),
        ("search_memory", {"query": "x", "mode": "fuzzy"}, "mode"),
        ("remember", {"text": "x", "project": "other"}, "project"),
        ("remember", {"text": "x", "session_id": "bad id!"}, "session_id"),
        ("forget", {}, "event_ids"),
        # a truthy string or number is no yes to deleting for good
        ("forget", {"session_id": "s1", "hard": "yes"}, "hard"),
        ("forget", {"session_id": "s1", "hard": 1}, "hard"),
        ("run_shell", {}, "name"),
    ]
    for name, args, field in cases:
        err = call(scope, name, args)["error"]
        assert err["code"] == "invalid" and err["field"] == field, (name, args, err)
    missing = call(scope, "get_trace", {"context_id": "ctx_missing"})["error"]
    assert missing["code"] == "not_found"
    # a mistyped session is not found, not an empty answer
    nowhere = call(scope, "search_memory", {"query": "cache", "session_id": "nope"})["error"]
    assert nowhere["code"] == "not_found" and "session 'nope'" in nowhere["message"], nowhere


def test_the_library_search_names_a_session_it_does_not_hold(cb: ContextBase) -> None:
    cb.capture("user_message", session_id="s-real", text="the orders cache ttl is 60 s")
    found = cb.search("orders cache", preset="keyword", session_id="s-real").results
    assert found and {c.item.session_id for c in found} == {"s-real"}
    # a held session with nothing matching is an empty answer, not an error
    assert cb.search("pelican", preset="keyword", session_id="s-real").results == []
    with pytest.raises(NotFoundError, match="session 'no-such-session' not found") as err:
        cb.search("orders cache", preset="keyword", session_id="no-such-session")
    assert err.value.kind == "session" and err.value.ids == ("no-such-session",)
    with pytest.raises(NotFoundError) as err:  # the filter says the same, naming every typo
        cb.search("pelican", filters={"session_ids": ["s-real", "s-x", "s-y"]})
    assert err.value.ids == ("s-x", "s-y") and "sessions 's-x', 's-y' not found" in str(err.value)


def test_the_library_names_and_messages_work_in_tools(cb: ContextBase) -> None:
    scope = ToolScope(cb, agent_role="coder")
    call(scope, "remember", {"text": "订单缓存过期时间 300 秒", "session_id": "s1"})
    # the library's keyword, user_intent, is accepted beside the tool's own, intent
    ctx = call(scope, "assemble_context", {"user_intent": "订单缓存过期时间", "session_id": "s1"})
    assert "error" not in ctx and "300" in json.dumps(ctx["messages"])
    both = call(scope, "assemble_context", {"intent": "a", "user_intent": "b"})["error"]
    assert both["field"] == "user_intent" and "same" in both["message"]
    # blank text is said to be blank, as the library says it
    for blank in ("   ", "", "\n\t"):
        err = call(scope, "remember", {"text": blank})["error"]
        assert (err["field"], err["message"]) == ("text", "text: is blank"), err
    err = call(scope, "assemble_context", {"intent": "  "})["error"]
    assert (err["field"], err["message"]) == ("intent", "intent: is blank")


def test_roles_limit_what_a_call_may_do(cb: ContextBase) -> None:
    reader = ToolScope(cb, role="read")
    assert call(reader, "remember", {"text": "x"})["error"]["code"] == "forbidden"
    assert call(reader, "list_sessions", {}) == {"sessions": []}
    writer = ToolScope(cb, role="write")
    event_id = call(writer, "remember", {"text": "x"})["event_id"]
    denied = call(writer, "forget", {"event_ids": [event_id], "hard": True})["error"]
    assert denied["code"] == "forbidden"
    assert call(writer, "forget", {"event_ids": [event_id]})["hidden"] == 1
    # an agent retrying the hide is told it was hidden already, not given an error
    again = call(writer, "forget", {"event_ids": [event_id, "ev_typo"]})
    assert again["hidden"] == 0 and again["unchanged"] == [event_id]
    assert again["not_found"] == ["ev_typo"]


def test_scope_is_checked_when_built(cb: ContextBase) -> None:
    import pytest

    from ctxbase import ValidationError

    for bad, field in (({"role": "root"}, "role"), ({"agent_id": "a b"}, "agent_id")):
        with pytest.raises(ValidationError) as err:
            ToolScope(cb, **bad)  # type: ignore[arg-type]
        assert err.value.field == field
    with pytest.raises(ValidationError):
        ToolScope(cb, project="x y")


def test_search_memory_narrows_to_repositories(cb: ContextBase, tmp_path: Path) -> None:
    # seed 002's active tool: search_mem(query, repos) -> only those repositories' blocks
    for repo in ("user-service", "auth-repo"):
        folder = tmp_path / repo
        folder.mkdir()
        (folder / "compat.md").write_text(f"# {repo} notes\n\nauth_v2 token refresh workaround\n")
        cb.ingest(str(folder), repo=repo)
    scope = ToolScope(cb, agent_id="coder", agent_role="coder")
    query = {"query": "auth_v2 token refresh workaround", "mode": "keyword"}
    everywhere = call(scope, "search_memory", query)["results"]
    assert {h.get("repo") for h in everywhere} == {"user-service", "auth-repo"}
    mine = call(scope, "search_memory", {**query, "repos": ["auth-repo"]})["results"]
    assert mine and {h["repo"] for h in mine} == {"auth-repo"}
    one = call(scope, "search_memory", {**query, "repos": "auth-repo"})["results"]  # a list of one
    assert [h["id"] for h in one] == [h["id"] for h in mine]
    # one type as a string is a list of one too; `true` is no count of hits
    typed = call(scope, "search_memory", {**query, "types": "section", "repos": "auth-repo"})
    assert typed["results"] and {h["type"] for h in typed["results"]} == {"section"}
    flag = call(scope, "search_memory", {**query, "top_k": True})["error"]
    assert flag["field"] == "top_k", flag
    # a mistyped repository is not an empty memory: the error names the real ones
    typo = call(scope, "search_memory", {**query, "repos": ["nowhere"]})["error"]
    assert typo["code"] == "not_found" and "'nowhere'" in typo["message"]
    assert "its repositories: auth-repo, user-service" in typo["message"]
    with pytest.raises(UnknownReposError) as err:  # the library's search says the same
        cb.search("auth_v2", filters=ItemFilter(repos=("nowhere",)))
    assert err.value.ids == ("nowhere",) and err.value.known == ["auth-repo", "user-service"]


def test_rate_memory_sets_the_confidence_search_shows(cb: ContextBase) -> None:
    scope = ToolScope(cb, agent_id="tester", agent_role="tester")
    good = call(scope, "remember", {"text": "the orders cache ttl is 60 s", "session_id": "s"})
    bad = call(scope, "remember", {"text": "the orders cache ttl is 5 s", "session_id": "s"})
    args = {"id": bad["event_id"], "label": "disliked", "note": "old", "confidence": 0.1}
    rated = call(scope, "rate_memory", args)
    assert rated == {"id": bad["event_id"], "label": "disliked", "confidence": 0.1}
    feedback = cb.get_feedback(bad["event_id"])
    assert feedback is not None and feedback.by == "agent:tester" and feedback.note == "old"
    hits = call(scope, "search_memory", {"query": "orders cache ttl", "mode": "keyword"})
    by_id = {h["id"]: h for h in hits["results"]}
    assert by_id[bad["event_id"]]["confidence"] == 0.1
    assert "confidence" not in by_id[good["event_id"]]
    assert hits["results"][0]["id"] == good["event_id"]
    # wrong: false, left out of what the agent searches from now on
    assert call(scope, "rate_memory", {"id": bad["event_id"], "label": "wrong"})["confidence"] == 0
    hits = call(scope, "search_memory", {"query": "orders cache ttl", "mode": "keyword"})
    assert [h["id"] for h in hits["results"]] == [good["event_id"]]
    wrong_label = call(scope, "rate_memory", {"id": bad["event_id"], "label": "great"})
    assert "error" in wrong_label
    reader = ToolScope(cb, agent_id="r", role="read")
    denied = call(reader, "rate_memory", {"id": bad["event_id"], "label": "liked"})
    assert "error" in denied
    # a decision cut from a message that says more: rated alone, the answer names the message
    said = call(
        scope,
        "remember",
        {"text": "Decision: the orders cache TTL is 30 s. Load tests agree.", "session_id": "s"},
    )
    cb.flush()
    made = cb.store.list_relations(cb.project, [said["event_id"]], direction="out")
    decision = next(r.to_id for r in made if r.to_id.startswith("decision:"))
    both = call(scope, "rate_memory", {"id": said["event_id"], "label": "disliked"})
    assert both["same_statement"] == [decision]
    alone = call(scope, "rate_memory", {"id": decision, "label": "liked"})
    assert alone["also_said_in"] == [said["event_id"]] and "same_statement" not in alone


def test_forget_tool_removes_a_repository_only_when_hard(cb: ContextBase, tmp_path: Path) -> None:
    for repo in ("user-service", "auth-repo"):
        folder = tmp_path / repo
        folder.mkdir()
        (folder / "compat.md").write_text(f"# {repo} notes\n\nauth_v2 token refresh workaround\n")
        cb.ingest(str(folder), repo=repo)
    admin = ToolScope(cb, agent_id="ops", role="admin")
    soft = call(admin, "forget", {"repos": ["auth-repo"]})["error"]
    assert soft["code"] == "invalid" and "hard" in soft["message"]
    typo = call(admin, "forget", {"repos": ["auth-rpo"], "hard": True})["error"]
    assert typo["code"] == "not_found" and "auth-repo, user-service" in typo["message"]
    done = call(admin, "forget", {"repos": ["auth-repo"], "hard": True})
    assert done["repos"] == ["auth-repo"] and done["removed"]["entities"] >= 2
    assert cb.store.list_repos(cb.project) == ["user-service"]
    again = call(admin, "forget", {"repos": ["auth-repo"], "hard": True})
    assert (again["repos"], again["already_forgotten"], again["removed"]) == ([], ["auth-repo"], {})
    query = {"query": "auth_v2 token refresh workaround", "mode": "keyword"}
    left = call(admin, "search_memory", query)["results"]
    assert left and {h["repo"] for h in left} == {"user-service"}


def test_search_finds_current_facts_only(cb: ContextBase) -> None:
    """A fact remembered with fact_key is found by search_memory under `facts`; a replaced
    value and a forgotten fact are not."""
    scope = ToolScope(cb, agent_id="claude")
    budget = {"fact_key": "budget", "fact_scope": "project"}
    call(scope, "remember", {"text": "budget is 50k", **budget})
    found = call(scope, "search_memory", {"query": "what is the budget"})["facts"]
    assert [(f["key"], f["value"], f["scope"]) for f in found] == [
        ("budget", "budget is 50k", "project")
    ]
    budget = {"fact_key": "budget", "fact_scope": "project"}
    call(scope, "remember", {"text": "budget is 80k", **budget})
    found = call(scope, "search_memory", {"query": "budget"})["facts"]
    assert [(f["value"], f["version"]) for f in found] == [("budget is 80k", 2)]
    # a session's fact is found without naming the session, and by its key's words
    call(scope, "remember", {"text": "PostgreSQL 16", "fact_key": "billing.db", "session_id": "s2"})
    hit = call(scope, "search_memory", {"query": "billing database"})["facts"]
    assert [(f["key"], f.get("session_id")) for f in hit] == [("billing.db", "s2")]
    assert "facts" not in call(scope, "search_memory", {"query": "giraffes"})
    # a types filter without "fact" leaves facts out
    typed = call(scope, "search_memory", {"query": "budget", "types": ["user_message"]})
    assert "facts" not in typed
    gone = call(scope, "forget", {"fact_keys": ["budget"], "fact_scope": "project"})
    assert gone == {"facts_deleted": ["budget"], "facts_not_found": []}
    assert "facts" not in call(scope, "search_memory", {"query": "budget"})
    again = call(scope, "forget", {"fact_keys": ["budget"], "fact_scope": "project"})["error"]
    assert again["code"] == "not_found" and "no fact 'budget'" in again["message"], again
    # the old value stays in the fact's history (a delete is a recorded change)
    history = cb.fact_history("budget", scope_id=cb.project, scope="project")
    assert [h.deleted for h in history][-1] is True


def test_a_remembered_fact_with_a_ttl_is_not_found_once_it_lapsed(cb: ContextBase) -> None:
    scope = ToolScope(cb, agent_id="claude")
    code = {"fact_key": "otp", "fact_scope": "project", "fact_ttl": 1800}
    assert call(scope, "remember", {"text": "otp code 884213", **code})["version"] == 1
    fact = cb.get_facts(scope_id=cb.project, scope="project")["otp"]
    assert fact.ttl == 1800.0
    assert [f["value"] for f in call(scope, "search_memory", {"query": "otp code"})["facts"]] == [
        "otp code 884213"
    ]
    # as if written an hour ago: past its 30 minutes, out of searches and contexts
    cb.store.set_state(fact.model_copy(update={"updated_at": time.time() - 3600}))
    assert "facts" not in call(scope, "search_memory", {"query": "otp code"})
    ctx = call(scope, "assemble_context", {"intent": "what is the otp code"})
    assert "884213" not in json.dumps(ctx["messages"])
    error = call(scope, "remember", {"text": "x", "fact_ttl": 60})["error"]
    assert error["field"] == "fact_ttl" and "fact_key" in error["message"], error
    error = call(scope, "remember", {"text": "x", "fact_key": "k", "fact_ttl": 0})["error"]
    assert "fact_ttl" in json.dumps(error), error


def test_session_facts_make_a_session_that_forget_reaches(cb: ContextBase) -> None:
    scope = ToolScope(cb, agent_id="claude")
    call(scope, "remember", {"text": "db choice", "fact_key": "billing.db", "session_id": "s2"})
    sessions = call(scope, "list_sessions", {})["sessions"]
    assert [s["session_id"] for s in sessions] == ["s2"]
    done = call(scope, "forget", {"session_id": "s2"})
    assert done["facts_deleted"] == ["billing.db"] and done["not_found"] == [], done
    assert cb.get_facts(scope_id="s2", scope="session") == {}
    # a fact set through the library for a session nothing was captured in: forgettable
    cb.set_fact("k", "v", scope_id="lonely", scope="session")
    report = cb.forget(session_id="lonely")
    assert report.removed.get("state") == 1 and report.not_found == []
    assert cb.get_facts(scope_id="lonely", scope="session") == {}
    call(scope, "remember", {"text": "x", "fact_key": "k3", "session_id": "s3"})
    hard = call(scope, "forget", {"session_id": "s3", "hard": True})
    assert hard["removed"]["state"] == 1 and hard["removed"]["sessions"] == 1
    # by key, from the named session's facts only
    call(scope, "remember", {"text": "blue", "fact_key": "colour", "session_id": "s4"})
    call(scope, "remember", {"text": "event in s4", "session_id": "s4"})
    keyed = call(scope, "forget", {"fact_keys": ["colour", "size"], "session_id": "s4"})
    assert keyed == {"facts_deleted": ["colour"], "facts_not_found": ["size"]}
    assert len(cb.last_events("s4", 10)) == 1  # the session's events stay


def test_argument_errors_come_all_at_once_named_as_the_tool(cb: ContextBase) -> None:
    scope = ToolScope(cb)
    event_id = call(scope, "remember", {"text": "x"})["event_id"]
    err = call(scope, "rate_memory", {"id": event_id, "rating": "helpful"})["error"]
    assert err["message"] == "label: is missing; rating: unknown argument; did you mean 'label'?"
    assert err["field"] == "label" and err["fields"] == ["label", "rating"]
    err = call(scope, "search_memory", {"query": " ", "top_k": 0, "bogus": 1})["error"]
    assert err["fields"] == ["query", "top_k", "bogus"], err
    assert err["message"].startswith("query: is blank; top_k: ")
    assert "bogus: unknown argument (arguments: query, top_k," in err["message"]
    typo = call(scope, "assemble_context", {"intnet": "x"})["error"]
    assert "intnet: unknown argument; did you mean 'intent'?" in typo["message"]
    # the library's names are not the tool's: event_type, not type; a memory, not a node
    banana = call(scope, "remember", {"text": "t", "event_type": "banana"})["error"]
    assert banana["field"] == "event_type" and "banana" in banana["message"]
    assert banana["fields"] == ["event_type"]  # present with one problem too
    nope = call(scope, "rate_memory", {"id": "nope", "label": "helpful"})["error"]
    assert nope["code"] == "not_found" and nope["message"].startswith("no memory 'nope'")
    assert "node" not in nope["message"]
    assert nope["field"] is None and nope["fields"] == []  # names no argument: empty


def test_an_unknown_argument_gets_its_hint_whatever_else_is_wrong(cb: ContextBase) -> None:
    scope = ToolScope(cb)
    cases = [
        ("rate_memory", {"rating": "wrong"}, "rating", "label"),  # `id` missing too
        ("rate_memory", {"id": "ev_x", "rating": "wrong"}, "rating", "label"),
        ("search_memory", {"query": "x", "k": 3}, "k", "top_k"),  # the adapters' name
        ("search_memory", {"k": 3}, "k", "top_k"),
        ("forget", {"node": "ev_x"}, "node", "event_ids"),
        ("forget", {"ids": ["ev_x"], "hard": "maybe"}, "ids", "event_ids"),
        ("assemble_context", {"query": "x"}, "query", "intent"),
    ]
    for tool, arguments, unknown, meant in cases:
        err = call(scope, tool, arguments)["error"]
        assert f"{unknown}: unknown argument; did you mean {meant!r}?" in err["message"], err
        assert unknown in err["fields"] and err["field"] in err["fields"]
    # a synonym names only an argument the tool has (search_memory has no event_ids)
    err = call(scope, "search_memory", {"query": "x", "node": "ev_x"})["error"]
    assert "event_ids" not in err["message"]
    # `fields` is always there: one problem, an error naming no argument, or none at all
    one = call(scope, "search_memory", {"query": " "})["error"]
    assert one["fields"] == ["query"] == [one["field"]]
    bad_json = json.loads(handle_tool_call(scope, "search_memory", "{not json"))["error"]
    assert bad_json["fields"] == ["arguments"]
    unknown_tool = json.loads(handle_tool_call(scope, "no_such_tool", "{}"))["error"]
    assert unknown_tool["fields"] == ["name"]


def test_tool_limits_are_the_librarys(cb: ContextBase) -> None:
    """A query or intent of up to 8,000 characters (MAX_QUERY_CHARS), as the library and
    REST take; one longer is refused naming the argument."""
    scope = ToolScope(cb)
    call(scope, "remember", {"text": "orders are cached"})
    long_query = "orders " * 1100  # 7,700 characters
    assert "results" in call(scope, "search_memory", {"query": long_query})
    err = call(scope, "search_memory", {"query": "x" * 8001})["error"]
    assert err["field"] == "query" and "8000" in err["message"], err
    err = call(scope, "assemble_context", {"intent": "x" * 8001})["error"]
    assert err["field"] == "intent", err
    props = TOOLS["remember"].input_schema()["properties"]
    # remember's limit is in bytes, said in its description (a maxLength counts characters)
    assert "maxLength" not in props["text"]
    assert "at most 1,000,000 bytes as UTF-8" in props["text"]["description"]


def test_a_new_projects_scope_searches_and_assembles_before_anything_is_remembered(
    cb: ContextBase,
) -> None:
    # an agent's first turn on a project that holds nothing yet: empty answers, not errors
    scope = ToolScope(cb, project="brand-new", agent_id="coder", agent_role="coder")
    assert call(scope, "search_memory", {"query": "cache TTL"})["results"] == []
    ctx = call(scope, "assemble_context", {"intent": "what is the cache TTL"})
    assert ctx["context_id"] and "error" not in ctx


def test_search_memory_takes_the_librarys_similarity_floor(cb: ContextBase) -> None:
    scope = ToolScope(cb)
    for text in ("The orders cache TTL is 300 seconds", "orders shipped late on Monday"):
        call(scope, "remember", {"text": text, "session_id": "s"})
    call(scope, "remember", {"text": "cache TTL for sessions is 60 seconds", "session_id": "s"})
    cb.wait_for_embeddings()
    query = {"query": "orders cache TTL", "mode": "keyword"}
    every = [h["id"] for h in call(scope, "search_memory", query)["results"]]
    floor = {**query, "min_similarity": 0.5}
    floored = [h["id"] for h in call(scope, "search_memory", floor)["results"]]
    library = cb.search(
        "orders cache TTL", preset="keyword", top_k=8, relevance_gate=True, min_similarity=0.5
    )
    assert floored and len(floored) < len(every)
    assert floored == [c.item.owner_id for c in library.results]
    assert all(c.similarity is not None and c.similarity >= 0.5 for c in library.results)
    # the library's limits, and its words for a value beyond them
    bounds = SearchConfig.model_json_schema()["properties"]["min_similarity"]["anyOf"][0]
    schema = TOOLS["search_memory"].input_schema()["properties"]["min_similarity"]["anyOf"][0]
    assert (schema["minimum"], schema["maximum"]) == (bounds["minimum"], bounds["maximum"])
    for bad in (1.5, -2, float("nan"), "high"):
        err = call(scope, "search_memory", {**query, "min_similarity": bad})["error"]
        with pytest.raises(ValidationError) as lib:
            cb.search("orders cache TTL", min_similarity=bad)
        assert (err["code"], err["field"]) == ("invalid", "min_similarity"), err
        assert err["message"] == str(lib.value), (err, lib.value)
    assert "results" in call(scope, "search_memory", {**query, "min_similarity": -1})


def test_search_memory_refuses_a_similarity_floor_without_an_embedder(tmp_path: Path) -> None:
    with ContextBase(str(tmp_path / "k.db"), project="p", embedder=None) as plain:
        scope = ToolScope(plain)
        call(scope, "remember", {"text": "orders are cached", "session_id": "s"})
        err = call(scope, "search_memory", {"query": "orders", "min_similarity": 0.5})["error"]
        assert (err["code"], err["field"]) == ("invalid", "min_similarity"), err
        assert "needs an embedder" in err["message"]
