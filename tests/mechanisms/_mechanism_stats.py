"""Statistical helpers shared by the mechanism tests (goodness of fit, exact ratios)."""

from __future__ import annotations

import itertools

import numpy as np
import torch
from scipy import stats

#: significance level of every goodness-of-fit test (the seeds are fixed, so the outcome is
#: deterministic; alpha sets how strong a deviation must be to count as caught).
ALPHA = 1e-3


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def seed_os_bytes(monkeypatch, seed: int) -> list[int]:
    """Replace the OS CSPRNG used by secure mode with a seeded byte stream (reproducible
    statistics); returns the list of requested byte counts."""
    from gnnprivacy.mechanisms import _random

    rng = np.random.default_rng(seed)
    calls: list[int] = []

    def fake(n: int) -> bytes:
        calls.append(n)
        return rng.bytes(n)

    monkeypatch.setattr(_random, "_os_random_bytes", fake)
    return calls


def chi_square_pvalue(observed, expected_probs) -> float:
    """Chi-square goodness-of-fit p-value of category counts against probabilities.

    Categories with expected count < 5 are merged into one bin.
    """
    observed = np.asarray(observed, dtype=float).ravel()
    probs = np.asarray(expected_probs, dtype=float).ravel()
    assert abs(probs.sum() - 1.0) < 1e-9, probs.sum()
    expected = probs * observed.sum()
    small = expected < 5
    if small.any():
        observed = np.append(observed[~small], observed[small].sum())
        expected = np.append(expected[~small], expected[small].sum())
        if expected[-1] == 0:
            observed, expected = observed[:-1], expected[:-1]
    return float(stats.chisquare(observed, expected).pvalue)


def ks_pvalue(samples, cdf) -> float:
    """One-sample Kolmogorov-Smirnov p-value against a continuous CDF."""
    return float(stats.kstest(np.asarray(samples, dtype=float).ravel(), cdf).pvalue)


def bit_vectors(d: int) -> torch.Tensor:
    """All ``2^d`` binary vectors as an int64 ``(2^d, d)`` tensor."""
    return torch.tensor(list(itertools.product([0, 1], repeat=d)), dtype=torch.int64)


def max_ratio(prob: torch.Tensor, neighbours: torch.Tensor | None = None) -> float:
    """Worst-case ``P[o | x] / P[o | x']`` over outputs ``o`` and input pairs.

    Args:
        prob: ``(num_inputs, num_outputs)`` exact output probabilities.
        neighbours: optional boolean ``(num_inputs, num_inputs)`` mask of the pairs that count
            (default: every pair, the LDP notion).
    """
    p = prob.to(torch.float64)
    ratio = p[:, None, :] / p[None, :, :]
    ratio = torch.nan_to_num(ratio, nan=1.0, posinf=float("inf"))  # 0/0 -> 1 (never observed)
    if neighbours is not None:
        ratio = torch.where(neighbours[:, :, None], ratio, 0.0)
    return float(ratio.max())
