"""Turn one (flattened, private) event into an RDP curve, and RDP into (epsilon, delta).

Same sensitivity convention as `gnnprivacy.accounting.pld_builders` (an unsampled
Gaussian or Laplace event's multiplier is relative to the sensitivity under the
accountant's relation), so both accountants agree on what an event means.
dp_accounting's RDP formulas are used through its public ``RdpAccountant`` for
the sampled events; closed forms are written out here for:

* Gaussian, noise multiplier z: ``alpha / (2 z^2)``;
* Laplace, epsilon = 1/b (Mironov 2017, Prop. 6):
  ``ln(alpha/(2alpha-1) e^{(alpha-1) eps} + (alpha-1)/(2alpha-1) e^{-alpha eps}) / (alpha-1)``;
* any pure epsilon-DP mechanism (dominated by binary randomized response):
  ``ln((e^{alpha eps} + e^{(1-alpha) eps}) / (1 + e^eps)) / (alpha - 1)`` (<= eps);
* HeterPoisson: Theorem 2, ``max_D max(D_alpha(P||Q_D), D_alpha(Q_D||P))`` (000 §4.2);
* DP-GNN: 002 Theorem 1.
"""

from __future__ import annotations

import math
from typing import Optional

import numpy as np
from dp_accounting import dp_event
from dp_accounting.rdp import rdp_privacy_accountant as dp_rdp

from gnnprivacy.accounting.events import DpGnnDpEvent, EpsilonDeltaDpEvent, HeterPoissonDpEvent
from gnnprivacy.accounting.heterpoisson import EXACT_DEGREE_LIMIT, shift_distribution
from gnnprivacy.accounting.mixture_rdp import mixture_rdp
from gnnprivacy.accounting.multiterm import dpgnn_rdp
from gnnprivacy.accounting.pld_builders import DP_RELATION
from gnnprivacy.accounting.units import NeighboringRelation

CONVERSIONS = ("balle", "mironov")


def heterpoisson_paper_orders() -> np.ndarray:
    """The fine grid of 000 §4.2 step 5, for reproducing the paper-mode table of §4.7."""
    grids = [np.arange(1.02, 3.0001, 0.02), np.arange(3.05, 12.0001, 0.05),
             np.arange(12.25, 40.0001, 0.25), [48.0, 64.0, 100.0]]
    return np.unique(np.round(np.concatenate(grids), 10))


def default_orders() -> np.ndarray:
    """dp_accounting's default orders refined to steps of 0.05 on [3, 12] and 0.25 on [12, 40].

    (The 000 §4.2 grid below 3 makes dp_accounting's fractional-order series for sampled
    Gaussians slow and non-convergent; pass `heterpoisson_paper_orders` explicitly
    to reproduce the paper-mode table.)
    """
    grids = [dp_rdp.DEFAULT_RDP_ORDERS, np.arange(3.05, 12.0001, 0.05),
             np.arange(12.25, 40.0001, 0.25)]
    return np.unique(np.round(np.concatenate(grids), 10))


def rdp_support_error(event: dp_event.DpEvent, relation: NeighboringRelation,
                      orders: np.ndarray) -> Optional[str]:
    """``None`` if the RDP accountant can account ``event`` (a flattened leaf), else why not."""
    if isinstance(event, HeterPoissonDpEvent) and event.max_degree > EXACT_DEGREE_LIMIT:
        return (f"out-degree {event.max_degree} above {EXACT_DEGREE_LIMIT:,}: the RDP "
                "accountant needs the exact shift law (use the PLD accountant)")
    if isinstance(event, (dp_event.GaussianDpEvent, dp_event.LaplaceDpEvent,
                          HeterPoissonDpEvent, DpGnnDpEvent)):
        return None
    if isinstance(event, EpsilonDeltaDpEvent):
        return None if event.delta == 0 else "approximate (delta > 0) events have no RDP bound"
    if isinstance(event, dp_event.MixtureOfGaussiansDpEvent):
        if relation is NeighboringRelation.ADD_OR_REMOVE:
            return None
        return "MixtureOfGaussiansDpEvent needs relation ADD_OR_REMOVE"
    accountant = dp_rdp.RdpAccountant(orders=orders, neighboring_relation=DP_RELATION[relation])
    if accountant.supports(event):
        return None
    return f"{type(event).__name__} is not supported by the RDP accountant under {relation.value}"


