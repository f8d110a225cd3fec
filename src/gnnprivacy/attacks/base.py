"""A small shared shape for attacks: what an attack returns and how its metrics are computed.

An attack produces one score per tested item (node pair, node), "higher means positive"
(linked, member), and optionally explicit 0/1 decisions (K-means, a 0.5 threshold).
`AttackOutcome` keeps scores, labels and decisions together with
`gnnprivacy.attacks.metrics.attack_metrics`. The raw AUC is always reported; the
reference-code convention ``max(AUC, 1 - AUC)`` is reported separately as ``auc_flipped``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from gnnprivacy.attacks.metrics import attack_metrics

__all__ = ["AttackOutcome", "PairAttack", "outcome_metrics"]


def outcome_metrics(scores, labels, *, predictions=None, threshold: float | None = None) -> dict[str, float]:
    """``attack_metrics`` plus ``auc_flipped = max(auc, 1 - auc)`` (spec 003 §9 A16)."""
    m = attack_metrics(scores, labels, predictions=predictions, threshold=threshold)
    m["auc_flipped"] = max(m["auc"], 1.0 - m["auc"])
    return m


@dataclass
class AttackOutcome:
    """Scores, labels and decisions of one attack on one test set, with its metrics.

    Attributes:
        scores: higher = positive (e.g. P(link) or a negated distance).
        labels: ground truth (1 = positive).
        predictions: 0/1 decisions, or ``None`` (then the metrics use ``threshold``).
        threshold: decision threshold on ``scores`` when ``predictions`` is ``None``.
        info: attack-specific details (per-metric AUCs, feature dimension ...).
    """

    scores: np.ndarray
    labels: np.ndarray
    predictions: np.ndarray | None = None
    threshold: float | None = None
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def metrics(self) -> dict[str, float]:
        return outcome_metrics(self.scores, self.labels, predictions=self.predictions,
                               threshold=self.threshold)


class PairAttack(Protocol):
    """An attack on node pairs: ``run(...) -> AttackOutcome`` over a test pair set."""

    name: str

    def run(self, *args, **kwargs) -> AttackOutcome: ...
