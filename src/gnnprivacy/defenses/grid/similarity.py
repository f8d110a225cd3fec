"""GRID's similarity ``sim(x, y) = corr(x, y) + cos(x, y)`` and its gradient in ``x``
(spec 003 §4.2, paper Appendix A.1-A.2).

Closed forms, with ``x~ = x - mean(x)``:

* ``d/dx cos(x, y) = (y/|y| - cos(x, y) x/|x|) / |x|``
* ``d/dx corr(x, y) = (y~/|y~| - corr(x, y) x~/|x~|) / |x~|``

A uniform vector has ``|x~| < 1e-12``: its correlation is defined as 0 with gradient 0; ``|x|``
is guarded with 1e-12.

Because cos and corr are linear in the *unit* vectors of their second argument, a sum of
similarities over many neighbours is a linear function of two aggregated vectors:
``sum_k sim(x, v_k) = x.a/|x| + x~.b/|x~|`` with ``a = sum_k v_k/|v_k|`` and
``b = sum_k v~_k/|v~_k|``. `aggregate_terms` and `linear_similarity` use this to
evaluate GRID's objective for all core nodes at once in O(|N_c| A) per iteration.
"""

from __future__ import annotations

import numpy as np

__all__ = ["SIMILARITIES", "similarity", "similarity_grad", "unit_terms", "linear_similarity",
           "linear_similarity_grad"]

#: Similarities supported by GRID's solver (the distance variants of Fig. 1 are not built).
SIMILARITIES = ("corr+cos", "cos", "corr")
_EPS = 1e-12


def _weights(kind: str) -> tuple[float, float]:
    if kind == "corr+cos":
        return 1.0, 1.0
    if kind == "cos":
        return 1.0, 0.0
    if kind == "corr":
        return 0.0, 1.0
    raise ValueError(f"unknown similarity {kind!r}; choices: {SIMILARITIES}")


def unit_terms(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row: ``v/|v|`` and ``v~/|v~|`` (0 for a uniform row), float64."""
    v = np.asarray(v, dtype=np.float64)
    norm = np.maximum(np.linalg.norm(v, axis=-1, keepdims=True), _EPS)
    c = v - v.mean(-1, keepdims=True)
    cn = np.linalg.norm(c, axis=-1, keepdims=True)
    cu = np.where(cn >= _EPS, c / np.where(cn >= _EPS, cn, 1.0), 0.0)
    return v / norm, cu


def similarity(x, y, kind: str = "corr+cos") -> np.ndarray:
    """Row-wise ``sim(x, y)`` (broadcasting), in [-2, 2] for ``corr+cos``."""
    wc, wr = _weights(kind)
    xu, xc = unit_terms(x)
    yu, yc = unit_terms(y)
    return wc * (xu * yu).sum(-1) + wr * (xc * yc).sum(-1)


def similarity_grad(x, y, kind: str = "corr+cos") -> np.ndarray:
    """Row-wise gradient of ``sim(x, y)`` with respect to ``x`` (closed form)."""
    yu, yc = unit_terms(y)
    return linear_similarity_grad(np.asarray(x, dtype=np.float64), yu, yc, kind)


def linear_similarity(x: np.ndarray, a: np.ndarray, b: np.ndarray, kind: str = "corr+cos") -> np.ndarray:
    """``x.a/|x| + x~.b/|x~|`` per row: the sum of similarities to the vectors aggregated in
    ``a`` (sum of unit vectors) and ``b`` (sum of centred unit vectors)."""
    wc, wr = _weights(kind)
    xu, xc = unit_terms(x)
    return wc * (xu * a).sum(-1) + wr * (xc * b).sum(-1)


def linear_similarity_grad(x: np.ndarray, a: np.ndarray, b: np.ndarray,
                           kind: str = "corr+cos") -> np.ndarray:
    """Gradient in ``x`` of `linear_similarity`."""
    wc, wr = _weights(kind)
    norm = np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), _EPS)
    xu = x / norm
    g = wc * (a - (xu * a).sum(-1, keepdims=True) * xu) / norm
    if wr:
        c = x - x.mean(-1, keepdims=True)
        cn = np.linalg.norm(c, axis=-1, keepdims=True)
        ok = cn >= _EPS
        safe = np.where(ok, cn, 1.0)
        cu = c / safe
        bc = b - b.mean(-1, keepdims=True)  # a sum of centred vectors is already centred
        gr = (bc - (cu * bc).sum(-1, keepdims=True) * cu) / safe
        g = g + wr * np.where(ok, gr, 0.0)
    return g
