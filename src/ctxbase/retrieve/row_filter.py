"""What structured filters read of an item, held per row beside an in-memory index, so a
filter is applied inside the index and only the few rows that pass are checked against the
store.

Checking a candidate in the store is a primary-key lookup; in a large project whose file is
out of the page cache each costs ~15 us, and a broad filter (every session but this one,
latest versions only) checked hundreds of candidates per search because the index could not
tell which would pass. Here kind, type, session, agent and role are small-int codes in numpy
arrays (a vocabulary per column), with the timestamp and the latest flag: 29 bytes a row.

The screen only ever drops rows the store would drop as well: a row's attributes do not
change while it is stored (a changed item is stored again, and the index reloads), and
conditions it cannot read (owners, repositories, paths, lines) are left to the store, which
still checks every row returned (forgotten, hidden or changed since the index's read).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from ..store.base import ItemFilter, KeywordRow
from .synced import grown

__all__ = ["RowAttributes"]

_COLUMNS = ("kind", "type", "session_id", "agent_id", "agent_role")
_NULL = -1

Mask = npt.NDArray[np.bool_]
Positions = npt.NDArray[np.int64]


class _Codes:
    """One text column as int32 codes (NULL: -1) and its vocabulary, append-only."""

    def __init__(self) -> None:
        self.vocab: dict[str, int] = {}
        self.codes: npt.NDArray[np.int32] = np.zeros(0, dtype=np.int32)

    def put(self, start: int, values: Sequence[str | None]) -> None:
        vocab = self.vocab
        code = vocab.setdefault
        block = np.fromiter(
            (_NULL if v is None else code(v, len(vocab)) for v in values),
            dtype=np.int32,
            count=len(values),
        )
        codes = grown(self.codes, start + len(values), start)
        codes[start : start + len(values)] = block
        self.codes = codes  # assigned once filled: readers see old or new, both complete

    def among(self, values: Sequence[str]) -> npt.NDArray[np.int32]:
        """Codes of `values` (those never seen have none: no row holds them)."""
        found = (self.vocab.get(v) for v in values if isinstance(v, str))
        return np.asarray([c for c in found if c is not None], dtype=np.int32)


def _isin(codes: npt.NDArray[np.int32], wanted: npt.NDArray[np.int32]) -> Mask:
    if wanted.size == 1:  # the usual case, cheaper than np.isin
        return np.asarray(codes == wanted[0])
    return np.isin(codes, wanted)


class RowAttributes:
    """Per row of an index (by position): the attributes structured filters read.

    Append-only like the index it serves: a search reads the rows below its snapshot's size
    while later rows are appended behind them."""

    def __init__(self) -> None:
        self.columns = {name: _Codes() for name in _COLUMNS}
        self.ts: npt.NDArray[np.float64] = np.zeros(0, dtype=np.float64)
        self.latest: npt.NDArray[np.bool_] = np.zeros(0, dtype=np.bool_)
        self.n = 0
        # False once a row came without attributes (a backend that does not read them):
        # the store alone then applies filters
        self.known = True

    @property
    def nbytes(self) -> int:
        codes = sum(int(c.codes.nbytes) for c in self.columns.values())
        return codes + int(self.ts.nbytes) + int(self.latest.nbytes)

    def append(self, rows: Sequence[KeywordRow]) -> None:
        start, size = self.n, self.n + len(rows)
        if not rows:
            return
        if any(r.kind is None for r in rows):
            self.known = False
        for name, col in self.columns.items():
            col.put(start, [getattr(r, name) for r in rows])
        ts = grown(self.ts, size, start)
        ts[start:size] = np.fromiter((r.ts for r in rows), dtype=np.float64, count=len(rows))
        latest = grown(self.latest, size, start)
        latest[start:size] = np.fromiter((r.latest for r in rows), dtype=np.bool_, count=len(rows))
        self.ts, self.latest = ts, latest
        self.n = size

    def holds(self, flt: ItemFilter | None) -> bool:
        """Whether `admitted` decides `flt` whole: what passes here fails in the store only
        if it changed since the index read it."""
        if flt is None:
            return True
        return self.known and all(
            v is None
            for v in (
                flt.owner_ids,
                flt.repos,
                flt.path_prefix,
                flt.line_from,
                flt.line_to,
                flt.view,
            )
        )

    def admitted(self, flt: ItemFilter | None, positions: Positions) -> Mask:
        """Which rows at `positions` `flt` may admit: every row the store would admit, and
        fewer others the more of `flt` these attributes hold (see `holds`)."""
        if flt is None or not self.known or not positions.size:
            return np.ones(positions.size, dtype=np.bool_)
        return self._admitted(flt, lambda a: a[positions], positions.size)

    def count(self, flt: ItemFilter, n: int) -> int:
        """How many of the first `n` rows `flt` may admit."""
        if not self.known:
            return n
        return int(self._admitted(flt, lambda a: a[:n], n).sum())

    def _admitted(
        self,
        flt: ItemFilter,
        rows: Callable[[npt.NDArray[Any]], npt.NDArray[Any]],
        size: int,
    ) -> Mask:
        keep = np.ones(size, dtype=np.bool_)
        for name, values in (
            ("session_id", flt.session_ids),
            ("agent_id", flt.agent_ids),
            ("agent_role", flt.agent_roles),
            ("type", flt.types),
            ("kind", flt.kinds),
        ):
            if values is not None:  # as SQL's IN: a NULL is in no list
                col = self.columns[name]
                keep &= _isin(rows(col.codes), col.among(values))
        if flt.exclude_session_ids:  # a row of no session is kept
            col = self.columns["session_id"]
            keep &= ~_isin(rows(col.codes), col.among(flt.exclude_session_ids))
        if flt.since is not None:
            keep &= rows(self.ts) >= flt.since
        if flt.until is not None:
            keep &= rows(self.ts) <= flt.until
        if flt.latest_only and (flt.view is None or not flt.view.shown_owner_ids):
            keep &= rows(self.latest)  # (a pinned version may be shown: the store decides)
        return keep
