"""The per-step mixture of Gaussians of HeterPoisson node-level DP-SGD (000, Theorem 2).

All shifts are in units of the clip norm R (R = 1/2 in the paper, so the paper's shift
1/2 is 1 here and its shift k is 2k here); the noise std is the noise multiplier
sigma / R. See `HeterPoissonDpEvent` for the math.
"""

from __future__ import annotations

import functools

import numpy as np
from scipy.special import gammaln, logsumexp

#: Per-step probability mass of the largest shifts that the PLD accountant may drop;
#: it is charged to delta (and to epsilon via -log(1 - mass)), see ``pld_builders``.
DEFAULT_TAIL_MASS = 1e-30
#: above this out-degree the PLD's shift law is built only for k peripheral uses up to a
#: Chernoff bound (the binomial's mean is at most q_b M whatever D), and the bound on the
#: mass beyond is charged as dropped: memory no longer grows with D (issue 24: ``account
#: heterpoisson --num-nodes 1000000000`` was killed for memory). The RDP accountant, which
#: needs the exact law, refuses such degrees.
EXACT_DEGREE_LIMIT = 1_000_000


def covering_degrees(max_degree: int) -> tuple[int, ...]:
    """The out-degrees evaluated for a worst case over D in [0, max_degree] (000 §4.2 step 6).

    ``{0, 1, 2, 4, ..., 2^j < max_degree} ∪ {max_degree}``. Intermediate degrees are
    covered because epsilon is non-decreasing in D (asserted by the test-suite).
    """
    degrees = {0, int(max_degree)}
    power = 1
    while power < max_degree:
        degrees.add(power)
        power *= 2
    return tuple(sorted(degrees))


def peripheral_probability(q_b: float, multiplier: float, degree: int) -> float:
    """p = q_b * min(1, M / D): probability that one out-neighbour is central and picks z."""
    if degree == 0:
        return 0.0
    return q_b * min(1.0, multiplier / degree)


def log_binomial_pmf(degree: int, p: float, upto: int | None = None) -> np.ndarray:
    """ln Bin(k; D, p) for k = 0..D (or 0..``upto``), computed with gammaln (never
    factorials)."""
    k = np.arange((degree if upto is None else min(int(upto), degree)) + 1, dtype=float)
    if upto is not None and p not in (0.0, 1.0):
        return (gammaln(degree + 1.0) - gammaln(k + 1.0) - gammaln(degree - k + 1.0)
                + k * np.log(p) + (degree - k) * np.log1p(-p))
    if p == 0.0:
        out = np.full(degree + 1, -np.inf)
        out[0] = 0.0
        return out
    if p == 1.0:
        out = np.full(degree + 1, -np.inf)
        out[-1] = 0.0
        return out
    log_comb = gammaln(degree + 1.0) - gammaln(k + 1.0) - gammaln(degree - k + 1.0)
    return log_comb + k * np.log(p) + (degree - k) * np.log1p(-p)


def binomial_tail_cut(degree: int, p: float, mass: float) -> tuple[int, float]:
    """``(K, bound)``: ``P[Bin(D, p) > K] <= bound <= mass`` by the Chernoff bound
    ``P[X >= k] <= (e mu / k)^k`` (``mu = D p < k``); ``K = D`` (bound 0) if none is
    smaller."""
    mu = degree * p
    log_mass = np.log(mass)
    k = max(int(np.ceil(np.e * mu)) + 1, 1)
    while k <= degree:
        log_bound = k * (1.0 + np.log(mu) - np.log(k)) if mu > 0 else -np.inf
        if log_bound <= log_mass:
            return k - 1, float(np.exp(log_bound))
        k += 1
    return degree, 0.0


def shift_distribution(q_b: float, multiplier: float, degree: int,
                       overlap_removal: bool = True, *, cut_mass: float | None = None
                       ) -> tuple[np.ndarray, np.ndarray]:
    """Support and log-weights of the Theorem-2 mixture for out-degree ``degree``.

    Args:
        cut_mass: if given, only ``k <= K`` peripheral uses are listed, with ``K`` from
            `binomial_tail_cut` (the caller must charge the mass beyond; see
            `truncated_shift_distribution`).

    Returns:
        ``(shifts, log_weights)``, shifts sorted ascending in units of R; zero-weight
        components are dropped (never by size: without ``cut_mass`` the tail is exact).
    """
    p = peripheral_probability(q_b, multiplier, degree)
    upto = None if cut_mass is None else binomial_tail_cut(degree, p, cut_mass)[0]
    log_bin = log_binomial_pmf(degree, p, upto)
    k = np.arange(len(log_bin), dtype=float)
    log_q = np.log(q_b) if q_b > 0 else -np.inf
    log_1mq = np.log1p(-q_b) if q_b < 1 else -np.inf
    if overlap_removal:
        shifts = np.concatenate([[1.0], 2.0 * k])
        log_w = np.concatenate([[log_q], log_1mq + log_bin])
    else:
        shifts = np.concatenate([2.0 * k + 1.0, 2.0 * k])
        log_w = np.concatenate([log_q + log_bin, log_1mq + log_bin])
    keep = np.isfinite(log_w)
    shifts, log_w = shifts[keep], log_w[keep]
    order = np.argsort(shifts, kind="stable")
    return shifts[order], log_w[order]


def truncate_upper_tail(shifts: np.ndarray, log_weights: np.ndarray,
                        tail_mass: float) -> tuple[np.ndarray, np.ndarray, float]:
    """Drop the largest shifts whose total probability is at most ``tail_mass``.

    Returns:
        ``(shifts, weights, dropped)``: the kept shifts, their weights renormalised to sum
        to one, and the dropped probability mass (to be charged by the caller).
    """
    log_weights = log_weights - logsumexp(log_weights)
    weights = np.exp(log_weights)
    upper = np.cumsum(weights[::-1])[::-1]          # upper[i] = P(shift >= shifts[i])
    keep = upper > tail_mass
    keep[0] = True
    dropped = float(np.exp(logsumexp(log_weights[~keep]))) if not keep.all() else 0.0
    kept = weights[keep]
    return shifts[keep], kept / kept.sum(), dropped


@functools.lru_cache(maxsize=128)
def truncated_shift_distribution(q_b: float, multiplier: float, degree: int,
                                 overlap_removal: bool, tail_mass: float
                                 ) -> tuple[np.ndarray, np.ndarray, float]:
    """`truncate_upper_tail` of `shift_distribution`, cached: the law does not
    depend on the noise, and a calibration evaluates the same degrees at many noise levels.
    The arrays are read-only."""
    cut = 0.0
    if degree > EXACT_DEGREE_LIMIT:             # the law up to K; the bound beyond is dropped
        cut = binomial_tail_cut(degree, peripheral_probability(q_b, multiplier, degree),
                                1e-6 * tail_mass)[1]
        shifts, log_w = shift_distribution(q_b, multiplier, degree, overlap_removal,
                                           cut_mass=1e-6 * tail_mass)
    else:
        shifts, log_w = shift_distribution(q_b, multiplier, degree, overlap_removal)
    shifts, weights, dropped = truncate_upper_tail(shifts, log_w, tail_mass)
    dropped += cut
    shifts.setflags(write=False)
    weights.setflags(write=False)
    return shifts, weights, dropped
