"""Renyi divergences between a mixture of Gaussians and a Gaussian (000 §4.2).

In standardised units (noise std 1, shifts mu_j = c_j / sigma, weights w_j):

    P = N(0, 1),   Q = sum_j w_j N(mu_j, 1),   L(u) = Q(u)/P(u) = sum_j w_j exp(mu_j u - mu_j^2/2)
    D_alpha(Q||P) = ln E_P[L^alpha] / (alpha - 1),
    D_alpha(P||Q) = ln E_P[L^(1-alpha)] / (alpha - 1).

Both are computed as *upper bounds* that are tight to numerical precision:

* ``Q||P``: the components whose own L^alpha(P)-norm ``exp(a_j)``,
  ``a_j = ln w_j + (alpha-1) mu_j^2/2``, is within ``HEAD_NATS`` of the largest form the
  head H and are integrated by the trapezoid rule in log-space on windows around their
  peaks ``alpha mu_j``; the rest is bounded by Minkowski's inequality,
  ``||L||_alpha <= ||L_H||_alpha + sum_{j not in H} exp(a_j)`` (000 §4.2 step 3; the
  binomial tail is never dropped by probability).
* ``P||Q``: ``L^(1-alpha)`` decreases in L, so integrating the heaviest components
  alone is an upper bound.

Where the quadrature grid would be too large (very large alpha with widely spread
shifts) the closed-form bounds are used instead: Minkowski over all components for
``Q||P`` and ``min_j (-ln w_j + alpha mu_j^2 / 2)`` for ``P||Q``. ``method="jensen"``
gives the looser closed form ``ln sum_j w_j exp(alpha (alpha-1) mu_j^2 / 2) / (alpha-1)``
(valid in both directions by convexity; 000 §4.2 step 4).
"""

from __future__ import annotations

import math

import numpy as np

HEAD_NATS = 40.0        #: components below the largest norm by more than this go to the tail
WINDOW_NATS = 40.0      #: log relative mass allowed outside the quadrature windows
MAX_STEP = 0.02         #: largest quadrature step (standardised units)
MAX_POINTS = 400_000    #: above this the closed-form bounds are used
MAX_HEAD = 400
#: Skip the quadrature when the closed-form Minkowski bound is already this tight
#: (relative to its own value); it happens beyond the "cliff" of 000 §4.7.
CLOSED_FORM_RTOL = 1e-5
_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


def mixture_rdp(orders, shifts, log_weights, noise_std: float,
                method: str = "numerical") -> np.ndarray:
    """``max(D_alpha(Q||P), D_alpha(P||Q))`` for every order alpha > 1.

    Args:
        orders: Renyi orders, each > 1.
        shifts: component shifts c_j >= 0 (same units as ``noise_std``).
        log_weights: natural logs of the component weights (normalised here).
        noise_std: the Gaussian noise standard deviation sigma > 0.
        method: ``"numerical"`` (tight) or ``"jensen"`` (closed-form upper bound).

    Returns:
        Array of per-order RDP values (upper bounds).
    """
    orders = np.asarray(orders, dtype=float)
    mu = np.asarray(shifts, dtype=float) / noise_std
    lw = np.asarray(log_weights, dtype=float)
    lw = lw - logsumexp(lw)
    positive = np.isfinite(lw) & (mu > 0)
    if positive.any() and np.unique(mu[positive]).size == 1 and not (
            np.isfinite(lw) & (mu == 0)).any():
        # one component: the Gaussian mechanism, exactly alpha mu^2 / 2 in both directions
        return orders * float(mu[positive][0]) ** 2 / 2.0
    if method == "jensen":
        quad = orders[:, None] * (orders[:, None] - 1.0) * mu[None, :] ** 2 / 2.0
        return np.maximum(_logsumexp_rows(lw[None, :] + quad) / (orders - 1.0), 0.0)
    out = np.maximum(_rdp_q_over_p(orders, mu, lw), _rdp_p_over_q(orders, mu, lw))
    return np.maximum(out, 0.0)


