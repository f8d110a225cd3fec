"""Multi-term amplification of DP-GNN (002 §4): a node affects up to K+1 gradient terms.

Conditioned on the number i of affected terms that land in the batch, one step is a
Gaussian mechanism with normalised shift ``i / ((K+1) lambda)`` (sensitivity 2 i C, noise
std ``lambda 2 (K+1) C``). The count i follows

* ``Hypergeometric(N, K+1, m)`` for a uniform batch of m out of N (Lemma 3), or
* ``Binomial(K+1, m/N)`` for Poisson sampling at rate m/N (002 §4.4 [EXT]),

and the per-step RDP is (Theorem 1, Lemma 4):

```
gamma(alpha) = ln( sum_i p_i exp(alpha (alpha-1) i^2 / (2 (K+1)^2 lambda^2)) ) / (alpha - 1).
```
"""

from __future__ import annotations

import numpy as np
from scipy.special import gammaln

from gnnprivacy.accounting.mixture_rdp import logsumexp


def _log_comb(n: float, k: np.ndarray) -> np.ndarray:
    return gammaln(n + 1.0) - gammaln(k + 1.0) - gammaln(n - k + 1.0)


def affected_count_log_pmf(*, num_train: int, max_degree: int, batch_size: int,
                           sampling: str = "fixed") -> tuple[np.ndarray, np.ndarray]:
    """Support ``i = 0..K+1`` and ln P[i affected terms in the batch].

    Args:
        num_train: N, number of training nodes.
        max_degree: K; each node affects at most K + 1 terms.
        batch_size: m (expected batch size for Poisson sampling).
        sampling: ``"fixed"`` (hypergeometric) or ``"poisson"`` (binomial).
    """
    terms = max_degree + 1
    i = np.arange(terms + 1, dtype=float)
    if sampling == "fixed":
        valid = (i >= max(0, batch_size - (num_train - terms))) & (i <= min(terms, batch_size))
        log_p = np.full(i.shape, -np.inf)
        iv = i[valid]
        log_p[valid] = (_log_comb(terms, iv) + _log_comb(num_train - terms, batch_size - iv)
                        - _log_comb(num_train, np.array(float(batch_size))))
    else:
        q = batch_size / num_train
        if q >= 1.0:
            log_p = np.where(i == terms, 0.0, -np.inf)
        else:
            log_p = _log_comb(terms, i) + i * np.log(q) + (terms - i) * np.log1p(-q)
    return i, log_p


def dpgnn_rdp(orders, *, num_train: int, max_degree: int, batch_size: int,
              noise_multiplier: float, sampling: str = "fixed") -> np.ndarray:
    """Per-step RDP gamma(alpha) of DP-GNN (002 Theorem 1), computed in log-space."""
    orders = np.asarray(orders, dtype=float)
    i, log_p = affected_count_log_pmf(num_train=num_train, max_degree=max_degree,
                                      batch_size=batch_size, sampling=sampling)
    scale = 2.0 * (max_degree + 1) ** 2 * noise_multiplier ** 2
    # normalised weights (the gammaln pmf sums to 1 only up to ~1e-13), and ln(1 + E[e^c - 1])
    # where the exponents are small: with large noise the RDP is ~1e-9 and logsumexp's
    # rounding made it negative (dp_accounting then returned epsilon 0; issue 22 item 6)
    log_p = log_p - logsumexp(log_p)
    p = np.exp(log_p)
    out = np.empty(len(orders))
    for k, alpha in enumerate(orders):
        c = alpha * (alpha - 1.0) * i ** 2 / scale
        if c.max() < 1.0:
            out[k] = np.log1p(np.sum(p * np.expm1(c))) / (alpha - 1.0)
        else:
            out[k] = logsumexp(log_p + c) / (alpha - 1.0)
    return out
