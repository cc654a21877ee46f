"""`--chunking`, `--chunk-tokens` and `--chunk-overlap` on the commands that write: an ingested
long Markdown file and a captured long text are cut by them, and a bad value is one error
line (exit 2) before any database is opened."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from ctxbase.assemble.tokens import get_token_counter
from ctxbase.cli import main
from ctxbase.cli_chunking import CHUNKING_HELP
from ctxbase.retrieve.chunking import CHUNKING_PRESETS, chunk_text
from ctxbase.store import open_store
from ctxbase.store.base import ItemFilter, SearchItem
from test_cli_errors import one_error_line, run

DOCUMENT = "# Cache design\n\n" + "\n\n".join(
    f"## Part {n}\n\n"
    + " ".join(
        f"The eviction policy of shard {n}.{s} keeps hot keys for {s + 3} minutes "
        f"and writes cold ones back in batches of {s * 10 + 5}."
        for s in range(14)
    )
    for n in range(4)
)


def _run(capsys: Any, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def _items(db: Path, project: str = "default") -> list[SearchItem]:
    store = open_store(str(db))
    try:
        ids = store.filter_item_ids(project, ItemFilter())
        return store.get_items(project, sorted(ids))
    finally:
        store.close()


def _section_chunks(db: Path) -> list[SearchItem]:
    return [it for it in _items(db) if it.kind == "chunk" and it.type == "section"]


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "design.md").write_text(DOCUMENT, encoding="utf-8")
    return folder


def test_ingest_cuts_a_long_markdown_file_by_the_options(
    tmp_path: Path, docs: Path, capsys: Any
) -> None:
    chunks: dict[str, list[SearchItem]] = {}
    for name, options in [
        ("default", ()),
        ("small", ("--chunk-tokens", "64", "--chunk-overlap", "16")),
        ("coarse", ("--chunking", "coarse")),
        ("fine-wider", ("--chunking", "fine", "--chunk-tokens", "200")),
    ]:
        db = tmp_path / f"{name}.db"
        code, _, err = _run(
            capsys, "--db", str(db), "--embedder", "none", "ingest", str(docs), *options
        )
        assert code == 0, err
        chunks[name] = _section_chunks(db)
    count = get_token_counter().count
    size = {name: max(count(c.text) for c in found) for name, found in chunks.items() if found}
    assert len(chunks["small"]) > 2 * len(chunks["default"]) > 0
    assert size["small"] <= 64 < size["default"] <= 256
    # a section of about 400 tokens is one unit for coarse (512): no chunks at all (its
    # "path > name" label shares the unit, never a chunk of its own)
    assert chunks["coarse"] == []
    # --chunk-tokens changes the preset's size and keeps its overlap (fine: 32)
    assert 128 < size["fine-wider"] <= 200


def test_capture_cuts_a_long_text_by_the_options(tmp_path: Path, capsys: Any) -> None:
    text = DOCUMENT.replace("#", "").strip()
    (tmp_path / "out.txt").write_text(text, encoding="utf-8")
    db = tmp_path / "c.db"
    for options in [(), ("--chunking", "fine")]:
        code, _, err = _run(
            capsys,
            "--db",
            str(db),
            "--embedder",
            "none",
            "capture",
            "--session",
            "s",
            "--type",
            "tool_result",
            "--text-file",
            str(tmp_path / "out.txt"),
            *options,
        )
        assert code == 0, err
    items = _items(db)
    by_owner: dict[str, list[str]] = {}
    for it in sorted(items, key=lambda it: (it.owner_id, int(it.item_id.partition("#")[2]))):
        by_owner.setdefault(it.owner_id, []).append(it.text)
    expected = [
        [c.text for c in chunk_text(text, CHUNKING_PRESETS[name])] for name in ("default", "fine")
    ]
    assert sorted(by_owner.values(), key=len) == expected
    assert len(expected[1]) > len(expected[0]) > 1


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            ("--chunk-tokens", "32"),
            "error: --chunk-overlap: must be smaller than --chunk-tokens "
            "(got 64 with --chunk-tokens 32)",
        ),
        (
            ("--chunk-tokens", "0", "--chunk-overlap", "0"),
            "error: --chunk-tokens: must be at least 16 tokens",
        ),
        (("--chunk-overlap", "-3"), "error: --chunk-overlap: must be 0 (no overlap) or more"),
        (
            ("--chunking", "huge"),
            "error: --chunking: unknown chunking preset 'huge'; choose one of default, fine, "
            "coarse",
        ),
        (
            ("--chunking", "fine", "--chunk-overlap", "128"),
            "error: --chunk-overlap: must be smaller than --chunk-tokens (got 128 with",
        ),
    ],
)
def test_a_bad_chunking_option_is_one_line_and_opens_no_database(
    tmp_path: Path, docs: Path, capsys: Any, options: tuple[str, ...], message: str
) -> None:
    db = tmp_path / "never.db"
    code, out, err = _run(
        capsys, "--db", str(db), "--embedder", "none", "ingest", str(docs), *options
    )
    assert code == 2 and out == ""
    assert err.startswith(message) and len(err.strip().splitlines()) == 1
    assert not db.exists()


def test_serve_and_mcp_check_the_options_before_they_start(tmp_path: Path) -> None:
    serve = run("--db", str(tmp_path / "s.db"), "serve", "--chunk-tokens", "8", cwd=tmp_path)
    one_error_line(serve, 2, "--chunk-tokens: must be at least 16 tokens", "(got 8)")
    mcp = run("mcp", "--url", "http://127.0.0.1:9", "--chunking", "fine", cwd=tmp_path)
    one_error_line(mcp, 2, "--chunking: a server cuts what it stores", "ctxbase serve")
    # the server's database and model are its own: given with --url, said so, not ignored
    db = tmp_path / "other.db"
    mcp = run("--db", str(db), "mcp", "--url", "http://127.0.0.1:9", cwd=tmp_path)
    one_error_line(mcp, 2, "--db: a server reads its own database", "ctxbase serve")
    assert not db.exists()
    mcp = run("--embedder", "hash", "mcp", "--url", "http://127.0.0.1:9", cwd=tmp_path)
    one_error_line(mcp, 2, "--embedder: a server embeds with its own model", "ctxbase serve")


def test_the_help_names_the_presets_as_they_are() -> None:
    shown = {
        name: (int(size), int(overlap))
        for name, size, overlap in re.findall(
            r"(\w+) \((\d+)(?: tokens)?, (?:overlap )?(\d+)\)", CHUNKING_HELP
        )
    }
    assert shown == {n: (c.max_tokens, c.overlap_tokens) for n, c in CHUNKING_PRESETS.items()}
