"""Pair features of the link-stealing attacks (He et al., USENIX Security 2021; spec 003 §3.1).

* `distances` -- the eight distances ``D8(u, w)`` (cosine, euclidean, correlation,
  chebyshev, braycurtis, canberra, cityblock, sqeuclidean) with scipy's semantics, vectorised
  over pairs; any NaN or infinite result becomes 0 (as in the reference code).
* `entropy` -- ``H(p) = -sum_k (p_k + 1e-5) ln(p_k + 1e-5)``.
* `pair_ops` -- ``OPS(a, b) = [avg, hadamard, weighted-L1, weighted-L2]``.

All functions take row-aligned arrays ``a[k], b[k]`` of the pair endpoints and return one
row of features per pair (float64).
"""

from __future__ import annotations

import numpy as np

__all__ = ["DISTANCES", "distances", "entropy", "entropy_ops", "pair_ops"]

#: The eight distances in the order of ``D8``.
DISTANCES = ("cosine", "euclidean", "correlation", "chebyshev", "braycurtis", "canberra",
             "cityblock", "sqeuclidean")


def _as2d(a) -> np.ndarray:
    arr = np.asarray(a, dtype=np.float64)
    return arr.reshape(arr.shape[0], -1)


def distances(a, b, names=DISTANCES) -> np.ndarray:
    """Distances between rows ``a[k]`` and ``b[k]``: shape ``(P, len(names))``.

    Matches ``scipy.spatial.distance.<name>(a[k], b[k])`` (tested), with NaN / inf -> 0.
    """
    a, b = _as2d(a), _as2d(b)
    if a.shape != b.shape:
        raise ValueError(f"a and b must have the same shape; got {a.shape} and {b.shape}")
    diff = a - b
    adiff = np.abs(diff)
    out = np.empty((a.shape[0], len(names)), dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        for col, name in enumerate(names):
            if name == "cosine":
                num = (a * b).sum(1)
                den = np.sqrt((a * a).sum(1)) * np.sqrt((b * b).sum(1))
                val = 1.0 - num / den
            elif name == "correlation":
                ac = a - a.mean(1, keepdims=True)
                bc = b - b.mean(1, keepdims=True)
                den = np.sqrt((ac * ac).sum(1)) * np.sqrt((bc * bc).sum(1))
                val = 1.0 - (ac * bc).sum(1) / den
            elif name == "euclidean":
                val = np.sqrt((diff * diff).sum(1))
            elif name == "sqeuclidean":
                val = (diff * diff).sum(1)
            elif name == "chebyshev":
                val = adiff.max(1) if a.shape[1] else np.zeros(a.shape[0])
            elif name == "cityblock":
                val = adiff.sum(1)
            elif name == "braycurtis":
                val = adiff.sum(1) / np.abs(a + b).sum(1)
            elif name == "canberra":
                den = np.abs(a) + np.abs(b)
                terms = np.where(den > 0, adiff / np.where(den > 0, den, 1.0), 0.0)
                val = terms.sum(1)
            else:
                raise ValueError(f"unknown distance {name!r}; choices: {DISTANCES}")
            out[:, col] = val
    out[~np.isfinite(out)] = 0.0
    return out


def entropy(p) -> np.ndarray:
    """Row entropies ``-sum (p + 1e-5) ln(p + 1e-5)`` (the reference code's smoothing)."""
    p = _as2d(p) + 1e-5
    return -(p * np.log(p)).sum(1)


def pair_ops(a, b) -> np.ndarray:
    """``[ (a+b)/2, a*b, |a-b|, (a-b)^2 ]`` row-wise: shape ``(P, 4 * dim)``."""
    a, b = _as2d(a), _as2d(b)
    d = a - b
    return np.concatenate([(a + b) / 2, a * b, np.abs(d), d * d], axis=1)


def entropy_ops(p, q) -> np.ndarray:
    """``E(p, q) = OPS(H(p), H(q))``: four scalars per pair."""
    return pair_ops(entropy(p)[:, None], entropy(q)[:, None])
