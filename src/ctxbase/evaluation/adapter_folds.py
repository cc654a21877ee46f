"""The query adapter (retrieve/query_adapter.py) learned from benchmark conversations, and
learned per fold: no conversation is searched with a map that saw it.

`question_groups` reads what a map learns from out of an indexed store (the stored turn
vectors and the questions' vectors, so nothing is embedded twice); `fold_adapters` learns
one map per held-out conversation from all the others and writes each as a file
(`SearchConfig.query_adapter_file`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path

import numpy as np

from ..retrieve.adapter_training import AdapterParams, QuestionGroup, fit_adapter
from ..retrieve.query_adapter import QueryAdapter, bundled_adapter, save_adapter
from .locomo import Conversation
from .rerank_folds import conversation_fingerprint
from .store_retriever import SharedEngine

__all__ = ["fit_groups", "fold_adapters", "held_out_adapters", "question_groups"]


def question_groups(
    engine: SharedEngine,
    conversations: Sequence[Conversation],
    categories: Collection[int] | None,
) -> dict[str, QuestionGroup]:
    """Per conversation, its questions (of `categories`; None: all) that have evidence, as
    vectors, with its stored turn vectors and which of them each question's evidence is."""
    cb = engine.cb
    if cb.embedder is None:
        raise ValueError("a query adapter needs an embedder")
    out: dict[str, QuestionGroup] = {}
    for conv in conversations:
        engine.ensure_indexed(conv)
        dia_of = engine.dia_ids(conv.conv_id)
        block = cb.store.vector_block(engine.project_of(conv.conv_id), cb.embedder.name)
        row_of = {dia_of[i]: n for n, i in enumerate(block.ids) if i in dia_of}
        questions, evidence = [], []
        for q in conv.questions:
            if not q.evidence or (categories is not None and q.category not in categories):
                continue
            rows = sorted({row_of[d] for d in q.evidence if d in row_of})
            if rows:
                questions.append(cb.searcher.query_vector(q.question))
                evidence.append(rows)
        if evidence:
            out[conv.conv_id] = QuestionGroup(np.vstack(questions), block.matrix, evidence)
    return out


def fit_groups(
    groups: Mapping[str, QuestionGroup],
    embedder: str,
    params: AdapterParams | None = None,
    about: Mapping[str, object] | None = None,
) -> QueryAdapter:
    """A map learned from every group; `about` is written with it."""
    matrix = fit_adapter(list(groups.values()), params)
    told = {"params": (params or AdapterParams()).model_dump(), **(about or {})}
    return QueryAdapter(embedder, matrix, told)


def fold_adapters(
    groups: Mapping[str, QuestionGroup],
    embedder: str,
    folder: Path,
    only: Collection[str],
    progress: Callable[[str], None] | None = None,
) -> dict[str, str]:
    """For each conversation of `only`, a map learned from every other group, written to
    `folder`: conversation -> file."""
    paths: dict[str, str] = {}
    for n, conv_id in enumerate(sorted(only)):
        others = {c: g for c, g in groups.items() if c != conv_id}
        if not others:
            continue
        path = folder / f"query_adapter_fold_{n}.npz"
        save_adapter(fit_groups(others, embedder), path)
        paths[conv_id] = str(path)
        if progress is not None:
            progress(f"query adapter without {conv_id}: learned from {len(others)} conversations")
    return paths


def held_out_adapters(
    engine: SharedEngine,
    scored: Sequence[tuple[Sequence[Conversation], Collection[int] | None]],
    unscored: Sequence[tuple[Sequence[Conversation], Collection[int] | None]],
    folder: Path,
    retrain: bool,
    progress: Callable[[str], None] | None = None,
) -> dict[str, str]:
    """For each conversation the shipped map saw (every one with `retrain`), a map learned
    as the shipped one was, minus that conversation: from all the other conversations, the
    `scored` and the `unscored` ones (each list with the question categories it learns
    from). Conversation -> file. The unscored conversations get theirs too: a re-ordering
    model learning from their searches must see them searched as a new conversation is.
    A conversation the shipped map never saw is left out: it is searched with the shipped
    map, as a user's would be."""
    shipped = bundled_adapter()
    cb = engine.cb
    if cb.embedder is None or (shipped is None and not retrain):
        return {}
    seen = set() if shipped is None else set(shipped.about.get("conversations", ()))
    listed = [(conv, cats) for convs, cats in (*scored, *unscored) for conv in convs]
    own = [c.conv_id for c, _ in listed if retrain or conversation_fingerprint(c) in seen]
    if not own:
        return {}
    groups: dict[str, QuestionGroup] = {}
    for conv, categories in listed:
        groups.update(question_groups(engine, [conv], categories))
    return fold_adapters(groups, cb.embedder.name, folder, own, progress)
