"""Attacks on graph learning: link stealing, influence attacks, membership inference.

Every attack reports the metrics of `gnnprivacy.attacks.metrics` (raw AUC, accuracy,
precision, recall, TPR at 1% and 0.1% FPR).
"""

from gnnprivacy.attacks.metrics import attack_metrics, bootstrap_ci, tpr_at_fpr

__all__ = ["attack_metrics", "bootstrap_ci", "tpr_at_fpr"]
