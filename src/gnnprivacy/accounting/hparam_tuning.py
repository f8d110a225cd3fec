"""Privacy cost of hyperparameter tuning with a random number of trials (Papernot & Steinke).

Reference: N. Papernot and T. Steinke, *Hyperparameter Tuning with Renyi Differential
Privacy*, ICLR 2022. A base algorithm ``Q`` (one training run with randomly drawn
hyperparameters that also releases a score of its model) is run ``K`` times with ``K``
random; only the best run (highest score) is released. If ``K`` is fixed, the cost grows
linearly in ``K``; if ``K`` is drawn from one of the distributions below, it grows only by
a small additive term:

* truncated negative binomial ``D_{eta,gamma}`` (Theorem 2), ``eta > -1``, ``0 < gamma < 1``,
  support ``{1, 2, ...}``:

  ```
  P[K = k] = (1-gamma)^k / (gamma^-eta - 1) * prod_{l=0}^{k-1} (l + eta) / (l + 1)
  ```

  (``eta = 0``: the logarithmic distribution ``P[K=k] = (1-gamma)^k / (k log(1/gamma))``;
  ``eta = 1``: the geometric distribution). If ``Q`` is ``(lam, eps(lam))``-RDP at every
  order, the released best run is ``(lam, eps'(lam))``-RDP with:

  ```
  eps'(lam) = eps(lam) + (1+eta) (1 - 1/lam_hat) eps(lam_hat)
              + (1+eta) log(1/gamma) / lam_hat + log E[K] / (lam - 1)
  ```

  for every ``lam_hat >= 1`` (we minimise over the orders given), and:

  ```
  E[K] = eta (1-gamma) / (gamma (1 - gamma^eta))    (eta != 0)
  E[K] = (1/gamma - 1) / log(1/gamma)               (eta == 0)
  ```

* Poisson ``K ~ Poisson(mu)`` (Theorem 6; ``K = 0`` releases nothing): if ``Q`` is
  ``(lam, eps(lam))``-RDP and ``(eps_hat, delta_hat)``-DP with
  ``exp(eps_hat) <= 1 + 1/(lam - 1)``:

  ```
  eps'(lam) = eps(lam) + mu * delta_hat + log(mu) / (lam - 1)
  ```

  where we take ``eps_hat = log(1 + 1/(lam-1))`` and ``delta_hat`` the smallest delta of
  ``Q`` at that epsilon from its RDP curve.

The RDP curve of the tuned algorithm is converted to ``(epsilon, delta)`` with the same
conversion as the library's RDP accountant.

Privacy:
    Whatever unit and relation ``Q``'s curve is stated for; the bound covers the released
    best run (its model and its score), provided each trial's hyperparameters are drawn
    independently of the data (e.g. uniformly from a fixed grid) and the score is itself a
    DP release inside ``Q``. Pure numpy/scipy (and dp_accounting's RDP conversion); no torch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from gnnprivacy._validation import check_positive, check_real
from gnnprivacy.errors import InvalidParameterError

__all__ = ["TrialDistribution", "TruncatedNegativeBinomial", "PoissonTrials", "tuned_rdp",
           "tuned_epsilon", "trials_distribution"]


@dataclass(frozen=True)
class TrialDistribution:
    """Base class of the random number of trials."""

    def mean(self) -> float:  # pragma: no cover - abstract
        raise NotImplementedError

    def pmf(self, k) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def sample(self, rng: np.random.Generator) -> int:  # pragma: no cover - abstract
        raise NotImplementedError

    def to_dict(self) -> dict:  # pragma: no cover - abstract
        raise NotImplementedError


@dataclass(frozen=True)
class TruncatedNegativeBinomial(TrialDistribution):
    """``D_{eta,gamma}`` of Papernot & Steinke §2 (support ``k >= 1``).

    Args:
        eta: shape, ``> -1`` (0: logarithmic, 1: geometric).
        gamma: success probability in ``(0, 1)``; smaller ``gamma`` = more trials.
    """

    eta: float
    gamma: float

    def __post_init__(self):
        check_real("eta", self.eta, low=-1.0, low_open=True)
        if math.isinf(self.eta):
            raise InvalidParameterError("eta", "a finite real > -1", self.eta)
        check_real("gamma", self.gamma, low=0.0, high=1.0, low_open=True, high_open=True)

    @classmethod
    def with_mean(cls, mean: float, eta: float = 1.0) -> TruncatedNegativeBinomial:
        """The distribution with shape ``eta`` whose expected number of trials is ``mean``."""
        check_real("mean", mean, low=1.0, low_open=True)
        from scipy.optimize import brentq

        def gap(log_gamma: float) -> float:
            return cls(eta, math.exp(log_gamma)).mean() - mean

        lo, hi = math.log(1e-12), math.log(1 - 1e-12)
        return cls(eta, math.exp(brentq(gap, lo, hi, xtol=1e-14, rtol=1e-12)))

    def mean(self) -> float:
        """``E[K]`` (Papernot & Steinke, §2)."""
        g, e = self.gamma, self.eta
        if e == 0:
            return (1.0 / g - 1.0) / math.log(1.0 / g)
        return e * (1.0 - g) / (g * (1.0 - g ** e))

    def log_pmf(self, k) -> np.ndarray:
        """``log P[K = k]`` for integer ``k`` (``-inf`` for ``k < 1``)."""
        from scipy.special import gammaln

        k = np.atleast_1d(np.asarray(k, dtype=float))
        g, e = self.gamma, self.eta
        out = np.full(k.shape, -np.inf)
        ok = k >= 1
        kk = k[ok]
        if e == 0:
            out[ok] = kk * math.log1p(-g) - np.log(kk) - math.log(math.log(1.0 / g))
        else:
            # prod_{l<k} (l+eta)/(l+1) = Gamma(k+eta) / (Gamma(eta) Gamma(k+1)); the sign of
            # Gamma(eta) and of (gamma^-eta - 1) agree for eta in (-1, 0), so the ratio is > 0
            # (scipy's gammaln is log|Gamma|).
            log_norm = math.log(abs(g ** (-e) - 1.0))
            out[ok] = (kk * math.log1p(-g) + gammaln(kk + e) - gammaln(kk + 1) - gammaln(e)
                       - log_norm)
        return out

    def pmf(self, k) -> np.ndarray:
        """``P[K = k]``."""
        return np.exp(self.log_pmf(k))

    def sample(self, rng: np.random.Generator) -> int:
        """Draw ``K`` (inverse CDF on the pmf; exact up to float rounding)."""
        u = rng.random()
        k, acc = 0, 0.0
        while True:
            k += 1
            acc += float(self.pmf(k)[0])
            if u <= acc or k > 10_000_000:
                return k

    def to_dict(self) -> dict:
        return {"distribution": "truncated_negative_binomial", "eta": self.eta,
                "gamma": self.gamma, "expected_trials": self.mean()}


@dataclass(frozen=True)
class PoissonTrials(TrialDistribution):
    """``K ~ Poisson(mu)`` (Papernot & Steinke Theorem 6; ``K = 0`` releases nothing)."""

    mu: float

    def __post_init__(self):
        check_positive("mu", self.mu)

    def mean(self) -> float:
        return float(self.mu)

    def pmf(self, k) -> np.ndarray:
        from scipy.stats import poisson

        return poisson.pmf(np.atleast_1d(k), self.mu)

    def sample(self, rng: np.random.Generator) -> int:
        return int(rng.poisson(self.mu))

    def to_dict(self) -> dict:
        return {"distribution": "poisson", "mu": self.mu, "expected_trials": self.mu}


def trials_distribution(kind: str, *, mean: float, eta: float = 1.0) -> TrialDistribution:
    """``"negative_binomial"`` (shape ``eta``, fitted to ``mean``) or ``"poisson"`` (``mu = mean``)."""
    if kind in ("negative_binomial", "tnb", "truncated_negative_binomial"):
        return TruncatedNegativeBinomial.with_mean(mean, eta)
    if kind == "poisson":
        return PoissonTrials(mean)
    raise InvalidParameterError("distribution", "negative_binomial | poisson", kind)


def tuned_rdp(orders, rdp, distribution: TrialDistribution) -> np.ndarray:
    """RDP curve (same orders) of releasing the best of ``K ~ distribution`` runs of ``Q``.

    Args:
        orders: Renyi orders ``> 1`` (array).
        rdp: ``Q``'s RDP at those orders.
        distribution: `TruncatedNegativeBinomial` or `PoissonTrials`.

    Returns:
        ``eps'(lam)`` per order (Theorem 2, minimised over ``lam_hat`` in ``orders``, or
        Theorem 6). Orders where the bound does not apply give ``inf``.
    """
    orders = np.asarray(orders, dtype=float)
    rdp = np.asarray(rdp, dtype=float)
    if orders.shape != rdp.shape or orders.ndim != 1 or not np.all(orders > 1):
        raise InvalidParameterError("orders", "a 1-d array of orders > 1 matching rdp", orders)
    if isinstance(distribution, TruncatedNegativeBinomial):
        e, g = distribution.eta, distribution.gamma
        extra = np.min((1 + e) * (1 - 1 / orders) * rdp + (1 + e) * math.log(1 / g) / orders)
        return rdp + extra + math.log(distribution.mean()) / (orders - 1)
    if isinstance(distribution, PoissonTrials):
        from gnnprivacy.accounting.rdp_builders import rdp_to_delta

        mu = distribution.mu
        out = np.empty_like(orders)
        for i, lam in enumerate(orders):
            delta_hat, _ = rdp_to_delta(orders, rdp, math.log1p(1 / (lam - 1)))
            out[i] = rdp[i] + mu * delta_hat + math.log(mu) / (lam - 1)
        return out
    raise InvalidParameterError("distribution", "a TrialDistribution", type(distribution).__name__)


def tuned_epsilon(orders, rdp, distribution: TrialDistribution, delta: float) -> float:
    """``epsilon`` at ``delta`` of the tuned algorithm (RDP-to-DP conversion of Balle et al.)."""
    from gnnprivacy.accounting.rdp_builders import rdp_to_epsilon

    curve = tuned_rdp(orders, rdp, distribution)
    return rdp_to_epsilon(np.asarray(orders, float), curve, delta)[0]
