"""Per-step laws of the canary's effect, seen along the canary direction.

A white-box adversary who inserts a Dirac gradient canary (Nasr et al. 2023) and knows the
rest of the clipped sum (``know_base=True``, spec 000 §3.7) observes, per step and in units
of the noise std, ``o* ~ N(0, 1)`` without the canary and ``o' ~ N(s, 1)`` with it, where
the realised shift ``s`` follows the method's sampling law. A `ShiftLaw` is that law
(support and weights); a `Phase` repeats one law for a number of steps, and a
mechanism is a sequence of phases (GAP: encoder steps, aggregation hops, classifier steps).

The builders use the methods' own sampling laws, i.e. exactly the events the accountants
compose (the same functions of `gnnprivacy.accounting`), so a shift ``s`` here is the
largest change of the clipped sum that the differing node can cause, realised with equality
by a Dirac canary: the audit is of the mechanism, in its worst case over canary gradients.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gnnprivacy._validation import check_int, check_positive, check_probability
from gnnprivacy.errors import InvalidParameterError

__all__ = ["ShiftLaw", "Phase", "heterpoisson_law", "dpgnn_law", "dpsgd_law", "gaussian_law",
           "total_steps"]


@dataclass(frozen=True)
class ShiftLaw:
    """A finite law of shifts (in noise-std units): ``P[s = shifts[i]] = weights[i]``."""

    shifts: tuple[float, ...]
    weights: tuple[float, ...]

    def __post_init__(self):
        s, w = np.asarray(self.shifts, float), np.asarray(self.weights, float)
        if s.shape != w.shape or s.ndim != 1 or s.size == 0:
            raise InvalidParameterError("weights", "one weight per shift", (s.shape, w.shape))
        if (w < 0).any() or not np.isclose(w.sum(), 1.0, atol=1e-9):
            raise InvalidParameterError("weights", "a probability vector", float(w.sum()))
        if (s < 0).any() or not np.all(np.isfinite(s)):
            raise InvalidParameterError("shifts", "finite non-negative shifts", s.min())

    @classmethod
    def from_arrays(cls, shifts, weights, *, min_weight: float = 0.0) -> ShiftLaw:
        """Build from arrays, merging equal shifts and dropping weights ``<= min_weight``."""
        s = np.asarray(shifts, float)
        w = np.asarray(weights, float)
        keep = w > min_weight
        s, w = s[keep], w[keep]
        uniq, inv = np.unique(s, return_inverse=True)
        merged = np.bincount(inv, weights=w)
        return cls(tuple(uniq.tolist()), tuple((merged / merged.sum()).tolist()))

    def sample(self, size, generator: np.random.Generator) -> np.ndarray:
        """Draw shifts (inverse-CDF, vectorised)."""
        cdf = np.cumsum(self.weights)
        idx = np.searchsorted(cdf, generator.random(size) * cdf[-1], side="right")
        return np.asarray(self.shifts)[np.minimum(idx, len(self.shifts) - 1)]

    def log_likelihood_ratio(self, obs: np.ndarray, *, min_weight: float = 1e-16) -> np.ndarray:
        """``ln Σ_c w_c φ(o - c) / φ(o) = logsumexp_c(ln w_c + c·o - c²/2)`` elementwise.

        Components lighter than ``min_weight`` are left out of the statistic (a test may use
        any statistic; this only trims work, the observations keep the full law).
        """
        s, w = np.asarray(self.shifts), np.asarray(self.weights)
        keep = w > min_weight
        s, logw = s[keep], np.log(w[keep])
        terms = logw + np.multiply.outer(obs, s) - 0.5 * s ** 2
        top = terms.max(axis=-1, keepdims=True)
        return (top + np.log(np.exp(terms - top).sum(axis=-1, keepdims=True)))[..., 0]

    @property
    def mean(self) -> float:
        return float(np.dot(self.shifts, self.weights))

    def __repr__(self) -> str:
        s, w = np.asarray(self.shifts), np.asarray(self.weights)
        top = np.argsort(w)[::-1][:4]
        body = ", ".join(f"{s[i]:.3g}:{w[i]:.3g}" for i in sorted(top))
        return f"ShiftLaw({len(s)} shifts, max {s.max():.3g}; {body})"


@dataclass(frozen=True)
class Phase:
    """``steps`` independent steps with the same `ShiftLaw` (and a label)."""

    law: ShiftLaw
    steps: int
    name: str = "step"

    def __post_init__(self):
        check_int("steps", self.steps, low=1)


def total_steps(phases) -> int:
    """Number of steps over all phases."""
    return int(sum(p.steps for p in phases))


def heterpoisson_law(*, q_b: float, M: float, degree: int, noise_multiplier: float,
                     overlap_removal: bool = True) -> ShiftLaw:
    """Theorem-2 mixture of spec 000 §4.1 for a canary of out-degree ``degree``.

    The accounting module's shifts are in units of the clip norm R (central: 1, k
    peripheral uses: 2k); the noise std is ``noise_multiplier · R``.
    """
    from gnnprivacy.accounting.heterpoisson import shift_distribution

    z = check_positive("noise_multiplier", noise_multiplier)
    shifts, log_w = shift_distribution(q_b, M, check_int("degree", degree, low=0),
                                       overlap_removal=overlap_removal)
    return ShiftLaw.from_arrays(shifts / z, np.exp(log_w - log_w.max()) /
                                np.exp(log_w - log_w.max()).sum())


def dpgnn_law(*, num_train: int, max_degree: int, batch_size: int, noise_multiplier: float,
              sampling: str = "fixed") -> ShiftLaw:
    """DP-GNN step (spec 002 Theorem 1): ``i`` affected terms, shift ``i / ((K+1) λ)``."""
    from gnnprivacy.accounting.multiterm import affected_count_log_pmf

    lam = check_positive("noise_multiplier", noise_multiplier)
    i, log_p = affected_count_log_pmf(num_train=num_train, max_degree=max_degree,
                                      batch_size=batch_size, sampling=sampling)
    p = np.exp(log_p)
    return ShiftLaw.from_arrays(i / ((max_degree + 1) * lam), p / p.sum())


def dpsgd_law(*, sample_rate: float, noise_multiplier: float) -> ShiftLaw:
    """Poisson-subsampled Gaussian (add/remove): shift ``1/z`` with probability ``q``."""
    q = check_probability("sample_rate", sample_rate)
    z = check_positive("noise_multiplier", noise_multiplier)
    return ShiftLaw.from_arrays([0.0, 1.0 / z], [1.0 - q, q])


def gaussian_law(*, sensitivity: float, noise_std: float) -> ShiftLaw:
    """A Gaussian mechanism whose canary shift is always ``sensitivity``."""
    return ShiftLaw((float(sensitivity) / check_positive("noise_std", noise_std),), (1.0,))
