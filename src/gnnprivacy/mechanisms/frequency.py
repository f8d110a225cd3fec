"""Unbiased frequency estimation for GRR and GRR-FS reports (server side, post-processing).

GRR (spec 004 §3.1, §4.2; Wang et al., USENIX Security 2017). With ``P = (p - q) I + q 11^T``
the GRR transition matrix and ``lambda`` the observed report distribution,
``E[lambda] = P pi`` and ``P^-1 = (I - q 11^T) / (p - q)``, so

    pi_hat = (lambda - q * sum(lambda)) / (p - q)

is unbiased for the true distribution ``pi``.

GRR-FS (spec 004 §4.1, paper eq. 5 and Theorem 2). ``E[lambda_j] = (m/d)(p pi_j + q (1 - pi_j))
+ (1 - m/d) / gamma``, so

    pi_hat_j = d lambda_j / (m (p - q)) + (m - d - m gamma q) / (m gamma (p - q)),

the same affine map for every value ``j``. Both maps are applied row-wise to the last dimension
and are linear in the counts once the intercept is scaled by the row total ``s = sum(lambda)``,
so they also serve propagated (weighted, unnormalised) counts with ``normalize=False``.
Both are strictly increasing with a common slope, so ``argmax pi_hat = argmax lambda``
(spec 004 §4.3). Estimates can be negative; clipping is the caller's decision.
"""

from __future__ import annotations

import torch
from torch import Tensor

from gnnprivacy._validation import check_int, check_positive
from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.mechanisms.base import check_flag
from gnnprivacy.mechanisms.randomized_response import grr_probabilities


def _observed(counts: object, k: int, normalize: bool) -> tuple[Tensor, Tensor]:
    """``(lambda, row_total)`` in float64 from non-negative counts with last dimension ``k``."""
    if not isinstance(counts, Tensor) or counts.dim() == 0 or counts.size(-1) != k:
        raise InvalidParameterError("counts", f"a tensor whose last dimension has size {k}",
                                    tuple(counts.shape) if isinstance(counts, Tensor) else type(counts))
    lam = counts.to(torch.float64)
    if not torch.isfinite(lam).all() or (lam < 0).any():
        raise InvalidParameterError("counts", "finite non-negative counts", "negative or non-finite entries")
    total = lam.sum(dim=-1, keepdim=True)
    if check_flag("normalize", normalize):
        if (total == 0).any():
            raise InvalidParameterError("counts", "at least one report per row", "a row of zeros")
        return lam / total, torch.ones_like(total)
    return lam, total


def grr_frequencies(counts: Tensor, *, epsilon: float, num_categories: int,
                    normalize: bool = True) -> Tensor:
    """Unbiased category frequencies from GRR report counts: ``(lambda - q s) / (p - q)``.

    Args:
        counts: ``(..., k)`` non-negative report counts (or weights).
        epsilon: the GRR budget used by the reporters.
        num_categories: ``k``.
        normalize: divide each row by its total first (estimate proportions); ``False``
            applies the linear map ``P^-1`` to the raw row.

    Returns:
        float64 ``(..., k)`` estimates (rows sum to 1, resp. to the row total).
    """
    p, q = grr_probabilities(epsilon, num_categories)
    lam, total = _observed(counts, num_categories, normalize)
    return (lam - q * total) / (p - q)


def grr_fs_frequencies(counts: Tensor, *, feature_epsilon: float, m: int, num_features: int,
                       domain_size: int = 2, normalize: bool = True) -> Tensor:
    """Unbiased value frequencies of one GRR-FS feature (spec 004 eq. 5).

    Args:
        counts: ``(..., gamma)`` non-negative counts of the reported values of one feature.
        feature_epsilon: the per-feature budget ``eps_x`` (``epsilon / m``).
        m: features sampled per user.
        num_features: ``d``, features reported per user (after grouping).
        domain_size: ``gamma >= 2`` of this feature.
        normalize: see `grr_frequencies`.

    Returns:
        float64 ``(..., gamma)`` estimates.
    """
    d = check_int("num_features", num_features, low=1)
    m = check_int("m", m, low=1, high=d)
    gamma = check_int("domain_size", domain_size, low=2)
    p, q = grr_probabilities(check_positive("feature_epsilon", feature_epsilon), gamma)
    lam, total = _observed(counts, gamma, normalize)
    slope = d / (m * (p - q))
    intercept = (m - d - m * gamma * q) / (m * gamma * (p - q))
    return slope * lam + intercept * total


__all__ = ["grr_frequencies", "grr_fs_frequencies"]
