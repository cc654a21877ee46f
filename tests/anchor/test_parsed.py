"""The result records: immutability, JSON-ready dicts, and plain-text chunking."""

from __future__ import annotations

import json

import pytest

from ctxbase.anchor.parsed import ParsedReference, ParsedUnit, ParseResult
from ctxbase.anchor.plaintext import chunk_text


def test_units_are_frozen_and_properties_read_only() -> None:
    unit = ParsedUnit(
        kind="function",
        name="f",
        qualname="m.f",
        language="python",
        text="def f(): pass",
        start_line=1,
        end_line=1,
        properties={"decorators": ["cache"], "nested": {"a": [1, 2]}},
    )
    assert unit.properties["decorators"] == ("cache",)
    with pytest.raises(TypeError):
        unit.properties["decorators"] = ()  # type: ignore[index]
    with pytest.raises(AttributeError):
        unit.name = "g"  # type: ignore[misc]
    same = ParsedUnit(
        "function",
        "f",
        "m.f",
        "python",
        "def f(): pass",
        1,
        1,
        None,
        None,
        {"decorators": ("cache",), "nested": {"a": (1, 2)}},
    )
    assert unit == same and hash(unit) == hash(same)


def test_to_dict_round_trips_through_json() -> None:
    result = ParseResult(
        path="a.py",
        language="python",
        units=(ParsedUnit("module", "a", "a", "python", "", 1, 1, properties={"x": (1,)}),),
        references=(ParsedReference("a", "imports", "os", 1, properties={"alias": None}),),
        warnings=("w",),
        parser="python_ast",
        properties={"module": "a"},
    )
    data = json.loads(json.dumps(result.to_dict()))
    assert data["units"][0]["properties"] == {"x": [1]}
    assert data["references"][0]["target"] == "os"
    assert data["parser"] == "python_ast" and data["fallback"] is False


def test_chunk_text_keeps_line_numbers_and_limits_size() -> None:
    paragraphs = [f"paragraph {n} " + "word " * 30 for n in range(10)]
    text = "\n\n".join(paragraphs)
    chunks = chunk_text(text, max_chars=400)
    assert len(chunks) > 1
    assert all(len(chunk.text) <= 400 for chunk in chunks)
    lines = text.splitlines()
    for chunk in chunks:
        assert "\n".join(lines[chunk.start_line - 1 : chunk.end_line]) == chunk.text
    assert " ".join(chunk.text for chunk in chunks).split() == text.split()


def test_chunk_text_cuts_one_huge_line() -> None:
    chunks = chunk_text("x" * 2500, max_chars=1000)
    assert [len(chunk.text) for chunk in chunks] == [1000, 1000, 500]
    assert all(chunk.start_line == 1 for chunk in chunks)
