"""Shared pieces of the node-level DP trainers: settings, features, metrics, randomness.

Settings (spec 000 §2.2, spec 002 §3.9): *transductive* trains on the whole graph with the
loss on the training nodes; *inductive* (``data.split.kind == "inductive"``) trains on
`gnnprivacy.datasets.inductive_train_graph` (no test node, no edge touching one).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable

import numpy as np
import torch
from torch import Tensor
from torch_geometric.data import Data

from gnnprivacy._validation import check_choice
from gnnprivacy.random import as_torch_generator
from gnnprivacy.training.metrics import evaluate

__all__ = ["FEATURE_NORMS", "FeatureNorm", "LogitsClassifier", "derive_generators", "feature_moments", "is_inductive",
           "make_generator", "node_metrics", "weighted_precision"]

#: feature preprocessing choices (spec 000 §9 A13)
FEATURE_NORMS = ("auto", "none", "row_l2", "signed", "standardize_public", "standardize_global")


def is_inductive(data: Data) -> bool:
    """Whether ``data`` carries an inductive split."""
    return getattr(getattr(data, "split", None), "kind", None) == "inductive"


def make_generator(generator: torch.Generator | int | None) -> torch.Generator:
    """A ``torch.Generator``: passed through, seeded from an int, or from OS entropy."""
    return as_torch_generator(generator)


def derive_generators(gen: torch.Generator, names: tuple[str, ...]) -> dict[str, torch.Generator]:
    """Independent generators (one per purpose) seeded from draws of ``gen``."""
    seeds = torch.randint(0, 2**62, (len(names),), generator=gen).tolist()
    return {n: torch.Generator().manual_seed(int(s)) for n, s in zip(names, seeds)}


class FeatureNorm:
    """Feature preprocessing fitted once and applied identically at training and prediction.

    Choices (spec 000 §9 A13):

    * ``"auto"`` (default of the trainers): ``"standardize_public"`` when non-sensitive nodes
      are visible at training time (transductive), else ``"signed"``;
    * ``"none"``;
    * ``"row_l2"``: each row divided by its ℓ2 norm (per node, data-independent);
    * ``"signed"``: ``x ↦ 2x − 1`` (maps binary bag-of-words features to ±1; a fixed affine
      map, data-independent);
    * ``"standardize_public"``: ``(x − μ)/σ`` with one scalar mean and std computed over the
      non-sensitive nodes only (transductive: the nodes outside ``train_mask``, whose
      features the threat model already lets training read); no privacy cost; refused in
      the inductive setting, which has no such nodes at training time;
    * ``"standardize_global"``: the same over all nodes, as the reference code of spec 000
      does. It reads private features without accounting: it warns, and the trainers
      record it under ``privacy["unaccounted"]``.
    """

    def __init__(self, mode: str):
        self.requested = check_choice("feature_norm", mode, FEATURE_NORMS)
        self.mode = self.requested  # resolved by fit() when "auto"
        self.shift, self.scale = 0.0, 1.0

    @property
    def unaccounted(self) -> bool:
        return self.mode == "standardize_global"

    def fit(self, x, public_mask, *, has_public: bool | None = None,
            reduce: Callable[[Tensor], Tensor] | None = None) -> FeatureNorm:
        """Fix the map; ``public_mask`` marks the non-sensitive nodes of ``x`` (or ``None``).

        A graph split over several processes (`gnnprivacy.training.sharded`) passes its own
        part's rows as ``x`` (a numpy memory map is fine), ``has_public`` for the whole graph
        (whether any node anywhere is non-sensitive) and ``reduce``, which sums the moments
        of every part (an all-reduce): one process gets the same map as the whole graph."""
        if has_public is None:
            has_public = public_mask is not None and bool(public_mask.any())
        self.mode = self.requested
        if self.mode == "auto":
            self.mode = "standardize_public" if has_public else "signed"
        if self.mode == "signed":
            self.shift, self.scale = 0.5, 0.5
        elif self.mode.startswith("standardize"):
            if self.mode == "standardize_public":
                if not has_public:
                    raise ValueError(
                        "feature_norm='standardize_public' needs non-sensitive nodes visible at "
                        "training time (transductive setting); use 'signed', 'row_l2' or 'none'")
            else:
                warnings.warn("feature_norm='standardize_global' reads private features "
                              "without privacy accounting (spec 000 §9 A13)", stacklevel=3)
                public_mask = None
            moments = feature_moments(x, public_mask)
            self.set_moments(moments if reduce is None else reduce(moments))
        return self

    def set_moments(self, moments: Tensor) -> FeatureNorm:
        """Fix a standardisation's shift and scale from ``(Σ x, Σ x², count)`` (float64, as
        `feature_moments` returns; sums of several parts add up): the mean and the
        unbiased std of the entries."""
        s1, s2, count = (float(v) for v in moments)
        mean = s1 / count
        var = max(s2 - count * mean * mean, 0.0) / max(count - 1.0, 1.0)
        self.shift, self.scale = mean, math.sqrt(var) + 1e-6
        return self

    def transform(self, x: Tensor) -> Tensor:
        if self.mode == "row_l2":
            return torch.nn.functional.normalize(x, dim=1)
        if self.mode == "none":
            return x
        return torch.sub(x, self.shift).div_(self.scale)  # one copy of x, not two (x is large)

    def __repr__(self) -> str:
        return f"FeatureNorm({self.mode!r}, shift={self.shift:.4g}, scale={self.scale:.4g})"


def feature_moments(x, rows=None, *, chunk: int = 1 << 16) -> Tensor:
    """``(Σ x, Σ x², count)`` in float64 over the entries of the rows of ``x`` where ``rows``
    (a bool mask; all rows when ``None``), a chunk of rows at a time (no copy of ``x``; a
    numpy memory map is fine)."""
    out = torch.zeros(3, dtype=torch.float64)
    for lo in range(0, int(x.shape[0]), chunk):
        block = x[lo:lo + chunk]
        block = block.double() if isinstance(block, Tensor) else \
            torch.from_numpy(np.array(block, dtype=np.float64))
        if rows is not None:
            keep = rows[lo:lo + chunk]
            block = block[keep if isinstance(keep, Tensor) else torch.from_numpy(np.array(keep))]
        out += torch.stack([block.sum(), (block * block).sum(),
                            torch.tensor(float(block.numel()), dtype=torch.float64)])
    return out


def weighted_precision(logits: Tensor, y: Tensor, mask: Tensor) -> float:
    """Support-weighted precision (spec 000 §6.2: what Table III reports)."""
    from sklearn.metrics import precision_score

    if not bool(mask.any()):
        return math.nan
    pred = logits[mask].argmax(1).cpu().numpy()
    return float(precision_score(y[mask].cpu().numpy(), pred, average="weighted",
                                 zero_division=0))


def node_metrics(logits: Tensor, y: Tensor, data: Data, num_classes: int) -> dict[str, float]:
    """``test_accuracy``, ``test_macro_f1``, ``test_weighted_precision``, ``test_roc_auc``
    (binary), ``val_accuracy`` (when there are validation nodes), from all-node logits."""
    out = {}
    for split in ("test", "val"):
        mask = getattr(data, f"{split}_mask", None)
        if mask is None or not bool(mask.any()):
            continue
        scores = evaluate(logits, y, mask, num_classes=num_classes)
        out[f"{split}_accuracy"] = scores["accuracy"]
        if split == "test":
            out["test_macro_f1"] = scores["macro_f1"]
            out["test_weighted_precision"] = weighted_precision(logits, y, mask)
            if "roc_auc" in scores:
                out["test_roc_auc"] = scores["roc_auc"]
    return out


class LogitsClassifier:
    """Mixin of the node trainers that define ``predict_logits(data)`` and ``num_classes_``:
    ``predict`` (the argmax class per node) and ``score`` (`node_metrics` of the logits)."""

    def predict(self, data: Data) -> Tensor:
        return self.predict_logits(data).argmax(1)

    def score(self, data: Data) -> dict[str, float]:
        return node_metrics(self.predict_logits(data), data.y, data, self.num_classes_)
