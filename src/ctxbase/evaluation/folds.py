"""Leave-one-conversation-out evaluation.

A figure measured on the conversations a system was tuned on overstates how it does on new
ones. Here each conversation is held out in turn: whatever is chosen (one of several
candidate configurations) is chosen on the other conversations only, then scored on the held
out one. The report gives every fold, the mean over folds and the worst fold, which is the
figure a change must not lower.

Pure functions over already scored questions (`QuestionOutcome`), so no engine is needed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .locomo import QuestionOutcome, category_name

__all__ = ["Fold", "FoldsReport", "leave_one_conversation_out"]


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


@dataclass(frozen=True, slots=True)
class Fold:
    """One held-out conversation, scored with the candidate chosen on the others."""

    held_out: str
    chosen: str
    train_recall: float  # the chosen candidate's mean recall@select_k on the other folds
    questions: int
    recall: Mapping[int, float]  # k -> mean recall on the held-out questions
    by_category: Mapping[str, Mapping[int, float]]
    questions_by_category: Mapping[str, int]


def _figures(
    outcomes: Sequence[QuestionOutcome], ks: Sequence[int]
) -> tuple[dict[int, float], dict[str, dict[int, float]], dict[str, int]]:
    recall = {k: _mean([o.recall[k] for o in outcomes]) for k in ks}
    by_category: dict[str, dict[int, float]] = {}
    counts: dict[str, int] = {}
    for category in sorted({o.category for o in outcomes}):
        members = [o for o in outcomes if o.category == category]
        label = category_name(category)
        by_category[label] = {k: _mean([m.recall[k] for m in members]) for k in ks}
        counts[label] = len(members)
    return recall, by_category, counts


@dataclass(frozen=True, slots=True)
class FoldsReport:
    ks: tuple[int, ...]
    select_k: int
    candidates: tuple[str, ...]
    folds: tuple[Fold, ...]

    def mean(self) -> tuple[dict[int, float], dict[str, dict[int, float]]]:
        """Recall and per-category recall averaged over folds (each fold counts once)."""
        recall = {k: _mean([f.recall[k] for f in self.folds]) for k in self.ks}
        return recall, self._per_category(_mean)

    def worst(self) -> tuple[dict[int, float], dict[str, dict[int, float]]]:
        """The lowest fold for each figure separately."""
        recall = {k: min(f.recall[k] for f in self.folds) for k in self.ks}
        return recall, self._per_category(min)

    def _per_category(self, combine: Any) -> dict[str, dict[int, float]]:
        labels: list[str] = []
        for fold in self.folds:
            labels += [label for label in fold.by_category if label not in labels]
        out: dict[str, dict[int, float]] = {}
        for label in labels:
            present = [f for f in self.folds if label in f.by_category]
            out[label] = {k: combine([f.by_category[label][k] for f in present]) for k in self.ks}
        return out

    def to_json(self) -> dict[str, Any]:
        def rec(recall: Mapping[int, float]) -> dict[str, float]:
            return {str(k): round(v, 4) for k, v in recall.items()}

        def cats(by_category: Mapping[str, Mapping[int, float]]) -> dict[str, Any]:
            return {label: rec(r) for label, r in by_category.items()}

        mean_recall, mean_cats = self.mean()
        worst_recall, worst_cats = self.worst()
        return {
            "select_k": self.select_k,
            "candidates": list(self.candidates),
            "per_fold": [
                {
                    "held_out": f.held_out,
                    "chosen": f.chosen,
                    "train_recall": round(f.train_recall, 4),
                    "questions": f.questions,
                    "recall": rec(f.recall),
                    "by_category": cats(f.by_category),
                    "questions_by_category": dict(f.questions_by_category),
                }
                for f in self.folds
            ],
            "mean": {"recall": rec(mean_recall), "by_category": cats(mean_cats)},
            "worst": {"recall": rec(worst_recall), "by_category": cats(worst_cats)},
        }

    def render(self) -> str:
        """One line per fold, then the mean and the worst fold, at every k."""
        labels = list(self.mean()[1])
        head = ["fold", "chosen", "n", *(f"R@{k}" for k in self.ks), *labels]
        rows: list[list[str]] = []
        middle_k = self.ks[len(self.ks) // 2]
        for f in self.folds:
            rows.append(
                [
                    f.held_out,
                    f.chosen,
                    str(f.questions),
                    *(f"{f.recall[k]:.3f}" for k in self.ks),
                    *(
                        f"{f.by_category[label][middle_k]:.3f}" if label in f.by_category else "-"
                        for label in labels
                    ),
                ]
            )
        for name, (recall, by_cat) in (("mean", self.mean()), ("worst", self.worst())):
            rows.append(
                [
                    name,
                    "",
                    "",
                    *(f"{recall[k]:.3f}" for k in self.ks),
                    *(f"{by_cat[label][middle_k]:.3f}" for label in labels),
                ]
            )
        widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
        lines = ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in [head]]
        lines.append("  ".join("-" * w for w in widths))
        lines += ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
        lines.append(f"(categories at R@{middle_k}; candidates chosen by R@{self.select_k})")
        return "\n".join(lines)


def leave_one_conversation_out(
    outcomes_by_candidate: Mapping[str, Sequence[QuestionOutcome]],
    ks: Sequence[int],
    select_k: int = 10,
) -> FoldsReport:
    """Hold out each conversation in turn; pick the candidate with the best mean
    recall@select_k over the other conversations' questions (ties: the first candidate
    given) and score it on the held-out conversation.

    Every candidate must have scored the same questions. With one candidate nothing is
    fitted and the folds are the per-conversation figures.
    """
    if not outcomes_by_candidate:
        raise ValueError("at least one candidate is needed")
    k_values = tuple(sorted(set(ks)))
    if select_k not in k_values:
        raise ValueError(f"select_k {select_k} must be one of the scored ks {k_values}")
    names = tuple(outcomes_by_candidate)
    conv_ids: list[str] = []
    for outcome in outcomes_by_candidate[names[0]]:
        if outcome.conv_id not in conv_ids:
            conv_ids.append(outcome.conv_id)
    if len(conv_ids) < 2:
        raise ValueError("leave-one-out needs at least two conversations")
    expected = sorted((o.conv_id, o.question) for o in outcomes_by_candidate[names[0]])
    for name in names[1:]:
        if sorted((o.conv_id, o.question) for o in outcomes_by_candidate[name]) != expected:
            raise ValueError(f"candidate {name!r} scored other questions than {names[0]!r}")
    folds: list[Fold] = []
    for held_out in conv_ids:
        best_name, best_train = names[0], -1.0
        for name in names:
            train = [
                o.recall[select_k] for o in outcomes_by_candidate[name] if o.conv_id != held_out
            ]
            score = _mean(train)
            if score > best_train + 1e-12:
                best_name, best_train = name, score
        test = [o for o in outcomes_by_candidate[best_name] if o.conv_id == held_out]
        recall, by_category, counts = _figures(test, k_values)
        folds.append(Fold(held_out, best_name, best_train, len(test), recall, by_category, counts))
    return FoldsReport(k_values, select_k, names, tuple(folds))
