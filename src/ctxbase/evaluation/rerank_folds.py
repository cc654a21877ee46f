"""The learned re-ordering, fitted per fold: no conversation is re-ordered by a model that
saw it.

The shipped model (retrieve/rerank_model.json) was trained on the dev conversations, so
scoring those with it overstates how it does on new ones. For leave-one-conversation-out
figures each conversation's questions are searched once with the re-ordering off; the
signals of every candidate and whether it is evidence are kept (`RankedQuestion`); then
for each conversation a model is trained on all the others (`fold_models`) and the search
re-run with it (`SearchConfig.rerank_model`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..retrieve.candidate import Candidate
from ..retrieve.config import SearchConfig
from ..retrieve.rerank import FEATURE_POOL, TreeEnsemble, rerank_features
from ..retrieve.rerank_training import BoostingParams, ensemble_json, fit_ensemble
from .locomo import Conversation
from .store_retriever import SharedEngine

__all__ = [
    "RankedQuestion",
    "collect_ranked",
    "conversation_fingerprint",
    "fit_rows",
    "fold_models",
    "ranked_before_cut",
    "write_fold_models",
]


@dataclass(frozen=True)
class RankedQuestion:
    """One question's candidates as the search ranked them before any re-ordering."""

    conv_id: str
    evidence: frozenset[str]
    dias: tuple[str, ...]  # each candidate's turn id ("" when it is not a turn), best first
    features: np.ndarray  # rerank_features rows, one per candidate

    def labels(self) -> np.ndarray:
        return np.asarray([1.0 if d in self.evidence else 0.0 for d in self.dias])


def conversation_fingerprint(conv: Conversation) -> str:
    """What a conversation says, turn by turn, hashed: the same conversation under another
    id matches, another one under the same id does not."""
    digest = hashlib.sha256()
    for turn in conv.turns:
        digest.update(f"{turn.dia_id}\t{turn.speaker}\t{turn.text}\n".encode())
    return digest.hexdigest()[:16]


def ranked_before_cut(considered: Sequence[Candidate]) -> list[Candidate]:
    """The order the search ranked, before its top_k cut: what `rerank_top` re-orders."""
    return [
        c
        for c in considered
        if c.dropped is None or c.dropped == "below top_k" or c.dropped.startswith("near-duplicate")
    ]


def collect_ranked(
    engine: SharedEngine,
    conversations: Sequence[Conversation],
    config: SearchConfig,
    categories: Collection[int] | None,
    progress: Callable[[str], None] | None = None,
    each: Callable[[str, list[Candidate]], None] | None = None,
    config_of: Mapping[str, SearchConfig] | None = None,
) -> list[RankedQuestion]:
    """Search every question that has evidence (of `categories`; None: all) with the
    re-ordering off and keep its first FEATURE_POOL candidates' signals (`each` is also
    given every question and its ranked candidates). `config_of` gives a conversation a
    configuration of its own (its held-out query adapter)."""
    off = {"rerank_top": 0, "rerank_model": None, "top_k": FEATURE_POOL}
    rows: list[RankedQuestion] = []
    for conv in conversations:
        plain = (config_of or {}).get(conv.conv_id, config).model_copy(update=off)
        engine.ensure_indexed(conv)
        dia_of = engine.dia_ids(conv.conv_id)
        for q in conv.questions:
            if not q.evidence or (categories is not None and q.category not in categories):
                continue
            response = engine.cb.search(
                q.question, project=engine.project_of(conv.conv_id), config=plain,
                new_project=True,
            )  # fmt: skip
            ranked = ranked_before_cut(response.considered)
            features = rerank_features(q.question, ranked)
            dias = tuple(dia_of.get(c.item.owner_id, "") for c in ranked[:FEATURE_POOL])
            rows.append(RankedQuestion(conv.conv_id, frozenset(q.evidence), dias, features))
            if each is not None:
                each(q.question, ranked)
        if progress is not None:
            progress(f"re-ordering signals of {conv.conv_id} collected")
    return rows


def fit_rows(rows: Sequence[RankedQuestion], params: BoostingParams | None = None) -> TreeEnsemble:
    """A model trained on `rows`' candidates."""
    kept = [r for r in rows if len(r.dias)]
    if not kept:
        raise ValueError("no candidates to train on")
    x = np.vstack([r.features for r in kept])
    y = np.concatenate([r.labels() for r in kept])
    return fit_ensemble(x, y, params)


def fold_models(
    rows: Sequence[RankedQuestion],
    params: BoostingParams | None = None,
    progress: Callable[[str], None] | None = None,
    only: Collection[str] | None = None,
) -> dict[str, TreeEnsemble | None]:
    """For each conversation (of `only`, if given), a model trained on every other
    conversation's rows; None where those hold no evidence among their candidates
    (nothing to learn from)."""
    conv_ids = list(dict.fromkeys(r.conv_id for r in rows))
    if len(conv_ids) < 2:
        raise ValueError("a model per fold needs at least two conversations")
    out: dict[str, TreeEnsemble | None] = {}
    for conv_id in conv_ids:
        if only is not None and conv_id not in only:
            continue
        others = [r for r in rows if r.conv_id != conv_id]
        found = sum(int(r.labels().sum()) for r in others)
        out[conv_id] = fit_rows(others, params) if found else None
        if progress is not None:
            model = out[conv_id]
            done = f"{len(model.roots)} trees" if model else "no evidence found: not re-ordered"
            progress(f"re-ordering model without {conv_id}: {done}")
    return out


def write_fold_models(
    models: Mapping[str, TreeEnsemble | None], folder: Path
) -> dict[str, str | None]:
    """Each fold's model as a JSON file in `folder`; conversation -> path (None: no model)."""
    paths: dict[str, str | None] = {}
    for n, (conv_id, model) in enumerate(models.items()):
        if model is None:
            paths[conv_id] = None
            continue
        path = folder / f"rerank_fold_{n}.json"
        data = ensemble_json(model, trained_on=f"every conversation but {conv_id}")
        path.write_text(json.dumps(data, separators=(",", ":")), encoding="utf-8")
        paths[conv_id] = str(path)
    return paths
