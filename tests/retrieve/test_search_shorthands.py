"""`search(session_id=..., repos=...)`: shorthands for the filters, as assemble_context and
the search_memory tool take them, merged into `filters=`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import ctxbase
from ctxbase import ContextBase
from ctxbase.errors import ValidationError
from ctxbase.store.base import ItemFilter


@pytest.fixture
def cb(tmp_path: Path) -> Iterator[ContextBase]:
    base = ctxbase.open(str(tmp_path / "s.db"), project="p", embedder="hash")
    for session in ("s1", "s2"):
        base.record("user_message", session_id=session, text=f"the zebra cache in {session}")
    for repo in ("auth-repo", "user-service"):
        folder = tmp_path / repo
        folder.mkdir()
        (folder / "notes.md").write_text(f"# {repo}\n\nthe zebra cache of {repo}\n")
        base.ingest(str(folder), repo=repo)
    yield base
    base.close()


def _ids(cb: ContextBase, **kw: object) -> list[str]:
    return [c.item.item_id for c in cb.search("zebra cache", preset="keyword", **kw).results]


def test_session_and_repos_narrow_as_the_filters_do(cb: ContextBase) -> None:
    by_filter = _ids(cb, filters=ItemFilter(session_ids=("s2",)))
    assert by_filter and _ids(cb, session_id="s2") == by_filter
    hits = cb.search("zebra cache", preset="keyword", session_id="s2").results
    assert {c.item.session_id for c in hits} == {"s2"}
    repo = _ids(cb, filters=ItemFilter(repos=("user-service",)))
    assert repo and _ids(cb, repos="user-service") == repo == _ids(cb, repos=["user-service"])
    # merged with other filters; the same value given both ways is no conflict
    both = _ids(cb, filters=ItemFilter(repos=("user-service",)), repos=["user-service"])
    assert both == repo
    assert _ids(cb, filters=ItemFilter(types=("user_message",)), session_id="s1") == _ids(
        cb, filters=ItemFilter(types=("user_message",), session_ids=("s1",))
    )


def test_a_shorthand_that_disagrees_with_the_filters_is_refused(cb: ContextBase) -> None:
    with pytest.raises(ValidationError) as err:
        cb.search("zebra", session_id="s1", filters=ItemFilter(session_ids=("s2",)))
    assert err.value.field == "session_id" and "disagree" in err.value.message
    with pytest.raises(ValidationError) as err:
        cb.search("zebra", repos=["auth-repo"], filters=ItemFilter(repos=("user-service",)))
    assert err.value.field == "repos"
    with pytest.raises(ValidationError) as err:
        cb.search("zebra", repos=[])
    assert err.value.field == "repos"


def test_filters_may_be_a_mapping_of_item_filter_fields(cb: ContextBase) -> None:
    # as REST takes them: the same hits as the ItemFilter, alone and with a shorthand
    by_filter = _ids(cb, filters=ItemFilter(session_ids=("s2",), types=("user_message",)))
    assert by_filter
    assert _ids(cb, filters={"session_ids": ["s2"], "types": ["user_message"]}) == by_filter
    assert _ids(cb, filters={"session_ids": "s2", "types": ("user_message",)}) == by_filter
    assert _ids(cb, session_id="s2", filters={"session_ids": ["s2"]}) == _ids(cb, session_id="s2")
    assert _ids(cb, repos="user-service", filters={"line_from": 1}) == _ids(
        cb, filters=ItemFilter(repos=("user-service",), line_from=1)
    )
    with pytest.raises(ValidationError) as err:
        cb.search("zebra", session_id="s1", filters={"session_ids": ["s2"]})
    assert err.value.field == "session_id" and "disagree" in err.value.message


def test_a_mapping_with_unknown_keys_or_wrong_values_is_refused(cb: ContextBase) -> None:
    with pytest.raises(ValidationError) as err:
        cb.search("zebra", filters={"session_id": "s1", "colour": "red"})
    assert err.value.field == "filters"
    assert "'session_id' (did you mean 'session_ids'?)" in err.value.message
    assert "'colour'" in err.value.message and "latest_only" in err.value.message
    with pytest.raises(ValidationError) as err:
        cb.search("zebra", filters={"line_from": "3"})
    assert err.value.field == "filters.line_from"
    with pytest.raises(ValidationError) as err:
        cb.search("zebra", filters={"since": float("nan")})
    assert err.value.field == "filters.since"
    with pytest.raises(ValidationError) as err:
        cb.search("zebra", filters={"session_ids": 7})
    assert err.value.field == "filters.session_ids"
    with pytest.raises(ValidationError) as err:
        cb.search("zebra", filters=["s1"])  # type: ignore[arg-type]
    assert err.value.field == "filters" and "mapping" in err.value.message
