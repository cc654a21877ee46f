"""Training the re-ordering's trees (retrieve/rerank_training.py), a model given by file
(`SearchConfig.rerank_model`), and one model per fold (evaluation/rerank_folds.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from ctxbase import ContextBase, ValidationError
from ctxbase.evaluation.rerank_folds import (
    RankedQuestion,
    fit_rows,
    fold_models,
    write_fold_models,
)
from ctxbase.retrieve.config import get_preset
from ctxbase.retrieve.rerank import FEATURE_NAMES, TreeEnsemble, ensemble_from_file
from ctxbase.retrieve.rerank_training import BoostingParams, ensemble_json, fit_ensemble

COL = {name: n for n, name in enumerate(FEATURE_NAMES)}
WIDTH = len(FEATURE_NAMES)


def _data(n: int, seed: int, noise: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    """Evidence when two signals hold together (an interaction no single split gets)."""
    rng = np.random.default_rng(seed)
    x = rng.random((n, WIDTH))
    y = ((x[:, 0] > 0.5) & (x[:, 3] > 0.4)).astype(float)
    flip = rng.random(n) < noise
    y[flip] = 1 - y[flip]
    return x, y


def _leaves_per_tree(model: TreeEnsemble) -> list[int]:
    ends = [*model.roots[1:].tolist(), len(model.leaf)]
    return [int(model.leaf[a:b].sum()) for a, b in zip(model.roots.tolist(), ends, strict=True)]


def test_boosting_learns_an_interaction_and_generalises() -> None:
    x, y = _data(3000, seed=1)
    params = BoostingParams(max_iter=60, learning_rate=0.2, max_leaf_nodes=4)
    model = fit_ensemble(x, y, params)
    test_x, test_y = _data(2000, seed=2, noise=0.0)
    predicted = model.score(test_x) > 0
    assert (predicted == test_y.astype(bool)).mean() > 0.97
    # grown no larger than asked; below the early-stopping size every tree is kept
    assert len(model.roots) == 60
    assert max(_leaves_per_tree(model)) <= 4
    # the first trees split first on the two signals that matter, and use both
    assert set(model.feature[model.roots[:5]].tolist()) <= {0, 3}
    first = slice(int(model.roots[0]), int(model.roots[1]))
    assert {0, 3} <= set(model.feature[first][~model.leaf[first]].tolist())


def test_leaves_keep_at_least_min_samples_leaf_rows() -> None:
    x, y = _data(400, seed=3)
    model = fit_ensemble(x, y, BoostingParams(max_iter=5, min_samples_leaf=150))
    # 400 rows, leaves of 150 or more: at most two leaves per tree
    assert max(_leaves_per_tree(model)) <= 2
    with pytest.raises(ValueError, match="both labels"):
        fit_ensemble(x, np.zeros(len(x)))


def test_training_stops_when_held_back_loss_stops_improving() -> None:
    rng = np.random.default_rng(4)
    x = rng.random((3000, WIDTH))
    y = (rng.random(3000) < 0.2).astype(float)  # nothing to learn
    params = BoostingParams(max_iter=200, learning_rate=0.3, early_stopping_rows=1000)
    model = fit_ensemble(x, y, params)
    assert len(model.roots) < 60
    # the same rows and seed give the same model
    again = fit_ensemble(x, y, params)
    assert again.score(x).tolist() == model.score(x).tolist()


def test_bad_training_input_is_refused() -> None:
    x, y = _data(200, seed=5)
    with pytest.raises(ValueError, match="features"):
        fit_ensemble(x[:, :3], y)
    with pytest.raises(ValueError, match="labels"):
        fit_ensemble(x, y[:10])
    with pytest.raises(ValueError, match="0 or 1"):
        fit_ensemble(x, y * 2)
    bad = x.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="finite"):
        fit_ensemble(bad, y)


def test_a_written_model_reads_back_with_the_same_scores(tmp_path: Path) -> None:
    x, y = _data(1500, seed=6)
    model = fit_ensemble(x, y, BoostingParams(max_iter=20))
    path = tmp_path / "model.json"
    path.write_text(json.dumps(ensemble_json(model, trained_on="synthetic")), encoding="utf-8")
    back = ensemble_from_file(str(path))
    assert back.score(x) == pytest.approx(model.score(x), abs=1e-4)  # 6-decimal rounding
    assert json.loads(path.read_text(encoding="utf-8"))["trained_on"] == "synthetic"


def test_a_model_file_that_is_missing_or_wrong_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ValidationError) as err:
        ensemble_from_file(str(tmp_path / "none.json"))
    assert err.value.field == "rerank_model" and "cannot read" in err.value.message
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(ValidationError, match="not a model file"):
        ensemble_from_file(str(bad))
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"features": ["x"], "baseline": 0, "trees": []}), "utf-8")
    with pytest.raises(ValidationError, match="other features"):
        ensemble_from_file(str(other))
    partial = tmp_path / "partial.json"
    partial.write_text(json.dumps({"features": list(FEATURE_NAMES)}), "utf-8")
    with pytest.raises(ValidationError, match="missing 'trees'"):
        ensemble_from_file(str(partial))


@pytest.mark.parametrize(
    ("tree", "said"),
    [
        # a node pointing back to itself would walk forever
        ({"left": [0], "right": [0], "leaf": [False], "feature": [0], "threshold": [0.5],
          "value": [0.0]}, "left child is not a later node"),
        ({"left": [1, 0, 0], "right": [2, 0, 0], "leaf": [False, True, True],
          "feature": [99, 0, 0], "threshold": [0.5, 0, 0], "value": [0, 1, 2]}, "no feature 99"),
        ({"left": [1, 0, 0], "right": [5, 0, 0], "leaf": [False, True, True],
          "feature": [0, 0, 0], "threshold": [0.5, 0, 0], "value": [0, 1, 2]},
         "right child is not a later node"),
        ({"left": [1, 0], "right": [2, 0, 0], "leaf": [False, True, True],
          "feature": [0, 0, 0], "threshold": [0.5, 0, 0], "value": [0, 1, 2]}, "differ in length"),
    ],
)  # fmt: skip
def test_a_tree_no_row_can_walk_is_refused(
    tmp_path: Path, tree: dict[str, object], said: str
) -> None:
    data = {"features": list(FEATURE_NAMES), "baseline": 0.0, "trees": [tree]}
    with pytest.raises(ValueError, match=said):
        TreeEnsemble.from_json(data)
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ValidationError) as err:
        ensemble_from_file(str(path))
    assert err.value.field == "rerank_model" and said in err.value.message


def test_a_model_file_needs_the_reordering_on() -> None:
    # the default preset re-orders nothing: a model named there would never be read
    with pytest.raises(ValidationError, match="set rerank_top to 2 or more"):
        get_preset("hybrid", rerank_model="model.json")
    assert get_preset("hybrid", rerank_model="model.json", rerank_top=5).rerank_top == 5


def test_labels_are_one_per_row_and_params_may_be_a_mapping() -> None:
    x, y = _data(300, seed=12)
    with pytest.raises(ValueError, match="1-D"):
        fit_ensemble(x, y.reshape(-1, 1))
    model = fit_ensemble(x, y, {"max_iter": 3})
    assert len(model.roots) == 3


def _asks_model(weight: float) -> dict[str, object]:
    """One stump: a turn that only asks scores `weight` above every other."""
    return {
        "features": list(FEATURE_NAMES),
        "baseline": 0.0,
        "trees": [
            {
                "feature": [COL["asks"], 0, 0],
                "threshold": [0.5, 0.0, 0.0],
                "left": [1, 0, 0],
                "right": [2, 0, 0],
                "leaf": [False, True, True],
                "value": [0.0, 0.0, weight],
            }
        ],
    }


def test_a_search_reorders_with_the_model_its_config_names(cb: ContextBase, tmp_path: Path) -> None:
    texts = [
        "The design review moved to Thursday at 15:00.",
        "Design tokens are in the shared folder.",
        "We review the design every sprint.",
        "When is the design review now?",
        "The design doc is linked in the channel.",
    ]
    for text in texts:
        cb.record("user_message", session_id="s1", text=text, agent_id="u")
    cb.wait_for_embeddings()
    query = "When is the design review?"
    path = tmp_path / "asks.json"
    path.write_text(json.dumps(_asks_model(-5.0)), encoding="utf-8")
    config = get_preset("hybrid_graph", top_k=5, rerank_model=str(path))
    down = cb.search(query, config=config)
    assert down.results[-1].item.text == "When is the design review now?"
    # a changed file is read again: the same turn now comes first
    path.write_text(json.dumps(_asks_model(5.0)), encoding="utf-8")
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    up = cb.search(query, config=config)
    assert up.results[0].item.text == "When is the design review now?"
    with pytest.raises(ValidationError) as err:
        cb.search(query, config=config.model_copy(update={"rerank_model": str(tmp_path)}))
    assert err.value.field == "rerank_model"


def _rows(conv_id: str, seed: int, n: int = 60) -> list[RankedQuestion]:
    x, y = _data(n * 10, seed)
    rows = []
    for q in range(n):
        block = slice(q * 10, (q + 1) * 10)
        dias = tuple(f"{conv_id}:{q}:{m}" for m in range(10))
        evidence = frozenset(d for d, label in zip(dias, y[block], strict=True) if label)
        rows.append(RankedQuestion(conv_id, evidence, dias, x[block]))
    return rows


def test_each_fold_model_is_trained_without_its_conversation(tmp_path: Path) -> None:
    rows = _rows("a", 7) + _rows("b", 8) + _rows("c", 9)
    models = fold_models(rows)
    assert list(models) == ["a", "b", "c"]
    sample = rows[0].features
    without_a = fit_rows([r for r in rows if r.conv_id != "a"])
    assert models["a"] is not None
    assert models["a"].score(sample).tolist() == without_a.score(sample).tolist()
    assert models["a"].score(sample).tolist() != fit_rows(rows).score(sample).tolist()
    paths = write_fold_models(models, tmp_path)
    for conv_id, model in models.items():
        path = paths[conv_id]
        assert path is not None and model is not None
        expected = pytest.approx(model.score(sample), abs=1e-4)
        assert ensemble_from_file(path).score(sample) == expected


def test_a_fold_whose_others_hold_no_evidence_gets_no_model(tmp_path: Path) -> None:
    found = _rows("a", 10)
    blank = [RankedQuestion(r.conv_id, frozenset(), r.dias, r.features) for r in _rows("b", 11)]
    models = fold_models(found + blank)
    assert models["a"] is None  # trained on b alone: no evidence to learn from
    assert models["b"] is not None
    assert write_fold_models(models, tmp_path)["a"] is None
    with pytest.raises(ValueError, match="two conversations"):
        fold_models(found)
