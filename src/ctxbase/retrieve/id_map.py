"""Item ids by row position and row positions by id, held compactly.

A list of str plus a dict of positions costs ~150 bytes a row in Python objects (the str,
the dict entry, the int): ~150 MB at 1M rows, per index. Here the ids are one UTF-8 buffer
with offsets, and the positions are found by the ids' hashes, sorted: ~55 bytes a row
(35-character ids).
Rows are append-only, as the indexes that hold them: a search reads the rows below its
snapshot's size while later ones are appended behind them (each buffer is filled before
it replaces the one it grows, so a reader sees either, both complete below its size).
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

__all__ = ["IdMap"]

_I64 = npt.NDArray[np.int64]


@dataclass(frozen=True)
class _Lookup:
    """The ids' hashes sorted (`keys`) with their rows' positions (`order`), and a dict of
    the rows appended since (sorted in once they are many)."""

    keys: _I64 = field(default_factory=lambda: np.zeros(0, np.int64))
    order: npt.NDArray[np.int32] = field(default_factory=lambda: np.zeros(0, np.int32))
    recent: dict[str, int] = field(default_factory=dict)


class IdMap:
    """Append-only ids: `ids[p]` is the id at position p, `ids.get(id)` its position (the
    latest, for an id appended again: the keyword index appends a re-added item anew)."""

    def __init__(self, ids: Iterable[str] = ()) -> None:
        self._n = 0
        # UTF-8 ids end to end; row i is _text[_ends[i-1]:_ends[i]]. Both grow in place
        # (amortised), old bytes never change: a reader below its snapshot's size is safe.
        self._text = bytearray()
        self._ends = array("q")
        self._lookup = _Lookup()
        self.extend(ids)

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, position: int) -> str:
        if not 0 <= position < self._n:
            raise IndexError(position)
        ends = self._ends
        return self._text[ends[position - 1] if position else 0 : ends[position]].decode()

    def __contains__(self, item_id: object) -> bool:
        return isinstance(item_id, str) and self.get(item_id) is not None

    def get(self, item_id: str, default: int | None = None) -> int | None:
        """The position of `item_id`, else `default`."""
        table = self._lookup
        found = table.recent.get(item_id)
        if found is None:
            found = self._walk(table, item_id, hash(item_id))
        return default if found is None else found

    def lookup(self, ids: Sequence[str]) -> _I64:
        """The position of each of `ids`, -1 where not held."""
        table = self._lookup
        out = np.full(len(ids), -1, dtype=np.int64)
        if not len(ids):
            return out
        wanted = np.fromiter(map(hash, ids), dtype=np.int64, count=len(ids))
        if len(table.keys):
            # the last row of an equal hash: an id appended again is found at its latest
            at = np.searchsorted(table.keys, wanted, side="right") - 1
            hit = (at >= 0) & (table.keys[np.maximum(at, 0)] == wanted)
            out[hit] = table.order[at[hit]]
        found = out.tolist()
        recent = table.recent
        for i, position in enumerate(found):
            if recent and (later := recent.get(ids[i])) is not None:
                found[i] = later  # appended since the sort: the latest
            elif position >= 0 and self[position] != ids[i]:  # an equal hash, another id
                walked = self._walk(table, ids[i], int(wanted[i]))
                found[i] = -1 if walked is None else walked
        return np.asarray(found, dtype=np.int64)

    def _walk(self, table: _Lookup, item_id: str, key: int) -> int | None:
        """The latest position of `item_id` among the sorted rows whose ids hash to `key`
        (rows of one hash are sorted by position)."""
        keys, order = table.keys, table.order
        j = int(keys.searchsorted(key, side="right")) - 1
        while j >= 0 and int(keys[j]) == key:
            if self[int(order[j])] == item_id:
                return int(order[j])
            j -= 1
        return None

    def positions(self, ids: Iterable[str], below: int) -> _I64:
        """The positions below `below` of those of `ids` held (in the order given)."""
        found = self.lookup(list(ids))
        return found[(found >= 0) & (found < below)]

    def ids(self, positions: Sequence[int] | npt.NDArray[np.integer]) -> list[str]:
        return [self[int(p)] for p in positions]

    @property
    def nbytes(self) -> int:
        table = self._lookup
        held = len(self._text) + self._ends.itemsize * len(self._ends)
        return held + table.keys.nbytes + table.order.nbytes + 100 * len(table.recent)

    def extend(self, ids: Iterable[str]) -> None:
        """Append `ids` as the next positions (one writer at a time: the owner's lock)."""
        new = list(ids)
        if not new:
            return
        n, size = self._n, self._n + len(new)
        used = self._ends[-1] if n else 0
        for item_id in new:
            encoded = item_id.encode()
            self._text += encoded
            used += len(encoded)
            self._ends.append(used)
        self._n = size
        table = self._lookup
        if len(table.recent) + len(new) <= max(1024, len(table.keys) // 8):
            # in place: readers only look ids up in it
            table.recent.update(zip(new, range(n, size), strict=True))
            return
        # sorted in: amortised, one sort per growth by an eighth
        later = [*table.recent, *new]
        keys = np.concatenate([table.keys, np.fromiter(map(hash, later), np.int64, len(later))])
        at = np.fromiter(table.recent.values(), np.int64, len(table.recent))
        order = np.concatenate([table.order, at, np.arange(n, size)]).astype(np.int32)
        by_key = np.argsort(keys, kind="stable")
        self._lookup = _Lookup(keys[by_key], order[by_key], {})
