"""Mention edges of an ingest do not depend on the order files came in or on a run that
stopped part-way: a re-ingest ends with the edges a clean ingest of the folder weaves."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ctxbase import ContextBase
from ctxbase.anchor.ingest import ingest_path
from ctxbase.anchor.ingest_weave import WEAVE_SCOPE


class Stop(Exception):
    pass


def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    return root


def _edges(cb: ContextBase) -> dict[tuple[str, str, str], float]:
    """The open edges other than CONTAINS, by (from, type, to), each end named by its type,
    path and name (ids differ between projects)."""
    pid = cb.resolve_project(None)
    label = {
        e.id: f"{e.type} {e.properties.get('path')} {e.name}"
        for e in cb.store.list_entities(pid, latest_only=False)
    }
    return {
        (label[r.from_id], r.type, label[r.to_id]): round(r.confidence, 3)
        for r in cb.store.list_relations(pid)
        if r.type != "CONTAINS"
    }


def _clean(cb: ContextBase, folder: Path, tmp_path: Path) -> dict[tuple[str, str, str], float]:
    """What a clean ingest of the same folder weaves (a copy under the same name, in a
    fresh project of the same store)."""
    copy = tmp_path / "clean" / folder.name
    shutil.rmtree(copy.parent, ignore_errors=True)
    shutil.copytree(folder, copy)
    pid = f"{cb.resolve_project(None)}-clean"
    fresh = ContextBase(cb.store, project=pid, embedder="hash", background_embedding=False)
    ingest_path(fresh, copy)
    return _edges(fresh)


def _pending(cb: ContextBase) -> bool:
    return bool(cb.store.get_state(cb.resolve_project(None), WEAVE_SCOPE, "", "docs"))


def test_names_that_come_and_go_are_woven_into_unchanged_files(
    cb: ContextBase, tmp_path: Path
) -> None:
    docs = _write(
        tmp_path / "docs",
        {
            "a.md": "# Checkout Flow\n\nThe checkout follows the Payment Retry Guide; "
            "cards go through `retry_payment`.\n",
            "z.md": "# Zebra Notes\n\nNothing named here.\n",
        },
    )
    ingest_path(cb, docs)
    section = "section a.md a.md > Checkout Flow"
    guide = "document b.md Payment Retry Guide"
    assert not any(to == guide for _, _, to in _edges(cb))

    # a document titled as a.md says, and a function a.md names, arrive in a later ingest
    _write(
        docs,
        {
            "b.md": "# Payment Retry Guide\n\nRetry a failed card three times.\n",
            "pay.py": "def retry_payment(card):\n    return card\n",
        },
    )
    report = ingest_path(cb, docs)
    assert report.files_unchanged == 2 and report.units_rewoven >= 1
    edges = _edges(cb)
    linked = {to for frm, kind, to in edges if frm == section and kind == "REFERENCES"}
    assert guide in linked and "code pay.py pay.retry_payment" in linked, linked
    assert edges == _clean(cb, docs, tmp_path)

    # a second document with the same title: the name is ambiguous now (0.6 each)
    _write(docs, {"c.md": "# Payment Retry Guide\n\nThe old retry rules.\n"})
    ingest_path(cb, docs)
    edges = _edges(cb)
    assert edges[(section, "REFERENCES", guide)] == 0.6
    assert edges == _clean(cb, docs, tmp_path)

    # both go: a.md names nothing of them any more, so its edges to them are closed
    (docs / "b.md").unlink()
    (docs / "c.md").unlink()
    ingest_path(cb, docs)
    edges = _edges(cb)
    assert (section, "REFERENCES", guide) not in edges
    assert edges == _clean(cb, docs, tmp_path)

    # nothing changed: nothing is read again
    again = ingest_path(cb, docs)
    assert (again.units_rewoven, again.relations_written, again.relations_closed) == (0, 0, 0)


def _library(n: int, shift: int) -> dict[str, str]:
    """n documents, each naming the titles of two others (which ones depends on `shift`),
    and code whose calls depend on it too (listed first)."""
    callee = "beta_two" if shift == 1 else "gamma_three"
    code = (
        f"def alpha_one():\n    return {callee}()\n\n\n"
        "def beta_two():\n    return 2\n\n\ndef gamma_three():\n    return 3\n"
    )
    return {"a_calls.py": code} | {
        f"d{i:03d}.md": f"# Topic {i:03d} Guide\n\nSee Topic {(i + shift) % n:03d} Guide and "
        f"Topic {(i + 2 * shift) % n:03d} Guide.\n\n## Details {i:03d}\n\n"
        f"Details follow Topic {(i + 3) % n:03d} Guide.\n"
        for i in range(n)
    }


def _stop_at(count: int):  # type: ignore[no-untyped-def]
    def progress(done: int, total: int, path: str) -> None:
        if done == count:
            raise Stop(path)

    return progress


def test_an_ingest_stopped_part_way_is_completed_by_the_next_run(
    cb: ContextBase, tmp_path: Path
) -> None:
    docs = _write(tmp_path / "docs", _library(30, 1))
    with pytest.raises(Stop):
        ingest_path(cb, docs, progress=_stop_at(12))
    assert _pending(cb)  # files were written, their edges not
    report = ingest_path(cb, docs)
    assert report.files_unchanged == 12 and report.files_new == 19
    assert report.units_rewoven == 33  # the stopped run's 11 documents, 2 sections each
    assert report.weave_resumed and "stopped before weaving" in report.summary()
    assert not _pending(cb)
    clean = _clean(cb, docs, tmp_path)
    assert len([k for k in clean if k[1] == "REFERENCES"]) > 60
    assert _edges(cb) == clean

    # the texts change (other titles named, another function called), and the run stops
    # again part-way: the edges of the files it rewrote but never wove are closed next run
    _write(docs, _library(30, 5))
    with pytest.raises(Stop):
        ingest_path(cb, docs, progress=_stop_at(20))
    assert _pending(cb)
    ingest_path(cb, docs)
    assert not _pending(cb)
    edges = _edges(cb)
    calls = {to for frm, kind, to in edges if kind == "CALLS" and "alpha_one" in frm}
    assert calls == {"code a_calls.py a_calls.gamma_three"}, calls
    assert edges == _clean(cb, docs, tmp_path)
    after = ingest_path(cb, docs)
    assert (after.units_rewoven, after.relations_written, after.relations_closed) == (0, 0, 0)
    assert not after.weave_resumed
