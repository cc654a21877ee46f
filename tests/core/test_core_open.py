"""`ctxbase.open` takes the seed articles' `project_id=` as well as `project=`."""

from __future__ import annotations

from pathlib import Path

import pytest

import ctxbase


def test_open_accepts_project_id_as_project(tmp_path: Path) -> None:
    db = str(tmp_path / "o.db")
    with ctxbase.open(db, project_id="shop", embedder=None) as cb:
        assert cb.project == "shop"
        cb.upsert_entity("document", "Budget", "under 50k")
    with ctxbase.open(db, project="shop", project_id="shop", embedder=None) as cb:
        assert [e.name for e in cb.list_entities()] == ["Budget"]


def test_open_refuses_two_different_projects(tmp_path: Path) -> None:
    with pytest.raises(ctxbase.ValidationError) as info:
        ctxbase.open(str(tmp_path / "o.db"), project="a", project_id="b", embedder=None)
    assert info.value.field == "project_id" and "'a'" in info.value.message
