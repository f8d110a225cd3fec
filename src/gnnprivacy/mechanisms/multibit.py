"""LPGNN's multi-bit feature mechanism and its unbiased rectifier.

Sajadmanesh and Gatica-Perez, "Locally Private Graph Neural Networks" (CCS 2021), Section 4.1
(multi-bit encoder, Algorithm 1) and the rectifier; spec 004 §10.3, spec 001 §5 (baselines).

Encoder (user side). Features lie in public bounds ``[a, b]`` (scalars or per feature). A user
samples ``m`` of the ``d`` dimensions uniformly without replacement; for each sampled ``i`` it
draws ``t_i ~ Bernoulli(1/(e^{eps/m} + 1) + (x_i - a)/(b - a) * (e^{eps/m} - 1)/(e^{eps/m} + 1))``
and reports ``x*_i = 2 t_i - 1``; unsampled dimensions report ``x*_i = 0``. The output lies in
``{-1, 0, 1}^d`` with exactly ``m`` non-zeros.

Rectifier (server side, post-processing):

```
x'_i = d (b - a) / (2m) * (e^{eps/m} + 1) / (e^{eps/m} - 1) * x*_i + (a + b) / 2,
```

unbiased: ``E[x*_i] = (m/d) (e^{eps/m} - 1)/(e^{eps/m} + 1) (2 (x_i - a)/(b - a) - 1)``.

Privacy: the sampled set does not depend on ``x``; given it, each sampled bit has likelihood
ratio at most ``e^{eps/m}`` between any two inputs in ``[a, b]`` (attained at ``a`` vs ``b``),
so the mechanism is ``epsilon``-LDP per user, tight, with no further amplification (spec 004
§9.3: the RGNN paper's remark that it is "also amplified" does not hold under LDP).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from gnnprivacy._validation import check_int, check_positive
from gnnprivacy.accounting.units import NeighboringRelation, PrivacyUnit
from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.mechanisms._random import RandomSource
from gnnprivacy.mechanisms.base import (Mechanism, check_flag, check_float_tensor, check_unit,
                                        pure_epsilon_event)

_LPGNN_M_DIVISOR = 2.18  # LPGNN's default m = max(1, min(d, floor(eps / 2.18)))


def lpgnn_default_m(epsilon: float, num_features: int) -> int:
    """LPGNN's optimal-utility default ``m = max(1, min(d, floor(epsilon / 2.18)))``."""
    return max(1, min(num_features, math.floor(epsilon / _LPGNN_M_DIVISOR)))


def _bounds(lower, upper, d: int) -> tuple[Tensor, Tensor]:
    a = torch.as_tensor(lower, dtype=torch.float64)
    b = torch.as_tensor(upper, dtype=torch.float64)
    for name, t in (("lower", a), ("upper", b)):
        if t.shape not in ((), (d,)) or not torch.isfinite(t).all():
            raise InvalidParameterError(name, f"a finite scalar or {d} finite values (public bound)",
                                        t.tolist())
    if not (a < b).all():
        raise InvalidParameterError("upper", "greater than lower in every feature",
                                    {"lower": a.tolist(), "upper": b.tolist()})
    return a.expand(d).clone(), b.expand(d).clone()


