"""Node-classification metrics: accuracy, macro-F1, ROC-AUC (binary tasks).

Pure functions on tensors or arrays; nothing is modified. F1 and AUC are delegated to
scikit-learn (``f1_score(average="macro")``, ``roc_auc_score``).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from gnnprivacy.errors import InvalidParameterError


def _to_numpy(values) -> np.ndarray:
    if isinstance(values, torch.Tensor):
        return values.detach().cpu().numpy()
    return np.asarray(values)


def _select(values, mask) -> np.ndarray:
    arr = _to_numpy(values)
    if mask is None:
        return arr
    m = _to_numpy(mask)
    if m.dtype != bool:
        raise InvalidParameterError("mask", "a boolean mask (or None)", f"dtype {m.dtype}")
    if m.shape[0] != arr.shape[0]:
        raise InvalidParameterError("mask", f"length {arr.shape[0]}", m.shape[0])
    return arr[m]


def _labels(pred_or_logits, y, mask) -> tuple[np.ndarray, np.ndarray]:
    pred = _select(pred_or_logits, mask)
    true = _select(y, mask)
    if pred.ndim == 2:
        pred = pred.argmax(axis=1)
    if pred.shape != true.shape:
        raise InvalidParameterError("predictions", f"shape {true.shape} (one per label)",
                                    pred.shape)
    return pred, true


def accuracy(pred_or_logits, y, mask=None) -> float:
    """Fraction of correct predictions.

    Args:
        pred_or_logits: predicted labels ``(N,)`` or scores ``(N, C)`` (arg-maxed).
        y: true labels ``(N,)``.
        mask: optional boolean mask ``(N,)`` selecting the evaluated nodes.

    Returns:
        Accuracy in [0, 1]; ``nan`` when no node is selected.
    """
    pred, true = _labels(pred_or_logits, y, mask)
    if true.size == 0:
        return math.nan
    return float((pred == true).mean())


def macro_f1(pred_or_logits, y, mask=None) -> float:
    """Unweighted mean of the per-class F1 scores over the classes present in ``y`` or the
    predictions (scikit-learn's ``f1_score(average="macro")``, ``zero_division=0``).

    Args:
        pred_or_logits: predicted labels ``(N,)`` or scores ``(N, C)`` (arg-maxed).
        y: true labels ``(N,)``.
        mask: optional boolean mask ``(N,)`` selecting the evaluated nodes.

    Returns:
        Macro-F1 in [0, 1]; ``nan`` when no node is selected.
    """
    from sklearn.metrics import f1_score

    pred, true = _labels(pred_or_logits, y, mask)
    if true.size == 0:
        return math.nan
    return float(f1_score(true, pred, average="macro", zero_division=0))


def roc_auc(scores, y, mask=None) -> float:
    """Area under the ROC curve of a binary task.

    Args:
        scores: positive-class scores ``(N,)``, or logits/probabilities ``(N, 2)`` (the
            softmax probability of class 1 is used; it ranks like ``logit_1 - logit_0``).
        y: labels in {0, 1}.
        mask: optional boolean mask.

    Returns:
        ROC-AUC in [0, 1]; ``nan`` when the selected labels hold a single class.

    Raises:
        InvalidParameterError: more than two classes.
    """
    from sklearn.metrics import roc_auc_score

    s = _select(scores, mask).astype(np.float64)
    true = _select(y, mask)
    if s.ndim == 2:
        if s.shape[1] != 2:
            raise InvalidParameterError("scores", "shape (N,) or (N, 2) for a binary task",
                                        s.shape)
        s = s[:, 1] - s[:, 0]
    if true.size and not np.isin(true, (0, 1)).all():
        raise InvalidParameterError("y", "binary labels in {0, 1}", np.unique(true)[:5])
    if np.unique(true).size < 2:
        return math.nan
    return float(roc_auc_score(true, s))


def evaluate(logits, y, mask=None, *, num_classes: int | None = None) -> dict[str, float]:
    """Accuracy and macro-F1 (plus ``roc_auc`` when the task is binary) on the masked nodes.

    Args:
        logits: model outputs ``(N, C)``.
        y: true labels ``(N,)``.
        mask: optional boolean mask.
        num_classes: number of classes (decides whether ``roc_auc`` is reported); default
            ``logits.shape[1]``.

    Returns:
        ``{"accuracy", "macro_f1"}`` and, for ``C == 2``, ``"roc_auc"``.
    """
    c = int(logits.shape[1]) if num_classes is None else num_classes
    out = {"accuracy": accuracy(logits, y, mask), "macro_f1": macro_f1(logits, y, mask)}
    if c == 2:
        out["roc_auc"] = roc_auc(logits, y, mask)
    return out


__all__ = ["accuracy", "macro_f1", "roc_auc", "evaluate"]
