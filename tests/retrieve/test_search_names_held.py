"""Every repository and session a search names must be one the project holds, even beside
names it holds: a typo next to a real name would otherwise search only the real one and
say nothing. Checked on the candidates first, so a search under held names reads nothing
more (the `cb` fixture runs on every backend)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxbase import ContextBase
from ctxbase.errors import NotFoundError, UnknownReposError
from ctxbase.store.base import ItemFilter
from store_calls import StoreCalls

LOOKUPS = ("get_state", "list_repos", "get_session", "list_sessions")


def _fill(cb: ContextBase, tmp_path: Path) -> None:
    for session in ("s1", "s2"):
        cb.record("user_message", session_id=session, text=f"the zebra cache in {session}")
    for repo in ("auth-repo", "user-service"):
        folder = tmp_path / repo
        folder.mkdir()
        (folder / "notes.md").write_text(f"# {repo}\n\nthe zebra cache of {repo}\n")
        cb.ingest(str(folder), repo=repo)
    cb.flush()  # capture anchoring done: its store calls are not a search's


def test_a_mistyped_repository_beside_a_held_one_is_an_error(
    cb: ContextBase, tmp_path: Path
) -> None:
    _fill(cb, tmp_path)
    assert cb.search("zebra cache", preset="keyword", repos=["auth-repo"]).results
    with pytest.raises(UnknownReposError) as err:
        cb.search("zebra cache", preset="keyword", repos=["auth-repo", "user-servce"])
    assert err.value.ids == ("user-servce",)
    assert err.value.known == ["auth-repo", "user-service"]
    with pytest.raises(UnknownReposError) as err:  # every unknown one named, in order
        cb.search("zebra", filters=ItemFilter(repos=("nowhere", "auth-repo", "elsewhere")))
    assert err.value.ids == ("nowhere", "elsewhere")


def test_a_mistyped_session_beside_a_held_one_is_an_error(cb: ContextBase, tmp_path: Path) -> None:
    _fill(cb, tmp_path)
    held = cb.search("zebra cache", preset="keyword", filters={"session_ids": ["s1", "s2"]})
    assert {c.item.session_id for c in held.results} == {"s1", "s2"}
    with pytest.raises(NotFoundError) as err:
        cb.search("zebra cache", preset="keyword", filters={"session_ids": ["s1", "s3"]})
    assert (err.value.kind, err.value.ids) == ("session", ("s3",))
    with pytest.raises(NotFoundError) as err:
        cb.search("zebra", filters=ItemFilter(session_ids=("s9", "s1", "s8")))
    assert err.value.ids == ("s9", "s8") and "sessions 's9', 's8' not found" in str(err.value)


def test_held_names_are_checked_on_the_candidates_first(cb: ContextBase, tmp_path: Path) -> None:
    _fill(cb, tmp_path)
    both = ItemFilter(repos=("auth-repo", "user-service"))
    sessions = ItemFilter(session_ids=("s1", "s2"))
    calls = StoreCalls(cb.store)

    def lookups(query: str, flt: ItemFilter | None) -> dict[str, int]:
        """The lookups a search makes, above those of the same search unfiltered."""
        cb.search(query, preset="keyword")  # what a search reads once is read by now
        calls.reset()
        cb.search(query, preset="keyword")
        plain = {name: calls.counts[name] for name in LOOKUPS}
        calls.reset()
        found = cb.search(query, preset="keyword", filters=flt).results
        assert bool(found) == (query == "zebra cache")
        extra = {name: calls.counts[name] - plain[name] for name in LOOKUPS}
        return {name: n for name, n in extra.items() if n}

    # every name came with a candidate of the search: nothing more is read
    assert lookups("zebra cache", both) == {}
    assert lookups("zebra cache", sessions) == {}
    # held names the query finds nothing under: one read by key for the repositories
    # (where each lives), one per session; never the project's items
    assert lookups("giraffe", both) == {"get_state": 1}
    assert lookups("giraffe", sessions) == {"get_session": 2}