def _rdp_q_over_p(orders: np.ndarray, mu: np.ndarray, lw: np.ndarray) -> np.ndarray:
    out = np.empty(len(orders))
    chunk = max(1, 4_000_000 // max(len(mu), 1))
    for start in range(0, len(orders), chunk):
        alphas = orders[start:start + chunk]
        a = lw[None, :] + (alphas[:, None] - 1.0) * mu[None, :] ** 2 / 2.0
        amax = np.max(a, axis=1)
        minkowski = _logsumexp_rows(a)
        for row, alpha in enumerate(alphas):
            log_norm = minkowski[row]
            if log_norm - amax[row] > CLOSED_FORM_RTOL * abs(log_norm):
                log_norm = _head_log_norm(alpha, mu, lw, a[row], amax[row], log_norm)
            out[start + row] = alpha / (alpha - 1.0) * log_norm
    return out


def _head_log_norm(alpha, mu, lw, a, amax, minkowski) -> float:
    """ln ||L||_alpha bounded by quadrature on the head plus Minkowski on the tail."""
    head = a >= amax - HEAD_NATS
    if head.sum() > MAX_HEAD:
        head = a >= np.sort(a)[-MAX_HEAD]
    width = math.sqrt(2.0 * (WINDOW_NATS + (alpha + 1.0) * math.log(head.sum())))
    log_moment = _log_integral(alpha, mu[head], lw[head], alpha * mu[head], width)
    if log_moment is None:
        return minkowski
    return float(np.logaddexp(log_moment / alpha, logsumexp(a[~head])))


def _rdp_p_over_q(orders: np.ndarray, mu: np.ndarray, lw: np.ndarray) -> np.ndarray:
    head = lw >= np.max(lw) - HEAD_NATS
    if head.sum() > MAX_HEAD:
        head = lw >= np.sort(lw)[-MAX_HEAD]
    mu_h, lw_h = mu[head], lw[head]
    single = -lw_h[None, :] + orders[:, None] * mu_h[None, :] ** 2 / 2.0
    anchors = np.argmin(single, axis=1)
    bounds = single[np.arange(len(orders)), anchors]
    widths = np.sqrt(2.0 * (WINDOW_NATS + (orders - 1.0) * np.maximum(bounds, 0.0)))
    if np.all(mu_h[anchors] == 0.0):
        log_moments = _log_integrals_centered(1.0 - orders, mu_h, lw_h, float(widths.max()))
    else:
        log_moments = None
    out = np.empty(len(orders))
    for i, alpha in enumerate(orders):
        if log_moments is not None and log_moments[i] is not None:
            log_moment = log_moments[i]
        else:
            center = np.array([(1.0 - alpha) * mu_h[anchors[i]]])
            log_moment = _log_integral(1.0 - alpha, mu_h, lw_h, center, widths[i])
        out[i] = bounds[i] if log_moment is None else min(log_moment / (alpha - 1.0), bounds[i])
    return out


def _log_integrals_centered(powers: np.ndarray, mu: np.ndarray, lw: np.ndarray,
                            width: float):
    """``_log_integral`` for many powers on one common grid ``[-width, width]``."""
    step = _quadrature_step(float(np.max(np.abs(powers))), mu)
    n = int(math.ceil(2.0 * width / step)) + 1
    if n * max(len(powers), len(mu)) > 20 * MAX_POINTS:
        return [None] * len(powers)
    u = np.linspace(-width, width, n)
    log_l = _logsumexp_rows(lw[None, :] - mu[None, :] ** 2 / 2.0 + np.outer(u, mu))
    base = -u ** 2 / 2.0 - _LOG_SQRT_2PI
    log_h = math.log(u[1] - u[0])
    return [float(_logsumexp_rows((base + p * log_l)[None, :])[0]) + log_h for p in powers]


def _quadrature_step(power: float, mu: np.ndarray) -> float:
    """Trapezoid step: at most MAX_STEP, and 4 points per kink of ``power * ln L``."""
    gaps = np.diff(np.sort(mu))
    max_gap = float(gaps.max()) if gaps.size else 0.0
    return MAX_STEP if max_gap == 0.0 else min(MAX_STEP, 0.25 / (abs(power) * max_gap))


def _log_integral(power: float, mu: np.ndarray, lw: np.ndarray, centers: np.ndarray,
                  width: float):
    """ln of int phi(u) L(u)^power du over windows ``centers ± width`` (trapezoid, log-space).

    Returns ``None`` when the grid would exceed ``MAX_POINTS``.
    """
    step = _quadrature_step(power, mu)
    intervals = _merge_intervals(np.sort(centers) - width, np.sort(centers) + width)
    n_points = sum(int(math.ceil((hi - lo) / step)) + 1 for lo, hi in intervals)
    if n_points > MAX_POINTS:
        return None
    const = lw - mu ** 2 / 2.0
    parts = []
    for lo, hi in intervals:
        u = np.linspace(lo, hi, int(math.ceil((hi - lo) / step)) + 1)
        h = u[1] - u[0]
        for start in range(0, len(u), 20_000):
            chunk = u[start:start + 20_000]
            log_l = _logsumexp_rows(const[None, :] + np.outer(chunk, mu))
            f = -chunk ** 2 / 2.0 - _LOG_SQRT_2PI + power * log_l
            parts.append(_logsumexp_rows(f[None, :])[0] + math.log(h))
    return float(_logsumexp_rows(np.asarray(parts)[None, :])[0])


def logsumexp(x) -> float:
    """log(sum(exp(x))) of a 1-D array (``-inf`` for an empty or all ``-inf`` array)."""
    x = np.asarray(x, dtype=float)
    if x.size == 0:
        return -np.inf
    return float(_logsumexp_rows(x.reshape(1, -1))[0])


def _logsumexp_rows(x: np.ndarray) -> np.ndarray:
    """Row-wise log-sum-exp of a 2-D array of finite or -inf values (fast path)."""
    top = np.max(x, axis=1)
    safe = np.where(np.isfinite(top), top, 0.0)
    return np.log(np.sum(np.exp(x - safe[:, None]), axis=1)) + safe


def _merge_intervals(lows: np.ndarray, highs: np.ndarray) -> list[tuple[float, float]]:
    merged: list[list[float]] = []
    for lo, hi in zip(lows, highs):
        if merged and lo <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([float(lo), float(hi)])
    return [(lo, hi) for lo, hi in merged]