class MultiBit(Mechanism):
    """LPGNN's multi-bit encoder (``__call__``) with its unbiased rectifier (`rectify`).

    *Privacy*: ``epsilon``-LDP per user for the whole feature vector (unit ``FEATURE``, replace
    relation; ``sensitivity`` = the L1 diameter ``sum_i (b_i - a_i)`` of the input box, every
    coordinate may change). Event: `pure_epsilon_event` at ``epsilon``.

    Args:
        epsilon: per-user budget ``> 0``; each sampled dimension uses ``epsilon / m``.
        num_features: ``d`` (public).
        lower: public lower bound ``a`` (scalar or ``(d,)``); required.
        upper: public upper bound ``b > a`` (scalar or ``(d,)``); required.
        m: dimensions sampled per user, ``1 <= m <= d``; ``None`` = LPGNN's default
            ``max(1, min(d, floor(epsilon / 2.18)))``.
        clip: clamp inputs into ``[a, b]`` (a local, data-independent map) instead of raising.
        unit: privacy unit (default ``FEATURE``).
        secure_mode: draw from the OS CSPRNG.

    Example:
        >>> import torch
        >>> from gnnprivacy.mechanisms import MultiBit
        >>> mech = MultiBit(epsilon=2.0, num_features=6, lower=0.0, upper=1.0)
        >>> x_star = mech(torch.rand(5, 6), generator=torch.Generator().manual_seed(0))
        >>> mech.rectify(x_star).shape                  # unbiased estimates of the inputs
        torch.Size([5, 6])
    """

    _repr_fields = ("epsilon", "m", "num_features", "unit", "secure_mode")

    def __init__(self, *, epsilon: float, num_features: int, lower, upper, m: int | None = None,
                 clip: bool = False, unit: PrivacyUnit | str = PrivacyUnit.FEATURE,
                 secure_mode: bool = False):
        self.epsilon = check_positive("epsilon", epsilon)
        self.num_features = check_int("num_features", num_features, low=1)
        self.lower, self.upper = _bounds(lower, upper, self.num_features)
        self.m = lpgnn_default_m(self.epsilon, self.num_features) if m is None \
            else check_int("m", m, low=1, high=self.num_features)
        self.clip = check_flag("clip", clip)
        self.unit = check_unit(unit)
        self.relation = NeighboringRelation.REPLACE
        self.sensitivity = float((self.upper - self.lower).sum())
        self.secure_mode = check_flag("secure_mode", secure_mode)
        self._e = math.exp(self.epsilon / self.m)

    @property
    def event(self):
        return pure_epsilon_event(self.epsilon)

    def _prepare(self, x: Tensor) -> Tensor:
        x = check_float_tensor(x)
        if x.dim() != 2 or x.size(1) != self.num_features:
            raise InvalidParameterError("x", f"a 2-D (n, {self.num_features}) tensor", tuple(x.shape))
        x = x.to(torch.float64)
        if self.clip:
            return torch.minimum(torch.maximum(x, self.lower), self.upper)
        if ((x < self.lower) | (x > self.upper)).any():
            raise InvalidParameterError("x", "features within the public bounds [lower, upper] "
                                        "(or clip=True)", "a tensor with values outside them")
        return x

    def one_probability(self, x: Tensor) -> Tensor:
        """``P[t_i = 1 | x_i]`` for a sampled dimension (float64, ``x``'s shape)."""
        x = self._prepare(x)
        e = self._e
        return 1.0 / (e + 1.0) + (x - self.lower) / (self.upper - self.lower) * (e - 1.0) / (e + 1.0)

    def __call__(self, x: Tensor, *, generator: torch.Generator | None = None) -> Tensor:
        """Encode each row of ``x``; returns ``{-1, 0, 1}`` values in ``x``'s dtype."""
        prob_one = self.one_probability(x)
        source = RandomSource(generator, secure=self.secure_mode)
        n, d = prob_one.shape
        sampled = source.random_subsets(n, d, self.m)
        bits = torch.where(source.uniform((n, d)) < prob_one, 1.0, -1.0)
        return torch.where(sampled, bits, 0.0).to(x.dtype)

    def rectify(self, x_star: Tensor) -> Tensor:
        """Unbiased estimate of ``x`` from encoded ``x*`` (float64, same shape)."""
        x_star = check_float_tensor(x_star, "x_star")
        if x_star.dim() != 2 or x_star.size(1) != self.num_features:
            raise InvalidParameterError("x_star", f"a 2-D (n, {self.num_features}) tensor",
                                        tuple(x_star.shape))
        e = self._e
        scale = self.num_features * (self.upper - self.lower) / (2 * self.m) * (e + 1.0) / (e - 1.0)
        return scale * x_star.to(torch.float64) + (self.lower + self.upper) / 2.0

    def probability(self, x: Tensor, y: Tensor) -> Tensor:
        """Exact ``P[M(x_r) = y_r]`` per row (float64, shape ``(n,)``)."""
        prob_one = self.one_probability(x)
        y = check_float_tensor(torch.as_tensor(y, dtype=torch.float64), "y")
        per_dim = torch.where(y > 0, prob_one, torch.where(y < 0, 1.0 - prob_one, 1.0))
        valid = ((y == 0) | (y == 1) | (y == -1)).all(dim=1) & ((y != 0).sum(dim=1) == self.m)
        prob = per_dim.prod(dim=1) / math.comb(self.num_features, self.m)
        return torch.where(valid, prob, 0.0)


__all__ = ["MultiBit", "lpgnn_default_m"]
