"""Validated constructors of the events trainers and mechanisms emit.

Every builder takes keyword-only privacy parameters, validates them at the boundary
(`InvalidParameterError` naming the parameter) and returns an
immutable event; there is no "noise = 0 means non-private" sentinel (use
``dp_accounting.NonPrivateDpEvent()``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Optional

import numpy as np
from dp_accounting import dp_event

from gnnprivacy._validation import (check_choice, check_int, check_positive, check_probability,
                                    check_real)
from gnnprivacy.accounting.events import (DPGNN_SAMPLINGS, HETERPOISSON_MODES, DpGnnDpEvent,
                                          EdgeSubgraphDpEvent, EpsilonDeltaDpEvent,
                                          HeterPoissonDpEvent)
from gnnprivacy.accounting.heterpoisson import covering_degrees
from gnnprivacy.errors import InvalidParameterError


def dpsgd_event(*, sample_rate: float, noise_multiplier: float) -> dp_event.DpEvent:
    """One DP-SGD step: Poisson sampling at ``sample_rate``, Gaussian noise ``z C``.

    Privacy: unit = the example (no unit declared), add/remove; event
    ``PoissonSampledDpEvent(q, GaussianDpEvent(z))``.
    """
    q = check_probability("sample_rate", sample_rate, allow_zero=False)
    z = check_positive("noise_multiplier", noise_multiplier)
    return dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(z))


def heterpoisson_event(*, q_b: float, M: float, noise_multiplier: float,
                       max_out_degree: Optional[int] = None,
                       out_degrees: Optional[Iterable[int]] = None,
                       overlap_removal: bool = True, mode: str = "sound") -> HeterPoissonDpEvent:
    """One step of HeterPoisson node-level DP-SGD (000 Alg. 1-3, Theorem 2).

    Args:
        q_b: central-node sampling rate in (0, 1].
        M: neighbour multiplier > 0 (peripheral probability ``min(1, M / D_ot)``).
        noise_multiplier: sigma / R, the Gaussian noise std over the clip norm R (the
            paper's sigma with R = 0.5 is ``noise_multiplier / 2``).
        max_out_degree: D_max; the worst case is taken over the covering set
            ``{0, 1, 2, 4, ..., D_max}`` (000 §4.2). Default per 000 §9 A2: ``|V| - 1``.
        out_degrees: alternatively, the public out-degrees of the graph's nodes; the worst
            case is then taken over exactly their distinct values.
        overlap_removal: False for the ablation without overlap removal (000 §4.6).
        mode: ``"sound"`` (PLD, default) or ``"paper"`` (Theorem 2's RDP; RDP accountant).

    Privacy: unit NODE, relation ADD_OR_REMOVE; event `HeterPoissonDpEvent`.

    Example:
        >>> from gnnprivacy.accounting import heterpoisson_event, make_accountant
        >>> event = heterpoisson_event(q_b=0.18, M=2, noise_multiplier=8.0, max_out_degree=1000)
        >>> type(event).__name__
        'HeterPoissonDpEvent'
        >>> acc = make_accountant("pld", unit="node")
        >>> _ = acc.compose(event, count=50)
        >>> acc.get_epsilon(1e-5) > 0
        True
    """
    q = check_probability("q_b", q_b, allow_zero=False)
    m = check_positive("M", M)
    z = check_positive("noise_multiplier", noise_multiplier)
    mode = check_choice("mode", mode, HETERPOISSON_MODES)
    if not isinstance(overlap_removal, bool):
        raise InvalidParameterError("overlap_removal", "a bool", overlap_removal)
    if (max_out_degree is None) == (out_degrees is None):
        raise InvalidParameterError("max_out_degree", "given exactly when out_degrees is not",
                                    max_out_degree)
    if max_out_degree is not None:
        degrees = covering_degrees(check_int("max_out_degree", max_out_degree, low=0))
    else:
        values = np.unique(np.asarray(list(out_degrees)))
        if values.size == 0 or values.dtype.kind not in "iu" or values[0] < 0:
            raise InvalidParameterError("out_degrees", "a non-empty collection of integers >= 0",
                                        out_degrees)
        degrees = tuple(int(v) for v in values)
    return HeterPoissonDpEvent(q, m, degrees, z, overlap_removal, mode)


def dpgnn_event(*, num_train: int, batch_size: int, max_degree: int, noise_multiplier: float,
                sampling: str = "fixed") -> DpGnnDpEvent:
    """One step of DP-GNN (002 Alg. 1/3) on degree-bounded sub-graphs.

    Args:
        num_train: N, number of training nodes (public).
        batch_size: m; uniform batch of m (``"fixed"``) or expected size (``"poisson"``).
        max_degree: K, the occurrence bound of the sampled sub-graphs.
        noise_multiplier: lambda = sigma / (2 (K+1) C).
        sampling: ``"fixed"`` (hypergeometric, the paper) or ``"poisson"`` (binomial).

    Privacy: unit NODE; relation REPLACE for fixed batches; event `DpGnnDpEvent`.
    """
    n = check_int("num_train", num_train, low=1)
    k = check_int("max_degree", max_degree, low=0, high=n - 1)
    m = check_int("batch_size", batch_size, low=1, high=n)
    lam = check_positive("noise_multiplier", noise_multiplier)
    sampling = check_choice("sampling", sampling, DPGNN_SAMPLINGS)
    return DpGnnDpEvent(n, k, m, lam, sampling)


def edge_subgraph_event(*, sample_rate: float, noise_multiplier: float, occurrence: int,
                        bounding_factor: int = 1, undirected: bool = True
                        ) -> EdgeSubgraphDpEvent:
    """One step of edge-level DP-SGD over Poisson-sampled subgraphs (`EdgeSubgraphDpEvent`).

    Args:
        sample_rate: q, each training node's probability of being a centre.
        noise_multiplier: z = sigma / C.
        occurrence: the most subgraphs of one step holding the unit edge (>= 1).
        bounding_factor: how many times that one raw edge can change through degree
            bounding (1, 2 or 3).
        undirected: the unit is the pair ``{u, v}`` (both entries) rather than ``u -> v``.

    Privacy: unit EDGE, relation ADD_OR_REMOVE; PLD accountant only.
    """
    q = check_probability("sample_rate", sample_rate, allow_zero=False)
    z = check_positive("noise_multiplier", noise_multiplier)
    occ = check_int("occurrence", occurrence, low=1)
    factor = check_int("bounding_factor", bounding_factor, low=1, high=3)
    if not isinstance(undirected, bool):
        raise InvalidParameterError("undirected", "a bool", undirected)
    return EdgeSubgraphDpEvent(q, z, occ, factor, undirected)


def gaussian_event(*, noise_multiplier: float) -> dp_event.GaussianDpEvent:
    """Gaussian mechanism with noise ``z C`` on values of norm at most C."""
    return dp_event.GaussianDpEvent(check_positive("noise_multiplier", noise_multiplier))


def laplace_event(*, noise_multiplier: float) -> dp_event.LaplaceDpEvent:
    """Laplace mechanism with scale ``b C`` on values of L1 norm at most C (epsilon = 1/b)."""
    return dp_event.LaplaceDpEvent(check_positive("noise_multiplier", noise_multiplier))


def randomized_response_event(*, epsilon: float, num_buckets: int
                              ) -> dp_event.RandomizedResponseDpEvent:
    """k-ary (generalised) randomized response with budget epsilon.

    GRR keeps the true value with probability ``e^eps / (e^eps + k - 1)``; in
    dp_accounting's parametrisation (uniform output with probability p) that is
    ``p = k / (e^eps + k - 1)``. Privacy: relation REPLACE, pure epsilon.
    """
    eps = check_positive("epsilon", epsilon)
    k = check_int("num_buckets", num_buckets, low=2)
    return dp_event.RandomizedResponseDpEvent(k / (math.exp(eps) + k - 1.0), k)


def pure_dp_event(*, epsilon: float, delta: float = 0.0) -> EpsilonDeltaDpEvent:
    """A mechanism known only to be (epsilon, delta)-DP (delta = 0: pure DP)."""
    eps = check_real("epsilon", epsilon, low=0.0)
    if math.isinf(eps):
        raise InvalidParameterError("epsilon", "finite (use NonPrivateDpEvent)", epsilon)
    return EpsilonDeltaDpEvent(eps, check_probability("delta", delta, allow_one=False))
