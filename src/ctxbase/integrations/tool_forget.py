"""The forget tool's hiding and hard forgetting of events and sessions (`forget_nodes`),
and its answer's note (`told`): split from tools.py, whose `forget` handler calls them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..contextbase import ContextBase
from ..errors import NotFoundError, ValidationError
from ..forgetting import nothing_matched
from ..validation import check_id_list
from .tool_facts import session_facts
from .tools import HIDE_PAGE, session_events

if TYPE_CHECKING:
    from .tools import ForgetArgs, ToolScope

__all__ = ["forget_nodes", "told"]


def told(out: dict[str, Any]) -> dict[str, Any]:
    """The answer with a note when other memories say what was forgotten: an agent that
    forgot the hit it was shown would believe the text gone."""
    same = list(dict.fromkeys(out.get("same_text_still_visible") or []))
    out["same_text_still_visible"] = same
    if same:
        out["note"] = (
            f"{len(same)} other memor{'y says' if len(same) == 1 else 'ies say'} the same: "
            f"{', '.join(same)}; forget {'it' if len(same) == 1 else 'them'} too to remove it"
        )
    return out


def hard_forget_refused(role: str | None) -> Exception:
    """The tool's refusal of a hard forget to a key that is not an admin's, the same
    whether the tool or the service (`ctxbase mcp --url`) found the key lacking."""
    from ..serve.errors import PermissionDeniedError

    who = f"this one is {role!r}" if role else "this key is not one"
    return PermissionDeniedError(
        f"hard forget needs an admin key; {who}; forget without hard=true hides instead"
    )


def forget_nodes(scope: ToolScope, a: ForgetArgs) -> dict[str, Any]:
    check_id_list("event_ids", a.event_ids)  # named as the tool names them
    if a.repos and not a.hard:
        raise ValidationError(
            "repos", "a repository cannot be hidden (its next ingest brings it back): hard=true"
        )
    if a.hard and not scope.allows("admin"):
        raise hard_forget_refused(scope.role)
    pid = scope.project_id
    if a.hard:
        from ..serve.errors import PermissionDeniedError

        try:
            report = scope.cb.forget(
                event_ids=a.event_ids, session_id=a.session_id, repos=a.repos, project=pid
            )
        except PermissionDeniedError:  # the service's key decided (ctxbase mcp --url)
            raise hard_forget_refused(None) from None
        return {
            "hard": True,
            "removed": report.removed,
            "repos": list(report.repos),
            "not_found": list(report.not_found),
            "already_forgotten": list(report.already_forgotten),
            "sources_forgotten": list(report.sources_forgotten),
            "sources_still_visible": list(report.sources_still_visible),
            "same_text_still_visible": list(report.same_text_still_visible),
        }
    # the whole report, as a hard forget gives: a retried hide is "unchanged", not an error
    out: dict[str, Any] = {
        "hard": False,
        "hidden": 0,
        "unchanged": [],
        "not_found": [],
        "already_forgotten": [],
        "sources_hidden": [],
        "sources_still_visible": [],
        "same_text_still_visible": [],
    }

    def hide(ids: list[str]) -> int:
        seen = scope.cb.set_hidden(ids, True, project=pid)
        out["hidden"] += seen.changed
        out["unchanged"] += seen.unchanged
        out["not_found"] += seen.not_found
        out["already_forgotten"] += seen.already_forgotten
        out["sources_hidden"] += seen.sources_hidden
        out["sources_still_visible"] += seen.sources_still_visible
        out["same_text_still_visible"] += seen.same_text_still_visible
        return seen.changed

    def page() -> list[str]:
        # A session's visible events, newest first: a hidden event leaves the list, so each
        # call gives the next page; one the REST API allows (the remote client too).
        if not a.session_id:
            return []
        return [e.id for e in session_events(scope.cb, a.session_id, HIDE_PAGE, pid)]

    # A session the project does not hold is named in the answer, as the library's hard
    # forget names it; when nothing named is known at all, the call fails (not found).
    missing = _missing_session(scope, a.session_id) if a.session_id else None
    if missing == "not_found" and a.session_id and session_facts(scope, a.session_id):
        missing = None  # a session only facts were set for: its facts are forgotten
    if missing == "not_found" and not a.event_ids:
        raise nothing_matched("hide", [("session", a.session_id or "")], pid)
    if missing is not None:
        out[missing].append(a.session_id)
    ids = [*a.event_ids, *page()]
    if a.session_id and missing is None and not ids:
        out["unchanged"].append(a.session_id)  # held, every event of it hidden already
    try:
        changed = hide(ids) if ids else 0
    except NotFoundError:  # every id is unknown (a held session's pages are not)
        if not a.session_id:
            raise
        if missing == "not_found":
            named = [*(("", i) for i in dict.fromkeys(ids)), ("session", a.session_id)]
            raise nothing_matched("hide", named, pid) from None
        out["not_found"] += list(dict.fromkeys(ids))
        return out
    if changed and a.session_id:
        while (more := page()) and hide(more):
            pass  # a page that changes nothing (hidden elsewhere meanwhile) ends it
    return out


def _missing_session(scope: ToolScope, session_id: str) -> str | None:
    """None when the project holds the session; else the answer's list that names it:
    "already_forgotten" when the project hard-forgot it (its tombstone, read on an embedded
    base; the remote client cannot tell the two apart) and "not_found" otherwise."""
    try:
        scope.cb.get_session(session_id, project=scope.project_id)
        return None
    except NotFoundError as error:
        if error.kind != "session":
            raise
    if isinstance(scope.cb, ContextBase) and scope.cb.store.forgotten_ids(
        scope.project_id, [session_id], ("session",)
    ):
        return "already_forgotten"
    return "not_found"
