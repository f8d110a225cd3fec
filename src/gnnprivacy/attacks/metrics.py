"""Metrics shared by every attack: AUC, accuracy, precision, recall, TPR at low FPR, bootstrap CIs.

Scores are "higher means member / linked". The raw AUC is always reported; an AUC below 0.5
is never silently replaced by ``1 - AUC`` (some published attack code does): callers that
want the flipped figure report it separately under its own name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from gnnprivacy.errors import InvalidParameterError

__all__ = ["attack_metrics", "tpr_at_fpr", "bootstrap_ci", "check_scores_labels"]


def check_scores_labels(scores, labels) -> tuple[np.ndarray, np.ndarray]:
    """Validate attack scores and binary labels; return them as float / int arrays."""
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    y = np.asarray(labels).reshape(-1)
    if s.shape != y.shape:
        raise InvalidParameterError("labels", f"an array of the scores' length {s.size}", y.size)
    if s.size == 0:
        raise InvalidParameterError("scores", "a non-empty array", "an empty array")
    if not np.all(np.isfinite(s)):
        raise InvalidParameterError("scores", "finite values",
                                    f"{int((~np.isfinite(s)).sum())} non-finite entries")
    values = set(np.unique(y).tolist())
    if not values <= {0, 1, False, True}:
        raise InvalidParameterError("labels", "binary labels (0/1)", sorted(values)[:5])
    y = y.astype(np.int64)
    if y.min() == y.max():
        raise InvalidParameterError("labels", "both classes (members and non-members)",
                                    f"only class {int(y[0])}")
    return s, y


def tpr_at_fpr(scores, labels, fpr: float) -> float:
    """Largest true-positive rate over thresholds whose false-positive rate is at most ``fpr``."""
    from sklearn.metrics import roc_curve

    s, y = check_scores_labels(scores, labels)
    fprs, tprs, _ = roc_curve(y, s)
    ok = fprs <= fpr + 1e-12
    return float(tprs[ok].max()) if ok.any() else 0.0


def attack_metrics(scores, labels, *, threshold: float | None = None,
                   predictions=None) -> dict[str, float]:
    """The standard attack metrics.

    *Privacy*: an attack measures leakage empirically; it claims no epsilon.

    Args:
        scores: attack scores, higher = positive (member, linked).
        labels: ground truth, 1 = positive.
        threshold: decision threshold for accuracy/precision/recall (default: the one that
            maximises accuracy on these scores, i.e. an optimistic attacker; pass a threshold
            chosen on training pairs for an honest figure).
        predictions: explicit 0/1 decisions (e.g. from K-means); overrides ``threshold``.

    Returns:
        ``auc`` (raw), ``accuracy``, ``precision``, ``recall``, ``tpr_at_1pct_fpr``,
        ``tpr_at_0.1pct_fpr``, ``threshold`` (nan when ``predictions`` were given).

    Example:
        >>> from gnnprivacy.attacks import attack_metrics
        >>> m = attack_metrics([0.9, 0.8, 0.3, 0.1], [1, 1, 0, 0])
        >>> m["auc"], m["accuracy"]
        (1.0, 1.0)
    """
    from sklearn.metrics import roc_auc_score, roc_curve

    s, y = check_scores_labels(scores, labels)
    auc = float(roc_auc_score(y, s))
    fprs, tprs, thresholds = roc_curve(y, s)
    if predictions is not None:
        pred = np.asarray(predictions).reshape(-1).astype(np.int64)
        if pred.shape != y.shape:
            raise InvalidParameterError("predictions", f"an array of length {y.size}", pred.size)
        thr = float("nan")
    else:
        if threshold is None:
            pos, neg = y.sum(), y.size - y.sum()
            acc = (tprs * pos + (1 - fprs) * neg) / y.size
            thr = float(thresholds[int(np.argmax(acc))])
        else:
            thr = float(threshold)
        pred = (s >= thr).astype(np.int64)
    tp = int(((pred == 1) & (y == 1)).sum())
    fp = int(((pred == 1) & (y == 0)).sum())
    fn = int(((pred == 0) & (y == 1)).sum())

    def at(target: float) -> float:
        ok = fprs <= target + 1e-12
        return float(tprs[ok].max()) if ok.any() else 0.0

    return {"auc": auc, "accuracy": float((pred == y).mean()),
            "precision": tp / (tp + fp) if tp + fp else 0.0,
            "recall": tp / (tp + fn) if tp + fn else 0.0,
            "tpr_at_1pct_fpr": at(0.01), "tpr_at_0.1pct_fpr": at(0.001), "threshold": thr}


def bootstrap_ci(scores, labels, *, metric: Callable[[np.ndarray, np.ndarray], float] | None = None,
                 n_boot: int = 1000, confidence: float = 0.95,
                 generator: np.random.Generator | None = None) -> Mapping[str, float]:
    """Percentile bootstrap confidence interval of ``metric`` (default: AUC) over resampled pairs.

    Resamples that miss a class are redrawn (so every replicate is defined).
    """
    from sklearn.metrics import roc_auc_score

    s, y = check_scores_labels(scores, labels)
    fn = metric or (lambda a, b: float(roc_auc_score(b, a)))
    rng = generator if generator is not None else np.random.default_rng(0)
    stats = []
    while len(stats) < n_boot:
        idx = rng.integers(0, s.size, size=s.size)
        if y[idx].min() == y[idx].max():
            continue
        stats.append(fn(s[idx], y[idx]))
    alpha = (1 - confidence) / 2
    lo, hi = np.quantile(stats, [alpha, 1 - alpha])
    return {"estimate": fn(s, y), "low": float(lo), "high": float(hi), "n_boot": n_boot,
            "confidence": confidence}
