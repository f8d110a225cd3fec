"""GRID's ConstraintCheck (Algorithm 3; spec 003 §4.8), batched over rows.

Both versions map a noise proposal ``s`` for clean probability vectors ``v`` (rows) to a noise
that should satisfy: ``sum(s) = 0`` and ``0 <= v + s <= 1`` (a distribution), ``|s|_1 <= theta``
and ``argmax(v + s) = argmax(v)`` (first index on ties).

* ``mode="paper"``: the literal algorithm (centre, clip, scale, then close top-1 violations to
  an exact tie). Clipping after centring can break ``sum(s) = 0`` and the exact tie flips the
  first-index argmax whenever the competing class comes first (spec §9 A8, A9).
* ``mode="robust"`` (library default, the spec's ``projection="simplex"``): exact Euclidean
  projection of ``v + s`` on the simplex, the same L1 scaling, a top-1 fix that keeps a margin
  ``m_a = min(tau, v_C - v_a)``, a validity check of the released float vector, and, for the
  rare invalid rows, bisection along ``c * s`` for the largest valid ``c`` in [0, 1]
  (``c = 0`` is always valid, so the utility guarantee is unconditional).
"""

from __future__ import annotations

import numpy as np

__all__ = ["MODES", "constraint_check", "project_simplex", "valid_rows"]

MODES = ("robust", "paper")
SUM_TOL = 1e-9


def project_simplex(y: np.ndarray) -> np.ndarray:
    """Euclidean projection of every row of ``y`` on the probability simplex (Duchi et al. 2008)."""
    y = np.asarray(y, dtype=np.float64)
    a = y.shape[-1]
    u = -np.sort(-y, axis=-1)
    css = np.cumsum(u, axis=-1) - 1.0
    ind = np.arange(1, a + 1, dtype=np.float64)
    cond = u - css / ind > 0
    rho = a - 1 - np.argmax(cond[..., ::-1], axis=-1)  # last index where cond holds
    tau = np.take_along_axis(css, rho[..., None], axis=-1) / (rho[..., None] + 1.0)
    return np.maximum(y - tau, 0.0)


def valid_rows(s: np.ndarray, v: np.ndarray, theta: float, top: np.ndarray) -> np.ndarray:
    """Which rows of ``s`` satisfy every utility constraint on the released ``v + s``."""
    r = v + s
    ok = np.abs(r.sum(-1) - v.sum(-1)) <= SUM_TOL
    ok &= (r >= 0).all(-1) & (r <= 1).all(-1)
    ok &= np.abs(s).sum(-1) <= theta + 1e-9
    ok &= r.argmax(-1) == top
    return ok


def _backtrack(s: np.ndarray, v: np.ndarray, theta: float, top: np.ndarray, steps: int = 60):
    """Largest ``c`` in [0, 1] (bisection) with ``c * s`` valid, per row; returns (c*s, c)."""
    lo = np.zeros(s.shape[0])
    hi = np.ones(s.shape[0])
    for _ in range(steps):
        mid = (lo + hi) / 2
        ok = valid_rows(mid[:, None] * s, v, theta, top)
        lo = np.where(ok, mid, lo)
        hi = np.where(ok, hi, mid)
    return lo[:, None] * s, lo


def _scale_l1(s: np.ndarray, theta: float) -> np.ndarray:
    l1 = np.abs(s).sum(-1, keepdims=True)
    return np.where(l1 > theta, s * (theta / np.where(l1 > 0, l1, 1.0)), s)


def constraint_check(s, v, theta: float, *, mode: str = "robust", tau: float = 1e-6,
                     top: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Apply ConstraintCheck to every row.

    Args:
        s: noise proposals ``(m, A)``.
        v: clean probability vectors ``(m, A)`` (float64, rows summing to 1).
        theta: L1 budget.
        mode: ``"robust"`` (default) or ``"paper"``.
        tau: top-1 margin of the robust mode.
        top: ``argmax(v)`` per row (computed when omitted).

    Returns:
        ``(s, backtracked, c)``: the corrected noise, a bool mask of rows that needed the
        bisection (always False in paper mode) and the scale ``c`` applied to them (1 else).
    """
    s = np.array(s, dtype=np.float64, copy=True)
    v = np.asarray(v, dtype=np.float64)
    if s.ndim == 1:
        out, bt, c = constraint_check(s[None], v[None], theta, mode=mode, tau=tau,
                                      top=None if top is None else np.atleast_1d(top))
        return out[0], bt, c
    m, a = s.shape
    top = v.argmax(-1) if top is None else np.asarray(top)
    rows = np.arange(m)
    if mode == "paper":
        s = s - s.mean(-1, keepdims=True)
        s = np.minimum(np.maximum(s, -v), 1.0 - v)
    elif mode == "robust":
        s = project_simplex(v + s) - v
    else:
        raise ValueError(f"unknown ConstraintCheck mode {mode!r}; choices: {MODES}")
    s = _scale_l1(s, theta)
    v_top = v[rows, top]
    for k in range(a):
        other = top != k
        margin = np.zeros(m) if mode == "paper" else np.minimum(tau, v_top - v[:, k])
        gap = (v_top + s[rows, top]) - (v[:, k] + s[:, k])
        need = other & (gap < margin)
        h = np.where(need, ((v[:, k] + s[:, k]) - (v_top + s[rows, top]) + margin) / 2, 0.0)
        s[:, k] -= h
        s[rows, top] += h
    backtracked = np.zeros(m, dtype=bool)
    c = np.ones(m)
    if mode == "robust":
        bad = ~valid_rows(s, v, theta, top)
        if bad.any():
            s[bad], c[bad] = _backtrack(s[bad], v[bad], theta, top[bad])
            backtracked = bad
    return s, backtracked, c
