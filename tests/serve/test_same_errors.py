"""The same mistake raises the same exception class embedded and through the remote SDK,
with the same message and attributes: the server names the class the library raised and
the SDK raises that class, not its base (an `except IllegalTransition` catches both)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from live_server import Live

import ctxbase
from ctxbase.assemble.budget import BudgetTooSmall
from ctxbase.assemble.lifecycle import IllegalTransition, ReadOnlyRecord
from ctxbase.assemble.policy_issues import PolicyError, PolicyIssue
from ctxbase.capture.bus import CaptureError
from ctxbase.errors import CtxbaseError, NotFoundError, UnknownProjectError, UnknownReposError
from ctxbase.idempotency import IdempotencyConflict
from ctxbase.serve.errors import error_body, exception_from_body

Mistake = Callable[[Any], object]


def _seeded(api: Any) -> Any:
    api.create_session("s1")
    api.record("user_message", session_id="s1", text="orders are cached", idempotency_key="k1")
    api.create_session("s2")
    api.archive_session("s2")
    api.flush()
    return api


MISTAKES: dict[str, tuple[type[CtxbaseError], Mistake]] = {
    "event not found": (NotFoundError, lambda api: api.get_event("ev_nope")),
    "idempotency key reused": (
        IdempotencyConflict,
        lambda api: api.record("user_message", session_id="s1", text="else", idempotency_key="k1"),
    ),
    "illegal transition": (IllegalTransition, lambda api: api.resume_session("s1")),
    "archived session written": (
        ReadOnlyRecord,
        lambda api: api.record("user_message", session_id="s2", text="late"),
    ),
    "unknown project": (UnknownProjectError, lambda api: api.search("x", project="zz-typo")),
    "unknown repository": (UnknownReposError, lambda api: api.forget(repo="nope")),
    "budget too small": (
        BudgetTooSmall,
        lambda api: api.assemble_context(agent_role="a", user_intent="orders", max_tokens=5),
    ),
}


@pytest.fixture(scope="module")
def apis(live: Live, tmp_path_factory: pytest.TempPathFactory) -> Any:
    project = f"err-{uuid.uuid4().hex[:8]}"
    db = tmp_path_factory.mktemp("same-errors") / "embedded.db"
    embedded = _seeded(ctxbase.open(str(db), project=project, embedder="hash"))
    key = live.key(project, "zz-typo", role="admin")
    remote = _seeded(ctxbase.connect(live.url, api_key=key, project=project))
    yield embedded, remote
    embedded.close()
    remote.close()


@pytest.mark.parametrize("name", list(MISTAKES))
def test_the_same_mistake_raises_the_same_class(apis: Any, name: str) -> None:
    expected, mistake = MISTAKES[name]
    raised = []
    for api in apis:
        with pytest.raises(CtxbaseError) as err:
            mistake(api)
        raised.append(err.value)
    local, remote = raised
    assert type(local) is expected, local
    assert type(remote) is type(local), (name, type(remote), str(remote))
    assert str(remote) == str(local)
    for attr in ("kind", "item_id", "ids", "field", "current", "target", "max_tokens", "minimum"):
        assert getattr(remote, attr, None) == getattr(local, attr, None), attr


def test_an_illegal_transition_is_caught_as_the_value_error_it_is(apis: Any) -> None:
    _, remote = apis
    with pytest.raises(ValueError, match="illegal session transition active -> active"):
        remote.resume_session("s1")


def test_a_class_the_sdk_has_no_code_for_comes_back_as_itself() -> None:
    """Codes the SDK maps to no class of their own (a policy file's problems, a failed
    capture) still come back as the library's class, with the server's message."""
    issue = PolicyIssue("agents.coder.max_tokens", "must be positive")
    for exc in (PolicyError("policies.yaml", [issue]), CaptureError("disk full")):
        status, body = error_body(exc)
        back = exception_from_body(status, body)
        assert type(back) is type(exc) and str(back) == str(exc)
    back = exception_from_body(*error_body(PolicyError("policies.yaml", [issue])))
    assert isinstance(back, PolicyError) and back.source == "policies.yaml"


def test_a_class_name_the_sdk_does_not_know_keeps_the_base_class() -> None:
    body = {"error": {"code": "not_found", "message": "m", "kind": "k", "id": "i", "type": "Nope"}}
    back = exception_from_body(404, body)
    assert type(back) is NotFoundError and back.kind == "k"
    # a known class that is no kind of the code's class is not raised for it
    body["error"]["type"] = "IllegalTransition"
    assert type(exception_from_body(404, body)) is NotFoundError
