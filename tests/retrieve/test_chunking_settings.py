"""The chunking setting of a context base decides the search units of what it writes: a long
captured tool result and an ingested document are cut by it (on SQLite and PostgreSQL),
bad values are refused by name, and units written before a change keep their cut."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ctxbase import ContextBase
from ctxbase.anchor.plaintext import DEFAULT_CHUNK_CHARS
from ctxbase.anchor.signing import sign_stored_entities
from ctxbase.assemble.tokens import get_token_counter
from ctxbase.errors import ValidationError
from ctxbase.retrieve.chunking import (
    CHUNKING_PRESETS,
    DEFAULT_CHUNKING,
    ChunkingConfig,
    chunk_text,
    resolve_chunking,
)
from ctxbase.store.base import ItemFilter, SearchItem

# A long tool result: 120 sentences in paragraphs of six, about 2,500 tokens.
TOOL_OUTPUT = "\n\n".join(
    " ".join(
        f"Row {p * 6 + s}: the cache of region r{p} held {400 + s * 7} keys after warm-up "
        f"step {s}, and {s + 2} of them expired early."
        for s in range(6)
    )
    for p in range(20)
)

DOCUMENT = "# Cache design\n\n" + "\n\n".join(
    f"## Part {n}\n\n"
    + " ".join(
        f"The eviction policy of shard {n}.{s} keeps hot keys for {s + 3} minutes "
        f"and writes cold ones back in batches of {s * 10 + 5}."
        for s in range(14)
    )
    for n in range(4)
)

SMALL = ChunkingConfig(max_tokens=64, overlap_tokens=16)


def _units(base: ContextBase, owner_id: str) -> list[SearchItem]:
    """The stored search units of one event or entity, in chunk order."""
    ids = base.store.filter_item_ids(base.project, ItemFilter())
    items = [
        it for it in base.store.get_items(base.project, sorted(ids)) if it.owner_id == owner_id
    ]
    return sorted(items, key=lambda it: int(it.item_id[len(owner_id) + 1 :] or 0))


def _db(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """The database of a test: a SQLite file, or the shared PostgreSQL database."""
    return request.getfixturevalue("pg_url") if backend == "postgres" else str(tmp_path / "c.db")


@pytest.fixture
def bases(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Any]:
    """Opens bases on one backend (each its own project), all closed at the end."""
    db = _db(backend, tmp_path, request)
    opened: list[ContextBase] = []

    def open_base(project: str, **options: Any) -> ContextBase:
        opened.append(ContextBase(db, project=project, embedder=None, **options))
        return opened[-1]

    yield open_base
    for base in opened:
        base.close()


@pytest.mark.parametrize(
    "setting", ["default", SMALL, "coarse", {"max_tokens": 100, "overlap_tokens": 0}]
)
def test_a_captured_tool_result_is_cut_by_the_base_setting(
    bases: Any, project_id: str, setting: Any
) -> None:
    base = bases(project_id, chunking=setting)
    config = resolve_chunking(setting)
    assert base.chunking == config
    event = base.record("tool_result", session_id="s1", text=TOOL_OUTPUT)
    units = _units(base, event.id)
    expected = [c.text for c in chunk_text(TOOL_OUTPUT, config)]
    assert [u.text for u in units] == expected
    assert all(u.kind == "chunk" for u in units)
    count = get_token_counter().count
    assert max(count(u.text) for u in units) <= config.max_tokens
    # filled to the setting, not to the default: the largest chunk is above the next
    # smaller preset's size
    sizes = [SMALL.max_tokens, *(c.max_tokens for c in CHUNKING_PRESETS.values())]
    smaller = [size for size in sizes if size < config.max_tokens]
    if smaller:
        assert max(count(u.text) for u in units) > max(smaller)


def test_smaller_chunks_make_more_units_and_overlap_repeats_text(
    bases: Any, project_id: str
) -> None:
    settings = {
        "small": SMALL,
        "default": None,
        "coarse": "coarse",
        "flat": ChunkingConfig(max_tokens=256, overlap_tokens=0),
    }
    units: dict[str, list[SearchItem]] = {}
    for name, setting in settings.items():
        base = bases(f"{project_id}-{name}", chunking=setting)
        event = base.record("tool_result", session_id="s1", text=TOOL_OUTPUT)
        units[name] = _units(base, event.id)
    assert len(units["small"]) > len(units["default"]) > len(units["coarse"]) > 1
    # 64 overlapping tokens repeat the last two sentences (about 29 tokens each) of a chunk
    # at the start of the next; without overlap the chunks only partition the text
    length = {name: sum(len(u.text) for u in found) for name, found in units.items()}
    assert length["flat"] <= len(TOOL_OUTPUT) < length["default"]
    assert len(units["flat"]) <= len(units["default"])
    for first, second in zip(units["default"], units["default"][1:], strict=False):
        repeated = second.text[: second.text.index("early.") + 6]
        assert repeated in first.text[len(first.text) // 2 :]


def _write_docs(root: Path) -> Path:
    root.mkdir()
    (root / "design.md").write_text(DOCUMENT, encoding="utf-8")
    return root


def _section_chunks(base: ContextBase) -> list[SearchItem]:
    sections = base.list_entities(type="section", limit=100)
    assert len(sections) >= 4
    return [u for s in sections for u in _units(base, s.id) if u.kind == "chunk"]


def test_an_ingested_document_is_cut_by_the_base_or_the_call_setting(
    bases: Any, project_id: str, tmp_path: Path
) -> None:
    folder = _write_docs(tmp_path / "docs")
    count = get_token_counter().count
    small = _section_chunks(_ingested(bases(f"{project_id}-a", chunking=SMALL), folder))
    default = _section_chunks(_ingested(bases(f"{project_id}-b"), folder))
    assert len(small) > 2 * len(default) > 0
    assert max(count(u.text) for u in small) <= SMALL.max_tokens
    assert max(count(u.text) for u in default) > SMALL.max_tokens
    # one ingest's own setting wins over the base's
    base = bases(f"{project_id}-c")
    base.ingest(str(folder), chunking=SMALL)
    assert sorted(u.text for u in _section_chunks(base)) == sorted(u.text for u in small)


# A plain-text file: 40 paragraphs of about 300 characters, 12,000 characters in all.
NOTES = "\n\n".join(
    " ".join(
        f"Note {p}.{s}: the order cache of shard {p} kept {s * 11 + 40} keys warm for "
        f"{s + 2} minutes."
        for s in range(4)
    )
    for p in range(40)
)


def test_plain_text_parts_are_sized_by_the_setting(
    bases: Any, project_id: str, tmp_path: Path
) -> None:
    # A plain-text file is split into parts (sections) before its search units are cut: the
    # parts follow the setting, so coarse units are not capped at the default part size and
    # fine ones are smaller; the default keeps its parts of about 1,500 characters.
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "notes.txt").write_text(NOTES, encoding="utf-8")
    count = get_token_counter().count
    units: dict[str, list[SearchItem]] = {}
    parts: dict[str, list[str]] = {}
    for name in ("fine", "default", "coarse"):
        base = _ingested(bases(f"{project_id}-{name}", chunking=name), folder)
        sections = base.list_entities(type="section", limit=500)
        parts[name] = [s.text or "" for s in sections]
        units[name] = [u for s in sections for u in _units(base, s.id)]
    assert len(units["fine"]) > len(units["default"]) > len(units["coarse"])
    assert max(len(p) for p in parts["default"]) <= DEFAULT_CHUNK_CHARS
    # a coarse unit holds more than the largest default part could
    assert max(count(u.text) for u in units["coarse"]) > max(count(p) for p in parts["default"])
    assert max(count(u.text) for u in units["coarse"]) <= CHUNKING_PRESETS["coarse"].max_tokens
    assert max(len(p) for p in parts["fine"]) < DEFAULT_CHUNK_CHARS // 2 + 100


def _ingested(base: ContextBase, folder: Path) -> ContextBase:
    report = base.ingest(str(folder))
    assert not report.errors
    return base


def test_a_setting_change_leaves_stored_units_as_they_were_cut(
    backend: str, tmp_path: Path, project_id: str, request: pytest.FixtureRequest
) -> None:
    db = _db(backend, tmp_path, request)
    folder = _write_docs(tmp_path / "docs")
    with ContextBase(db, project=project_id, embedder=None) as base:
        before = base.record("tool_result", session_id="s1", text=TOOL_OUTPUT)
        base.ingest(str(folder))
        old_event, old_sections = _units(base, before.id), _section_chunks(base)
    with ContextBase(db, project=project_id, embedder=None, chunking=SMALL) as base:
        assert _units(base, before.id) == old_event  # not re-cut on open
        report = base.ingest(str(folder))  # the file did not change: its sections stay
        assert (report.files_unchanged, report.files_changed) == (1, 0)
        assert _section_chunks(base) == old_sections
        after = base.record("tool_result", session_id="s1", text=TOOL_OUTPUT)
        expected = [c.text for c in chunk_text(TOOL_OUTPUT, SMALL)]
        assert [u.text for u in _units(base, after.id)] == expected
        assert len(expected) > len(old_event)


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("huge", "chunking: unknown chunking preset 'huge'; choose one of default, fine, coarse"),
        (
            {"max_tokens": 32},
            "chunking.overlap_tokens: must be smaller than chunking.max_tokens "
            "(got 64 with chunking.max_tokens 32)",
        ),
        (
            {"max_tokens": 0, "overlap_tokens": 0},
            "chunking.max_tokens: must be at least 16 tokens",
        ),
        (
            {"max_tokens": -5},
            "chunking.max_tokens: must be at least 16 tokens",
        ),
        ({"overlap_tokens": -1}, "chunking.overlap_tokens: must be 0 (no overlap) or more"),
        ({"max_token": 100}, "chunking.max_token: Extra inputs are not permitted"),
        (128, "chunking: a preset name (default, fine, coarse) or a ChunkingConfig, not int"),
    ],
)
def test_a_bad_setting_is_refused_by_name_before_the_store_opens(
    tmp_path: Path, setting: Any, message: str
) -> None:
    db = tmp_path / "never.db"
    with pytest.raises(ValidationError) as caught:
        ContextBase(str(db), embedder=None, chunking=setting)
    assert str(caught.value).startswith(message)
    assert not db.exists()


def test_a_config_refuses_an_overlap_as_large_as_its_chunks() -> None:
    with pytest.raises(ValueError, match=r"overlap_tokens \(64\) must be smaller than max_tokens"):
        ChunkingConfig(max_tokens=64, overlap_tokens=64)


def test_presets_and_overrides_resolve() -> None:
    assert resolve_chunking(None) == DEFAULT_CHUNKING == resolve_chunking("Default")
    assert resolve_chunking("fine") == CHUNKING_PRESETS["fine"]
    assert resolve_chunking("fine", max_tokens=200) == ChunkingConfig(
        max_tokens=200, overlap_tokens=32
    )
    assert resolve_chunking(SMALL.model_dump()) == SMALL
    with pytest.raises(ValidationError, match=r"^--chunk-overlap: must be smaller than --chunk"):
        resolve_chunking(
            "coarse",
            max_tokens=100,
            names={"max_tokens": "--chunk-tokens", "overlap_tokens": "--chunk-overlap"},
        )


def test_units_cut_again_after_a_change_get_vectors_of_their_own_text(
    backend: str, tmp_path: Path, project_id: str, request: pytest.FixtureRequest
) -> None:
    # Signing rewrites stored entities without changing their text and carries their
    # vectors over; under a new setting their units are cut anew, and a unit whose id now
    # holds another text must not keep the vector of the text it held before.
    db = _db(backend, tmp_path, request)
    folder = _write_docs(tmp_path / "docs")
    options: dict[str, Any] = {"embedder": "hash", "background_embedding": False}
    with ContextBase(db, project=project_id, **options) as base:
        base.ingest(str(folder))
        base.wait_for_embeddings()
        sections = [s.id for s in base.list_entities(type="section", limit=100)]
    with ContextBase(db, project=f"{project_id}-ref", chunking=SMALL, **options) as base:
        base.ingest(str(folder))  # the same texts cut by SMALL, embedded from scratch
        base.wait_for_embeddings()
        assert base.embedder is not None
        items = base.store.get_items(
            base.project, sorted(base.store.filter_item_ids(base.project, ItemFilter()))
        )
        found = base.store.get_vectors(base.project, base.embedder.name, [i.item_id for i in items])
        reference = {it.text: found[it.item_id] for it in items}
    with ContextBase(db, project=project_id, chunking=SMALL, **options) as base:
        assert sign_stored_entities(base, sections, b"k" * 32) == len(sections)
        base.wait_for_embeddings()
        assert base.embedder is not None
        units = [u for s in sections for u in _units(base, s)]
        assert sum(u.kind == "chunk" for u in units) > 8
        vectors = base.store.get_vectors(project_id, base.embedder.name, [u.item_id for u in units])
    for unit in units:
        assert np.array_equal(vectors[unit.item_id], reference[unit.text]), unit.item_id
