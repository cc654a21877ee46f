"""Learning a query adapter (query_adapter.py) in numpy: no model call, seconds on a CPU.

Each question's vector, mapped by the matrix, should be nearer its evidence turns than the
other turns of its conversation: a softmax over the conversation's turns (temperature
`temperature`: the model's similarities sit in a narrow band), cross-entropy against the
evidence (shared equally when there are several), plus `l2` times the squared distance of
the matrix from the identity, which keeps the map close to the model's own space. Adam,
full batch, a fixed number of steps. The settings were fixed on the LoCoMo folds' raw
vector ranking, not tuned per set (docs/benchmark-log.md, "A query adapter").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict, Field

__all__ = ["AdapterParams", "QuestionGroup", "fit_adapter"]


class AdapterParams(BaseModel):
    model_config = ConfigDict(frozen=True)

    temperature: float = Field(default=0.05, gt=0)
    l2: float = Field(default=1.0, ge=0)
    steps: int = Field(default=150, ge=1)
    learning_rate: float = Field(default=1e-3, gt=0)


@dataclass(frozen=True)
class QuestionGroup:
    """One conversation: its questions' vectors, its turns' vectors and, per question, the
    rows of `turns` that are its evidence."""

    questions: npt.NDArray[np.float32]  # (n, d)
    turns: npt.NDArray[np.float32]  # (m, d)
    evidence: Sequence[Sequence[int]]  # n lists of row numbers of `turns`

    def targets(self) -> npt.NDArray[np.float64]:
        y = np.zeros((len(self.evidence), len(self.turns)))
        for row, rows in enumerate(self.evidence):
            y[row, list(rows)] = 1.0 / len(rows)
        return y


def fit_adapter(
    groups: Sequence[QuestionGroup],
    params: AdapterParams | None = None,
    progress: Callable[[int], None] | None = None,
) -> npt.NDArray[np.float32]:
    """The matrix learned from `groups` (see the module doc); ValueError when they hold no
    question with evidence."""
    params = params or AdapterParams()
    kept = [g for g in groups if len(g.evidence) and len(g.turns)]
    total = sum(len(g.evidence) for g in kept)
    if not total:
        raise ValueError("no question with evidence to learn from")
    dim = kept[0].questions.shape[1]
    eye = np.eye(dim)
    w = eye.copy()
    m = np.zeros_like(w)
    v = np.zeros_like(w)
    targets = [g.targets() for g in kept]
    t = params.temperature
    for step in range(1, params.steps + 1):
        grad = 2 * params.l2 * (w - eye)
        for g, y in zip(kept, targets, strict=True):
            q = g.questions.astype(np.float64)
            s = (q @ w) @ g.turns.T / t
            s -= s.max(axis=1, keepdims=True)
            p = np.exp(s)
            p /= p.sum(axis=1, keepdims=True)
            grad += q.T @ (((p - y) / t) @ g.turns) / total
        m = 0.9 * m + 0.1 * grad
        v = 0.999 * v + 0.001 * grad**2
        m_hat = m / (1 - 0.9**step)
        v_hat = v / (1 - 0.999**step)
        w -= params.learning_rate * m_hat / (np.sqrt(v_hat) + 1e-8)
        if progress is not None:
            progress(step)
    return w.astype(np.float32)
