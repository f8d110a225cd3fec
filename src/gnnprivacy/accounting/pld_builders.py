"""Turn one (flattened, private) event into a privacy loss distribution.

Sensitivity convention (shared with `rdp_builders`): an
unsampled ``GaussianDpEvent(z)`` / ``LaplaceDpEvent(b)`` has noise ``z`` (``b``) times the
sensitivity *under the accountant's neighbouring relation*, as the library's mechanisms
define it, so it is the pair N(0, z^2) vs N(1, z^2) under either relation. (dp_accounting's
``PLDAccountant`` instead reads the multiplier against a per-record norm bound and doubles
the shift under ``REPLACE_ONE``; halve the multiplier to account such an event here.)
Sampled dp_accounting events keep dp_accounting's per-record semantics. Events of this
package carry their own shifts (HeterPoisson: add/remove; DP-GNN: replace shifts 2iC).

HeterPoisson (000 §4.7, ``mode="sound"``): the Theorem-2 mixture for out-degree D, whose
largest shifts of total probability at most ``tail_mass`` are dropped; the dropped mass
``tau`` is returned so that the accountant charges ``count * tau`` to delta and
``-count * log(1 - tau)`` to epsilon (a step falls in the dropped tail with probability
tau, independently of everything else; 000 §4.7 "tail-into-delta" argument).
"""

from __future__ import annotations

from typing import Optional

import numpy as np
from dp_accounting import dp_event
from dp_accounting.pld import common as pld_common
from dp_accounting.pld import privacy_loss_distribution as pld_lib
from dp_accounting.privacy_accountant import NeighboringRelation as DpRelation

from gnnprivacy.accounting.events import (DpGnnDpEvent, EdgeSubgraphDpEvent, EpsilonDeltaDpEvent,
                                          HeterPoissonDpEvent)
from gnnprivacy.accounting.heterpoisson import truncated_shift_distribution
from gnnprivacy.accounting.multiterm import affected_count_log_pmf
from gnnprivacy.accounting.pld_mixtures import (mixture_of_gaussians_pld,
                                                revealed_gaussian_mixture_pld)
from gnnprivacy.accounting.units import NeighboringRelation

DP_RELATION = {NeighboringRelation.ADD_OR_REMOVE: DpRelation.ADD_OR_REMOVE_ONE,
               NeighboringRelation.REPLACE: DpRelation.REPLACE_ONE}


def pld_support_error(event: dp_event.DpEvent, relation: NeighboringRelation) -> Optional[str]:
    """``None`` if the PLD accountant can account ``event`` (a flattened leaf), else why not."""
    add_remove = relation is NeighboringRelation.ADD_OR_REMOVE
    if isinstance(event, (dp_event.GaussianDpEvent, dp_event.LaplaceDpEvent,
                          EpsilonDeltaDpEvent, DpGnnDpEvent, EdgeSubgraphDpEvent,
                          dp_event.TruncatedSubsampledGaussianDpEvent)):
        return None
    if isinstance(event, dp_event.RandomizedResponseDpEvent):
        return None if not add_remove else "RandomizedResponseDpEvent needs relation REPLACE"
    if isinstance(event, dp_event.MixtureOfGaussiansDpEvent):
        return None if add_remove else "MixtureOfGaussiansDpEvent needs relation ADD_OR_REMOVE"
    if isinstance(event, HeterPoissonDpEvent):
        if event.mode == "paper":
            return ("HeterPoissonDpEvent(mode='paper') is Theorem 2's RDP analysis; "
                    "account it with make_accountant('rdp')")
        return None
    if isinstance(event, dp_event.PoissonSampledDpEvent):
        if isinstance(event.event, dp_event.GaussianDpEvent):
            return None
        if isinstance(event.event, dp_event.LaplaceDpEvent):
            return None if add_remove else "Poisson-sampled Laplace needs relation ADD_OR_REMOVE"
        return "PoissonSampledDpEvent must wrap a GaussianDpEvent or LaplaceDpEvent"
    return f"{type(event).__name__} is not supported by the PLD accountant"


