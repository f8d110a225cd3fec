"""FeatureRR's budget-allocation scores (spec 001 §3.1, Eqs. 5-7 and the normalisation).

* sensitivity ``beta_i = |z_i - z^_i| / sum_j |z_j - z^_j|`` (masked input ``z^``); ``1/d`` when
  nothing was masked;
* importance ``alpha_i = |S_i| / sum_j |S_j|`` from attribution values ``S``; ``1/d`` when all 0;
* unified ``theta_i = gamma alpha_i + (1 - gamma)(beta_min + beta_max - beta_i)``, then
  ``theta / sum(theta)`` (mandatory, spec E5).

Importance here comes from **gradient x input** attribution of a small model trained on a
declared *public* reference set (`gradient_importance`). Captum's ``InputXGradient`` is
the same quantity; a few lines of autograd avoid a dependency. The sound default computes it on
public nodes only (spec E7): the allocation then does not depend on the private inputs.

*Privacy*: scores computed from public data cost nothing; scores from private data make the
allocation data-dependent (spec E6), and the release is then tagged ``heuristic``.
"""

from __future__ import annotations

import numpy as np
import torch

from gnnprivacy._validation import check_int, check_probability
from gnnprivacy.errors import InvalidParameterError

__all__ = ["gradient_importance", "importance_scores", "sensitivity_scores", "unified_scores"]


def _as_2d(name: str, x) -> np.ndarray:
    a = np.asarray(x.detach().cpu() if isinstance(x, torch.Tensor) else x, dtype=np.float64)
    if a.ndim == 1:
        a = a[None, :]
    if a.ndim != 2 or a.shape[1] == 0:
        raise InvalidParameterError(name, "a 1-D (d,) or 2-D (n, d) array", a.shape)
    if not np.all(np.isfinite(a)):
        raise InvalidParameterError(name, "finite values", "non-finite entries")
    return a


def _normalise_rows(a: np.ndarray) -> np.ndarray:
    a = np.abs(a)
    total = a.sum(axis=1, keepdims=True)
    uniform = np.full_like(a, 1.0 / a.shape[1])
    return np.where(total > 0, a / np.where(total > 0, total, 1.0), uniform)


def _global(per_node: np.ndarray) -> np.ndarray:
    m = per_node.mean(axis=0)
    return m / m.sum()


def sensitivity_scores(z, z_masked, *, scope: str = "global") -> np.ndarray:
    """Eq. 5: ``(d,)`` (``scope="global"``, mean over rows, renormalised) or ``(n, d)``."""
    a, b = _as_2d("z", z), _as_2d("z_masked", z_masked)
    if a.shape != b.shape:
        raise InvalidParameterError("z_masked", f"the shape of z {a.shape}", b.shape)
    beta = _normalise_rows(a - b)
    return _global(beta) if scope == "global" else beta


def importance_scores(attributions, *, scope: str = "global") -> np.ndarray:
    """Eq. 6 from attribution values ``S`` (``(d,)`` or ``(n, d)``)."""
    alpha = _normalise_rows(_as_2d("attributions", attributions))
    return _global(alpha) if scope == "global" else alpha


def unified_scores(alpha, beta, gamma: float = 0.5) -> np.ndarray:
    """Eq. 7 plus normalisation: non-negative scores summing to 1 (per row for 2-D input).

    Args:
        alpha: importance scores ``(d,)`` or ``(n, d)``, non-negative.
        beta: sensitivity scores of the same shape, non-negative.
        gamma: trade-off weight in ``[0, 1]``.
    """
    g = check_probability("gamma", gamma)
    a = np.asarray(alpha, dtype=np.float64)
    b = np.asarray(beta, dtype=np.float64)
    if a.shape != b.shape or a.ndim not in (1, 2) or a.shape[-1] == 0:
        raise InvalidParameterError("beta", f"an array of alpha's shape {a.shape}", b.shape)
    for name, v in (("alpha", a), ("beta", b)):
        if not np.all(np.isfinite(v)) or (v < 0).any():
            raise InvalidParameterError(name, "finite, non-negative scores",
                                        "negative or non-finite entries")
    reflected = b.min(axis=-1, keepdims=True) + b.max(axis=-1, keepdims=True) - b
    theta = g * a + (1.0 - g) * reflected
    total = theta.sum(axis=-1, keepdims=True)
    if (total <= 0).any():
        raise InvalidParameterError("alpha", "scores giving a positive total", "all-zero scores")
    return theta / total


def gradient_importance(x: torch.Tensor, y: torch.Tensor, *, num_classes: int,
                        epochs: int = 100, lr: float = 0.01,
                        generator: torch.Generator | None = None) -> np.ndarray:
    """Global importance ``alpha`` by gradient x input on a logistic model fitted to ``(x, y)``.

    ``x`` and ``y`` must be *public* reference data (spec E7). The model is multinomial
    logistic regression; each row's attribution is ``x * d logit_{y} / d x`` for its true
    class, and `importance_scores` averages the normalised magnitudes.
    """
    check_int("epochs", epochs, low=1)
    if x.dim() != 2 or x.size(0) == 0 or y.shape != (x.size(0),):
        raise InvalidParameterError("x", "a non-empty (n, d) tensor with labels (n,)",
                                    tuple(x.shape))
    x = x.to(torch.float32)
    lin = torch.nn.Linear(x.size(1), int(num_classes))
    with torch.no_grad():
        w = torch.randn(lin.weight.shape, generator=generator) * 0.01
        lin.weight.copy_(w)
        lin.bias.zero_()
    opt = torch.optim.Adam(lin.parameters(), lr=lr, weight_decay=5e-4)
    for _ in range(epochs):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(lin(x), y).backward()
        opt.step()
    attributions = x * lin.weight.detach()[y]   # gradient of the true-class logit is its row
    return importance_scores(attributions)
