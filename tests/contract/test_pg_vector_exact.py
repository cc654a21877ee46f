"""A PostgreSQL vector search of a project with few vectors is exact, in a stable order,
whatever plan the statistics of the shared table lead to: pgvector's HNSW scan under a
project filter stops after `hnsw.max_scan_tuples` rows of every project, and a small
project among many then lost some of its nearest vectors (a search test failed under load,
once the suite's other projects had filled the table and it was analysed)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import numpy as np
import pytest
from contract_helpers import make_event, write

from ctxbase.store.pg_sql import EXACT_VECTORS, vector_search_sql
from ctxbase.store.postgres import PostgresStore

DIM = 8
OTHERS, PER_OTHER = 10, 150
# as the planner may choose once the table is large: the HNSW index for the order, and
# (scaled down with the table) a scan that gives up after a few of its rows
PREFER_HNSW = "-c enable_sort=off -c hnsw.max_scan_tuples=50"


@pytest.fixture
def hnsw_first(pg_url: str) -> Iterator[PostgresStore]:
    glue = "&" if "?" in pg_url else "?"
    store = PostgresStore(f"{pg_url}{glue}options={quote(PREFER_HNSW)}", max_size=2)
    yield store
    store.close()


def _unit(rng: np.random.Generator, n: int) -> np.ndarray:
    vecs = rng.standard_normal((n, DIM)).astype(np.float32)
    return vecs / np.linalg.norm(vecs, axis=1, keepdims=True)


def test_a_small_project_among_many_is_searched_exactly(
    hnsw_first: PostgresStore, project_id: str
) -> None:
    pg, rng = hnsw_first, np.random.default_rng(7)
    for _ in range(OTHERS):  # other projects' vectors, in the same index
        other = f"p-{uuid.uuid4().hex[:12]}"
        theirs = write(pg, *(make_event(other, "s", f"note {n}") for n in range(PER_OTHER)))
        pg.put_vectors(
            "m", [(other, e.id, v) for e, v in zip(theirs, _unit(rng, PER_OTHER), strict=True)]
        )
    events = [make_event(project_id, "s", f"note {n}") for n in range(40)]
    write(pg, *events)
    mine = _unit(rng, len(events))
    mine[5] = mine[6] = mine[7] = mine[0]  # ties: ordered by id
    pg.put_vectors("m", [(project_id, e.id, v) for e, v in zip(events, mine, strict=True)])
    query = mine[0] + 0.3 * mine[1]
    query /= np.linalg.norm(query)
    sims = mine @ query
    order = sorted(range(len(events)), key=lambda n: (-round(float(sims[n]), 5), events[n].id))
    want = [events[n].id for n in order[:20]]
    found = pg.vector_search(project_id, "m", query, 20)
    assert found is not None
    assert [i for i, _ in found] == want
    assert [s for _, s in found] == pytest.approx([float(sims[n]) for n in order[:20]], abs=1e-5)
    # the same among allowed ids, and again: the same answer every time
    allowed = {events[n].id for n in order[:30:2]}
    among = pg.vector_search(project_id, "m", query, 5, allowed)
    assert among is not None and [i for i, _ in among] == [i for i in want if i in allowed][:5]
    assert pg.vector_search(project_id, "m", query, 20) == found


def test_one_statement_runs_the_exact_or_the_hnsw_branch_by_the_projects_size(
    pg_url: str, project_id: str
) -> None:
    pg, rng = PostgresStore(pg_url, max_size=1), np.random.default_rng(3)
    try:
        events = write(pg, *(make_event(project_id, "s", f"note {n}") for n in range(12)))
        mine = _unit(rng, len(events))
        pg.put_vectors("m", [(project_id, e.id, v) for e, v in zip(events, mine, strict=True)])
        query = mine[3]
        args = [project_id, "m", query, project_id, "m", 5, query, project_id, "m", 5]
        for up_to, ran in ((12, "exact"), (11, "hnsw")):
            sql = vector_search_sql(DIM, among=False, exact=False, exact_up_to=up_to)
            with pg._read() as conn:
                found = conn.execute(sql, args).fetchall()
                plan = [r[0] for r in conn.execute(f"EXPLAIN ANALYZE {sql}", args).fetchall()]
            assert found[0][0] == events[3].id and len(found) == 5
            # each branch sits under its gate; the one not taken is never executed
            gates = {
                ("hnsw" if "NOT " in line else "exact"): "never executed" not in below
                for n, line in enumerate(plan)
                if "One-Time Filter:" in line
                for below in [next(b for b in plan[n + 1 :] if "->" in b)]
            }
            assert gates == {"exact": ran == "exact", "hnsw": ran == "hnsw"}, plan
    finally:
        pg.close()


def test_the_docs_name_the_size_searched_exactly() -> None:
    root = Path(__file__).resolve().parents[2]
    said = f"{EXACT_VECTORS:,}"
    for doc in ("docs/citus.md", "README.md"):
        text = " ".join((root / doc).read_text(encoding="utf-8").split())
        assert f"at most {said}" in text, doc