def event_pld(event: dp_event.DpEvent, *, relation: NeighboringRelation,
              value_discretization_interval: float, degree: Optional[int] = None,
              tail_mass: float = 0.0) -> tuple[pld_lib.PrivacyLossDistribution, float]:
    """PLD of one step of a supported, private leaf event.

    Args:
        event: a leaf accepted by `pld_support_error`, with non-zero noise.
        relation: the accountant's neighbouring relation.
        value_discretization_interval: PLD grid step.
        degree: out-degree D at which a HeterPoisson event is evaluated.
        tail_mass: probability of the largest HeterPoisson shifts that may be dropped.

    Returns:
        ``(pld, dropped_mass)``; ``dropped_mass`` is non-zero only for HeterPoisson.
    """
    vdi = value_discretization_interval
    if isinstance(event, HeterPoissonDpEvent):
        return _heterpoisson_pld(event, degree, vdi, tail_mass)
    if isinstance(event, DpGnnDpEvent):
        i, log_p = affected_count_log_pmf(num_train=event.num_train,
                                          max_degree=event.max_degree,
                                          batch_size=event.batch_size, sampling=event.sampling)
        std = (event.max_degree + 1) * event.noise_multiplier
        return revealed_gaussian_mixture_pld(std, i, np.exp(log_p),
                                             value_discretization_interval=vdi), 0.0
    if isinstance(event, EdgeSubgraphDpEvent):
        return edge_subgraph_pld(event, vdi), 0.0
    if isinstance(event, EpsilonDeltaDpEvent):
        params = pld_common.DifferentialPrivacyParameters(event.epsilon, event.delta)
        return pld_lib.from_privacy_parameters(params, vdi), 0.0
    return _dp_event_pld(event, relation, vdi), 0.0


def edge_subgraph_pld(event: EdgeSubgraphDpEvent,
                      vdi: float) -> pld_lib.PrivacyLossDistribution:
    """`EdgeSubgraphDpEvent`: the ``m``-fold composition of the Poisson-subsampled Gaussian
    under substitution (dp_accounting's ``REPLACE_ONE`` pair) at noise multiplier
    ``z / sqrt(m)``, whatever the accountant's relation (the event's own analysis)."""
    m = event.group
    one = pld_lib.from_gaussian_mechanism(
        event.noise_multiplier / float(np.sqrt(m)), sampling_prob=event.sampling_probability,
        neighboring_relation=DpRelation.REPLACE_ONE, value_discretization_interval=vdi)
    return one.self_compose(m) if m > 1 else one


def _dp_event_pld(event, relation, vdi) -> pld_lib.PrivacyLossDistribution:
    dp_rel = DP_RELATION[relation]
    if isinstance(event, dp_event.GaussianDpEvent):
        return pld_lib.from_gaussian_mechanism(event.noise_multiplier,
                                               value_discretization_interval=vdi)
    if isinstance(event, dp_event.LaplaceDpEvent):
        return pld_lib.from_laplace_mechanism(event.noise_multiplier,
                                              value_discretization_interval=vdi)
    if isinstance(event, dp_event.RandomizedResponseDpEvent):
        return pld_lib.from_randomized_response(event.noise_parameter, event.num_buckets,
                                                value_discretization_interval=vdi,
                                                neighboring_relation=dp_rel)
    if isinstance(event, dp_event.MixtureOfGaussiansDpEvent):
        return mixture_of_gaussians_pld(event.standard_deviation, event.sensitivities,
                                        event.sampling_probs, value_discretization_interval=vdi)
    if isinstance(event, dp_event.TruncatedSubsampledGaussianDpEvent):
        return pld_lib.from_truncated_subsampled_gaussian_mechanism(
            dataset_size=event.dataset_size, sampling_probability=event.sampling_probability,
            truncated_batch_size=event.truncated_batch_size,
            noise_multiplier=event.noise_multiplier, value_discretization_interval=vdi,
            neighboring_relation=dp_rel)
    inner, q = event.event, event.sampling_probability          # PoissonSampledDpEvent
    if isinstance(inner, dp_event.GaussianDpEvent):
        return pld_lib.from_gaussian_mechanism(inner.noise_multiplier, sampling_prob=q,
                                               neighboring_relation=dp_rel,
                                               value_discretization_interval=vdi)
    return pld_lib.from_laplace_mechanism(inner.noise_multiplier, sampling_prob=q,
                                          value_discretization_interval=vdi)


def _heterpoisson_pld(event: HeterPoissonDpEvent, degree: Optional[int], vdi: float,
                      tail_mass: float) -> tuple[pld_lib.PrivacyLossDistribution, float]:
    d = event.max_degree if degree is None else min(int(degree), event.max_degree)
    shifts, weights, dropped = truncated_shift_distribution(
        event.sampling_probability, event.neighbor_multiplier, d, event.overlap_removal,
        tail_mass)
    if shifts.max() == 0.0:
        return pld_lib.identity(vdi), dropped
    pld = mixture_of_gaussians_pld(event.noise_multiplier, shifts, weights,
                                   value_discretization_interval=vdi)
    return pld, dropped
