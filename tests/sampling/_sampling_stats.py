"""Statistical helpers for the sampler tests: tolerances derived from the sample size."""

from __future__ import annotations

import numpy as np
from scipy import stats

#: family-wise false-alarm rate of every statistical test in this directory
ALPHA = 1e-3


def z_bonferroni(num_tests: int, alpha: float = ALPHA) -> float:
    """Two-sided normal quantile with a Bonferroni correction over ``num_tests`` checks."""
    return float(stats.norm.isf(alpha / (2 * num_tests)))


def freq_tolerance(p: float, n: int, num_tests: int = 1, alpha: float = ALPHA) -> float:
    """Half-width for an empirical frequency of a Bernoulli(p) over ``n`` independent trials."""
    return z_bonferroni(num_tests, alpha) * np.sqrt(max(p * (1 - p), 1e-12) / n)


def mean_tolerance(sd: float, n: int, num_tests: int = 1, alpha: float = ALPHA) -> float:
    """Half-width for a sample mean of ``n`` i.i.d. draws with standard deviation ``sd``."""
    return z_bonferroni(num_tests, alpha) * max(sd, 1e-12) / np.sqrt(n)


def chisquare_pvalue(samples: np.ndarray, probs: np.ndarray) -> float:
    """Goodness-of-fit p-value of integer ``samples`` in ``0..len(probs)-1`` against ``probs``.

    Adjacent categories are pooled left to right until every expected count is >= 5;
    a sample outside the support gives p = 0.
    """
    samples = np.asarray(samples)
    probs = np.asarray(probs, dtype=float)
    if samples.min() < 0 or samples.max() >= len(probs) or np.any(probs[np.unique(samples)] == 0):
        return 0.0
    n = len(samples)
    observed = np.bincount(samples, minlength=len(probs)).astype(float)
    expected = probs * n
    obs_bins, exp_bins, o_acc, e_acc = [], [], 0.0, 0.0
    for o, e in zip(observed, expected):
        o_acc, e_acc = o_acc + o, e_acc + e
        if e_acc >= 5:
            obs_bins.append(o_acc)
            exp_bins.append(e_acc)
            o_acc = e_acc = 0.0
    if e_acc > 0 or o_acc > 0:
        if not exp_bins:
            return 1.0
        obs_bins[-1] += o_acc
        exp_bins[-1] += e_acc
    if len(exp_bins) < 2:
        return 1.0
    exp_arr = np.array(exp_bins)
    return float(stats.chisquare(np.array(obs_bins), exp_arr * (sum(obs_bins) / exp_arr.sum())).pvalue)
