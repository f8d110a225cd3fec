"""The exponential mechanism (McSherry and Talwar, FOCS 2007).

Given scores ``u_1..u_n`` of the candidates (``u`` has sensitivity ``Delta``: one individual's
change moves every score by at most ``Delta``) the mechanism returns index ``r`` with

    P[r] = exp(eps u_r / (2 Delta)) / sum_s exp(eps u_s / (2 Delta)),

which is ``epsilon``-DP (tight: raise ``u_r`` by ``Delta`` and lower all others by ``Delta``).
For scores that move in one direction only (``monotonic=True``: all scores rise, or all fall)
the factor 2 can be dropped: ``exp(eps u_r / Delta)`` is ``epsilon``-DP (McSherry and Talwar
2007; Dwork and Roth 2014, Section 3.4).

Sampling: probabilities in float64 by a max-shifted softmax, then inverse-CDF with one uniform
per row (``searchsorted`` on the cumulative sums). In secure mode the uniform comes from the OS
CSPRNG. The output is an index, so the continuous floating-point attacks on Laplace/Gaussian
noise do not apply; the float64 probabilities are accurate to a relative ~1e-15, far below
any ``epsilon`` of interest (an exact base-2 sampler à la Ilvento, CCS 2020, is not
implemented).
"""

from __future__ import annotations

import torch
from torch import Tensor

from gnnprivacy._validation import check_positive
from gnnprivacy.accounting.units import NeighboringRelation, PrivacyUnit
from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.mechanisms._random import RandomSource
from gnnprivacy.mechanisms.base import (Mechanism, check_flag, check_float_tensor, check_relation,
                                        check_unit, pure_epsilon_event)


def exponential_probabilities(scores: Tensor, *, epsilon: float, sensitivity: float,
                              monotonic: bool = False) -> Tensor:
    """Selection probabilities (float64) along the last dimension of ``scores``."""
    scores = check_float_tensor(scores, "scores")
    if scores.dim() == 0 or scores.size(-1) == 0:
        raise InvalidParameterError("scores", "a tensor with at least one candidate in its last dimension",
                                    tuple(scores.shape))
    factor = check_positive("epsilon", epsilon) / check_positive("sensitivity", sensitivity)
    if not check_flag("monotonic", monotonic):
        factor /= 2.0
    return torch.softmax(factor * scores.to(torch.float64), dim=-1)


def sample_index(probabilities: Tensor, source: RandomSource) -> Tensor:
    """One index per row of ``probabilities`` (``(..., n)``) by inverse CDF; int64 ``(...)``."""
    cdf = probabilities.cumsum(dim=-1)
    u = source.uniform(tuple(probabilities.shape[:-1]) + (1,)) * cdf[..., -1:]
    index = torch.searchsorted(cdf.contiguous(), u.contiguous(), right=True)
    return torch.clamp(index, max=probabilities.size(-1) - 1).squeeze(-1)


class ExponentialMechanism(Mechanism):
    """Select a candidate index with probability ``∝ exp(eps * score / (2 Delta))``.

    *Privacy*: pure ``epsilon``-DP for the given unit and relation, provided every score has
    sensitivity ``Delta`` under that relation; event `pure_epsilon_event` at ``epsilon``.

    Args:
        epsilon: ``epsilon > 0``.
        sensitivity: score sensitivity ``Delta > 0``.
        unit: the privacy unit of the guarantee.
        relation: the neighbouring relation (default add-or-remove).
        monotonic: scores are monotone in the data (drop the factor 2).
        secure_mode: draw from the OS CSPRNG.

    Example:
        >>> import torch
        >>> from gnnprivacy.mechanisms import ExponentialMechanism
        >>> mech = ExponentialMechanism(epsilon=1.0, sensitivity=1.0, unit="node")
        >>> int(mech(torch.tensor([0.0, 5.0, 1.0]), generator=torch.Generator().manual_seed(0))) in (0, 1, 2)
        True
    """

    _repr_fields = ("epsilon", "sensitivity", "monotonic", "unit", "relation", "secure_mode")

    def __init__(self, *, epsilon: float, sensitivity: float, unit: PrivacyUnit | str,
                 relation: NeighboringRelation | str = NeighboringRelation.ADD_OR_REMOVE,
                 monotonic: bool = False, secure_mode: bool = False):
        self.epsilon = check_positive("epsilon", epsilon)
        self.sensitivity = check_positive("sensitivity", sensitivity)
        self.unit = check_unit(unit)
        self.relation = check_relation(relation)
        self.monotonic = check_flag("monotonic", monotonic)
        self.secure_mode = check_flag("secure_mode", secure_mode)

    @property
    def event(self):
        return pure_epsilon_event(self.epsilon)

    def probabilities(self, scores: Tensor) -> Tensor:
        """Exact selection probabilities (float64) along the last dimension."""
        return exponential_probabilities(scores, epsilon=self.epsilon, sensitivity=self.sensitivity,
                                         monotonic=self.monotonic)

    def __call__(self, scores: Tensor, *, generator: torch.Generator | None = None) -> Tensor:
        """Sample one index per row of ``scores`` (``(..., n)``); returns int64 ``(...)``."""
        probs = self.probabilities(scores)
        return sample_index(probs, RandomSource(generator, secure=self.secure_mode))


__all__ = ["ExponentialMechanism", "exponential_probabilities", "sample_index"]