def event_rdp(event: dp_event.DpEvent, *, relation: NeighboringRelation,
              orders: np.ndarray) -> np.ndarray:
    """Per-order RDP of one step of a supported, private leaf event."""
    orders = np.asarray(orders, dtype=float)
    if isinstance(event, dp_event.GaussianDpEvent):
        return orders / (2.0 * event.noise_multiplier ** 2)
    if isinstance(event, dp_event.LaplaceDpEvent):
        return laplace_rdp(orders, 1.0 / event.noise_multiplier)
    if isinstance(event, EpsilonDeltaDpEvent):
        return pure_dp_rdp(orders, event.epsilon)
    if isinstance(event, HeterPoissonDpEvent):
        curves = [mixture_rdp(orders, *shift_distribution(
            event.sampling_probability, event.neighbor_multiplier, d, event.overlap_removal),
            event.noise_multiplier) for d in event.degrees]
        return np.max(np.vstack(curves), axis=0)
    if isinstance(event, DpGnnDpEvent):
        return dpgnn_rdp(orders, num_train=event.num_train, max_degree=event.max_degree,
                         batch_size=event.batch_size, noise_multiplier=event.noise_multiplier,
                         sampling=event.sampling)
    if isinstance(event, dp_event.MixtureOfGaussiansDpEvent):
        probs = np.asarray(event.sampling_probs, dtype=float)
        shifts = np.asarray(event.sensitivities, dtype=float)[probs > 0]
        return mixture_rdp(orders, shifts, np.log(probs[probs > 0]), event.standard_deviation)
    accountant = dp_rdp.RdpAccountant(orders=orders, neighboring_relation=DP_RELATION[relation])
    return accountant.compose(event).rdp


def laplace_rdp(orders: np.ndarray, epsilon: float) -> np.ndarray:
    """RDP of the Laplace mechanism with ``epsilon = sensitivity / scale``."""
    out = np.empty(len(orders))
    for k, alpha in enumerate(orders):
        a = math.log(alpha / (2 * alpha - 1)) + (alpha - 1) * epsilon
        b = math.log((alpha - 1) / (2 * alpha - 1)) - alpha * epsilon
        out[k] = min(np.logaddexp(a, b) / (alpha - 1), epsilon)
    return out


def pure_dp_rdp(orders: np.ndarray, epsilon: float) -> np.ndarray:
    """Tight RDP of an epsilon-DP mechanism (that of binary randomized response)."""
    orders = np.asarray(orders, dtype=float)
    log_num = np.logaddexp(orders * epsilon, (1.0 - orders) * epsilon)
    rdp = (log_num - np.logaddexp(0.0, epsilon)) / (orders - 1.0)
    return np.clip(rdp, 0.0, epsilon)


def rdp_to_epsilon(orders, rdp, delta: float, conversion: str = "balle") -> tuple[float, float]:
    """Smallest epsilon over orders, and the optimal order.

    ``"balle"``: Balle et al. 2020 / 000 Theorem 1,
    ``eps = rdp + ln((alpha-1)/alpha) - (ln delta + ln alpha)/(alpha-1)`` (dp_accounting's
    ``compute_epsilon``). ``"mironov"``: Mironov 2017 Prop. 3, ``eps = rdp + ln(1/delta)/(alpha-1)``
    (the conversion cited by 002).
    """
    orders = np.asarray(orders, dtype=float)
    rdp = np.asarray(rdp, dtype=float)
    if conversion == "balle":
        eps, order = dp_rdp.compute_epsilon(orders, rdp, delta)
        return float(eps), float(order)
    if delta == 0:
        return (0.0, 0.0) if np.all(rdp == 0) else (math.inf, 0.0)
    eps = rdp + math.log(1.0 / delta) / (orders - 1.0)
    best = int(np.argmin(eps))
    return float(max(eps[best], 0.0)), float(orders[best])


def rdp_to_delta(orders, rdp, epsilon: float, conversion: str = "balle") -> tuple[float, float]:
    """Smallest delta over orders for a target epsilon, and the optimal order."""
    orders = np.asarray(orders, dtype=float)
    rdp = np.asarray(rdp, dtype=float)
    if conversion == "balle":
        delta, order = dp_rdp.compute_delta(orders, rdp, epsilon)
        return float(delta), float(order)
    with np.errstate(over="ignore", invalid="ignore"):
        log_delta = (orders - 1.0) * (rdp - epsilon)
    log_delta = np.where(np.isnan(log_delta), np.inf, log_delta)
    best = int(np.argmin(log_delta))
    return float(min(math.exp(min(log_delta[best], 0.0)), 1.0)), float(orders[best])
