"""FeatureRR: heterogeneous k-level randomized response on node features (spec 001 §3.1-3.2).

Tran et al., "Heterogeneous Randomized Response for Differential Privacy in Graph Neural
Networks", IEEE BigData 2022 (arXiv 2211.05766), Eqs. 5-9 and Theorem 3.

Each node's feature vector ``z`` is normalised to ``[0, 1]`` (row min-max by default, a local
map), discretised to a level ``t = clip(ceil(k z), 1, k)`` and every coordinate ``i`` is
resampled to ``u in {1..k}`` with ``P(u | t) = q_i^{|u - t|} / C_t``, ``q_i = exp(-eps_i / (k-1))``.
The output is ``u / k`` (biased towards the middle; not debiased, as in the paper). The node
budget is split as ``eps_i = eps_f theta_i`` with ``theta`` the normalised unified score
(Eq. 7 plus the supplement's normalisation, spec E5).

*Privacy*: for a fixed (data-independent) ``theta`` each coordinate is ``eps_i``-LDP (the
worst ratio ``P(1|1)/P(1|k) = q^{-(k-1)} = e^{eps_i}`` is attained and tight) and by basic
composition the vector is ``eps_f``-LDP. Unit ``FEATURE`` (one node's feature vector),
relation ``REPLACE``. Event: one pure ``eps_f`` event per release. With per-node scores
computed from the node's own private input (``score_scope="per_node"``) the allocation depends
on the data and the claim does not follow (spec E6): such releases are tagged ``heuristic``.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import Tensor

from gnnprivacy._validation import check_choice, check_int, check_positive, check_real
from gnnprivacy.accounting.units import NeighboringRelation, PrivacyUnit
from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.mechanisms.base import Mechanism, check_float_tensor, pure_epsilon_event

NORMALIZATIONS = ("row_minmax", "public_bounds")

__all__ = ["FeatureRR", "NORMALIZATIONS", "discretize", "eeb", "expected_output",
           "normalize_features", "transition_matrix"]


def _q(k: int, epsilon: float) -> float:
    return 1.0 if epsilon == 0 else math.exp(-epsilon / (k - 1))


def transition_matrix(k: int, epsilon: float) -> np.ndarray:
    """Exact ``P(u | t)`` of one coordinate, a ``(k, k)`` array indexed ``[t-1, u-1]``.

    Args:
        k: number of levels (>= 2).
        epsilon: the coordinate's budget ``eps_i >= 0`` (0: uniform output).
    """
    k = check_int("k", k, low=2)
    eps = check_real("epsilon", epsilon, low=0.0)
    levels = np.arange(k)
    dist = np.abs(levels[:, None] - levels[None, :]).astype(np.float64)
    if eps == 0:
        return np.full((k, k), 1.0 / k)
    w = np.exp(-dist * (eps / (k - 1)))
    return w / w.sum(axis=1, keepdims=True)


def expected_output(k: int, epsilon: float, t: int) -> float:
    """``E[z~ | t] = sum_u (u/k) P(u|t)`` (biased towards the middle of the range)."""
    t = check_int("t", t, low=1, high=k)
    row = transition_matrix(k, epsilon)[t - 1]
    return float(row @ (np.arange(1, k + 1) / k))


def eeb(k: int, epsilon: float, t: int | None = None) -> float:
    """Expected absolute error ``E|z~ - t/k|`` at level ``t`` (or averaged over a uniform ``t``)."""
    P = transition_matrix(k, epsilon)
    u = np.arange(1, k + 1) / k
    err = (P * np.abs(u[None, :] - u[:, None])).sum(axis=1)
    if t is None:
        return float(err.mean())
    return float(err[check_int("t", t, low=1, high=k) - 1])


def normalize_features(z: Tensor, method: str = "row_minmax", *, lower=None,
                       upper=None) -> Tensor:
    """Map ``z`` to ``[0, 1]``: per-row min-max (local; constant rows -> 0) or public bounds.

    Args:
        z: ``(n, d)`` features.
        method: ``"row_minmax"`` or ``"public_bounds"`` (clip to ``[lower, upper]`` per coordinate
            and rescale; the bounds must be public).
    """
    z = check_float_tensor(z, "z").to(torch.float64)
    check_choice("normalize", method, NORMALIZATIONS)
    if method == "row_minmax":
        lo = z.min(dim=1, keepdim=True).values
        span = z.max(dim=1, keepdim=True).values - lo
        return torch.where(span > 0, (z - lo) / span.clamp(min=1e-300), torch.zeros_like(z))
    if lower is None or upper is None:
        raise InvalidParameterError("lower/upper", "public bounds for normalize='public_bounds'",
                                    None)
    a = torch.as_tensor(lower, dtype=torch.float64).expand(z.size(1))
    b = torch.as_tensor(upper, dtype=torch.float64).expand(z.size(1))
    if not bool((b > a).all()):
        raise InvalidParameterError("upper", "greater than lower in every coordinate", "not")
    return ((torch.minimum(torch.maximum(z, a), b) - a) / (b - a))


def discretize(z01: Tensor, k: int) -> Tensor:
    """Levels ``t = clip(ceil(k z), 1, k)`` (int64), spec E2: ``z = 0`` maps to level 1."""
    return torch.ceil(z01 * k).clamp(1, k).to(torch.int64)


def check_theta(theta, d: int) -> np.ndarray:
    """A non-negative score vector of length ``d`` summing to 1 (renormalised if it does not)."""
    th = np.asarray(theta, dtype=np.float64)
    if th.shape != (d,):
        raise InvalidParameterError("theta", f"a score vector of shape ({d},)", th.shape)
    if not np.all(np.isfinite(th)) or (th < 0).any():
        raise InvalidParameterError("theta", "finite, non-negative scores",
                                    "negative or non-finite entries")
    total = th.sum()
    if total <= 0:
        raise InvalidParameterError("theta", "scores with a positive sum", float(total))
    return th / total


class FeatureRR(Mechanism):
    """Heterogeneous k-level randomized response on a feature matrix (spec 001 §3.2).

    *Privacy*: ``epsilon``-LDP per node's feature vector for a fixed ``theta`` (see the module
    docstring); unit ``FEATURE``, relation ``REPLACE``; `event` is one pure
    ``epsilon`` event per call.

    Args:
        epsilon: node budget ``eps_f > 0``.
        num_features: ``d``.
        k: number of levels (>= 2, default 10, spec E4).
        theta: score vector ``(d,)`` (non-negative, normalised here); ``None`` = uniform.
        normalize: ``"row_minmax"`` (default) or ``"public_bounds"`` (give ``lower``/``upper``).
    """

    _repr_fields = ("epsilon", "num_features", "k", "normalize")

    def __init__(self, *, epsilon: float, num_features: int, k: int = 10, theta=None,
                 normalize: str = "row_minmax", lower=None, upper=None):
        self.epsilon = check_positive("epsilon", epsilon)
        self.num_features = check_int("num_features", num_features, low=1)
        self.k = check_int("k", k, low=2)
        d = self.num_features
        self.theta = np.full(d, 1.0 / d) if theta is None else check_theta(theta, d)
        self.normalize = check_choice("normalize", normalize, NORMALIZATIONS)
        self.lower, self.upper = lower, upper
        self.unit = PrivacyUnit.FEATURE
        self.relation = NeighboringRelation.REPLACE
        self.sensitivity = 1.0
        self.secure_mode = False

    @property
    def epsilons(self) -> np.ndarray:
        """Per-coordinate budgets ``eps_i = eps_f theta_i`` (they sum to ``eps_f``)."""
        return self.epsilon * self.theta

    @property
    def event(self):
        return pure_epsilon_event(self.epsilon)

    def transition_matrix(self, i: int) -> np.ndarray:
        """``P(u | t)`` of coordinate ``i``."""
        return transition_matrix(self.k, float(self.epsilons[check_int("i", i, low=0,
                                                                        high=self.num_features - 1)]))

    def expected_error(self) -> np.ndarray:
        """Per-coordinate EEB averaged over a uniform level (no quantisation error)."""
        return np.array([eeb(self.k, float(e)) for e in self.epsilons])

    def _cdf_tables(self) -> Tensor:
        """``(d, k, k)`` cumulative transition tables (last column forced to 1)."""
        k = self.k
        levels = torch.arange(k, dtype=torch.float64)
        dist = (levels[:, None] - levels[None, :]).abs()
        eps = torch.as_tensor(self.epsilons, dtype=torch.float64)
        w = torch.exp(-dist[None] * (eps / (k - 1))[:, None, None])
        cdf = torch.cumsum(w / w.sum(dim=2, keepdim=True), dim=2)
        cdf[..., -1] = 1.0
        return cdf

    def levels(self, z: Tensor) -> Tensor:
        """The discretised levels ``t`` of ``z`` (after normalisation)."""
        z = check_float_tensor(z, "z")
        if z.dim() != 2 or z.size(1) != self.num_features:
            raise InvalidParameterError("z", f"a 2-D (n, {self.num_features}) tensor",
                                        tuple(z.shape))
        return discretize(normalize_features(z, self.normalize, lower=self.lower,
                                             upper=self.upper), self.k)

    def __call__(self, z: Tensor, *, generator: torch.Generator | None = None) -> Tensor:
        """Randomise every coordinate of every row; returns ``u / k`` in ``z``'s dtype."""
        t = self.levels(z)
        cdf = self._cdf_tables()
        n, d = t.shape
        chunk_rows = max(1, 4_000_000 // (d * self.k))
        out = torch.empty((n, d), dtype=z.dtype)
        cols = torch.arange(d)
        for start in range(0, n, chunk_rows):
            rows = t[start:start + chunk_rows] - 1
            rows_cdf = cdf[cols[None, :], rows]                    # (b, d, k)
            u = torch.rand(rows.shape, generator=generator, dtype=torch.float64)
            level = (rows_cdf < u[..., None]).sum(dim=2).clamp(max=self.k - 1) + 1
            out[start:start + chunk_rows] = (level.to(torch.float64) / self.k).to(z.dtype)
        return out
