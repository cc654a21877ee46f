"""The compact id map the vector index keeps: ids by position, positions by id."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from ctxbase.retrieve.id_map import IdMap


def test_ids_and_positions_round_trip_across_appends_and_sorts() -> None:
    ids = IdMap()
    names = [f"evt:{i:030d}" for i in range(5000)] + ["ünïcode:名前", ""]
    # appended in uneven batches: the later rows are found by dict until sorted in
    for start in range(0, len(names), 700):
        ids.extend(names[start : start + 700])
    assert len(ids) == len(names)
    assert [ids[p] for p in (0, 4999, 5000, 5001)] == [names[0], names[4999], *names[5000:]]
    assert all(ids.get(n) == p for p, n in enumerate(names))
    assert ids.get("evt:missing") is None and ids.get("evt:missing", -1) == -1
    assert "ünïcode:名前" in ids and "nope" not in ids and 3 not in ids
    with pytest.raises(IndexError):
        ids[len(names)]


def test_positions_keep_only_those_below_a_snapshot() -> None:
    ids = IdMap(["a", "b", "c"])
    ids.extend(["d"])  # appended after a snapshot of 3 rows
    assert ids.positions(["d", "c", "zz", "a"], below=3).tolist() == [2, 0]
    assert ids.positions([], below=3).dtype == np.int64
    assert ids.ids([3, 1]) == ["d", "b"]


def test_ids_with_the_same_hash_are_told_apart() -> None:
    ids = IdMap([f"x{i}" for i in range(3000)])
    # as if "x7" hashed as "x6" and "x8" do: the lookup walks the equal keys, comparing ids
    table = ids._lookup
    keys = table.keys.copy()
    for other in ("x6", "x8"):
        keys[np.flatnonzero(table.order == ids.get(other))] = hash("x7")
    by_key = np.argsort(keys, kind="stable")
    ids._lookup = type(table)(keys[by_key], table.order[by_key], {})
    assert ids.get("x7") == 7 and ids.lookup(["x9", "x7", "no"]).tolist() == [9, 7, -1]


def test_a_row_costs_a_fraction_of_a_list_and_dict() -> None:
    names = [f"evt:{i:031d}" for i in range(50_000)]  # 35 characters, as event ids
    as_objects = sys.getsizeof(names) + sum(sys.getsizeof(n) for n in names)
    positions = {n: p for p, n in enumerate(names)}
    as_objects += sys.getsizeof(positions) + sum(sys.getsizeof(p) for p in positions.values())
    held = IdMap(names).nbytes
    assert held * 2 < as_objects  # ~61 vs ~145 bytes a row
    assert held < 70 * len(names)


def test_an_id_appended_again_is_found_at_its_latest_position() -> None:
    # the keyword index appends an item written again as a new row (the old one is dead)
    ids = IdMap([f"id{i}" for i in range(3000)])  # sorted in
    ids.extend(["id5", "id7"])  # held in the dict of recent rows
    assert ids.get("id5") == 3000 and list(ids.lookup(["id5", "id7", "id9"])) == [3000, 3001, 9]
    ids.extend([f"new{i}" for i in range(2000)] + ["id5"])  # all sorted in, id5 a third time
    assert ids.get("id5") == 5002 and list(ids.lookup(["id5", "id7"])) == [5002, 3001]
    assert list(ids.positions(["id5"], below=5002)) == []  # a snapshot before it: not its own
