"""GRR-FS: generalized randomized response with feature sampling (RGNN's feature mechanism).

Bhaila, Huang, Wu and Wu, "Local Differential Privacy in Graph Neural Networks: a
Reconstruction Approach" (SDM 2024), Section III-B; spec 004 §3.2, §9. Extends RS+FD
(Arcolezi et al., CIKM 2021) to ``m`` sampled features.

Each user holds ``d`` categorical features (binary by default; feature ``i`` has domain size
``gamma_i``), independently of every other user:

1. samples a set ``S`` of exactly ``m`` of the ``d`` features uniformly without replacement
   (``S`` is never reported);
2. reports each ``i in S`` through GRR with the per-feature budget ``eps_x = epsilon / m``:
   the true value with ``p_i = e^eps_x / (e^eps_x + gamma_i - 1)``, else one of the other
   values with ``q_i = 1 / (e^eps_x + gamma_i - 1)`` each;
3. reports each ``i not in S`` as a uniform draw from ``{0, .., gamma_i - 1}`` (fake data).

Per-feature marginal (what the estimator uses):
``P[x'_i = j | x_i] = (m/d) (p_i 1[j = x_i] + q_i 1[j != x_i]) + (1 - m/d) / gamma_i``.
Joint law: ``P[x' | x] = C(d, m)^-1 sum_{|S| = m} prod_{i in S} GRR_i(x'_i | x_i)
prod_{i not in S} 1/gamma_i`` (computed exactly by `GRRFS.probability` through the
elementary symmetric polynomial ``e_m`` of the ratios ``gamma_i GRR_i(x'_i | x_i)``).

Optional OR-grouping (``group_size = g``): a user first replaces each block of ``g``
contiguous columns by the OR of its entries (``d' = ceil(d / g)`` binary features); it is a
deterministic function of the user's own vector, so the privacy analysis is unchanged.

Privacy (spec 004 §9.3): the paper's Theorem 1 claims ``ln(1 + (m/d)(e^{m eps_x} - 1))`` by
"sampling amplification", which holds for central DP only. In LDP the two inputs may differ in
every feature, and for ``x' = x`` against an input differing everywhere each subset ``S``
contributes the ratio ``(p/q)^m``; the exact worst case is ``e^{m eps_x} = e^epsilon``. So the
sound per-user guarantee, the default here, is ``epsilon = m * eps_x``; the paper's figure is
available as `GRRFS.paper_epsilon` for table reproduction only.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from gnnprivacy._validation import check_choice, check_int, check_positive
from gnnprivacy.accounting.units import NeighboringRelation, PrivacyUnit
from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.mechanisms._random import RandomSource
from gnnprivacy.mechanisms.base import Mechanism, check_flag, check_unit, pure_epsilon_event
from gnnprivacy.mechanisms.frequency import grr_fs_frequencies
from gnnprivacy.mechanisms.randomized_response import grr_sample

_NON_BINARY = "non-binary features given to GRR-FS without grouping"


def _grr_fs_epsilon(feature_epsilon: float, m: int, d: int, mode: str = "sound") -> float:
    """Per-user epsilon of GRR-FS (spec 004 §9.2-9.3). Private until accounting exposes it.

    * ``"sound"`` (default, tight under LDP): ``m * eps_x``;
    * ``"paper"`` (Theorem 1, unsound for LDP): ``ln(1 + (m/d)(e^{m eps_x} - 1))``;
    * ``"attribute"`` (inputs differing in one feature only, homogeneous domains):
      ``ln(1 + (m/d)(e^{eps_x} - 1))``.
    """
    mode = check_choice("mode", mode, ("sound", "paper", "attribute"))
    if mode == "sound":
        return m * feature_epsilon
    exponent = m * feature_epsilon if mode == "paper" else feature_epsilon
    return math.log1p(m / d * math.expm1(exponent))


def _or_group(x: Tensor, group_size: int) -> Tensor:
    """OR over contiguous blocks of ``group_size`` columns of a non-negative ``(n, d)`` tensor."""
    if not torch.isfinite(x.to(torch.float64)).all() or (x < 0).any():
        raise InvalidParameterError("x", "finite non-negative features to OR-group",
                                    "a tensor with negative or non-finite entries")
    n, d = x.shape
    groups = math.ceil(d / group_size)
    padded = torch.zeros(n, groups * group_size, dtype=torch.bool)
    padded[:, :d] = x > 0
    return padded.view(n, groups, group_size).any(dim=2).to(torch.int64)


def _as_categories(x: Tensor, domain_sizes: Tensor, binary: bool) -> Tensor:
    """Integer-valued ``x`` with column ``i`` in ``[0, gamma_i)``, as int64, else a clear error."""
    if x.dtype == torch.bool:
        x = x.to(torch.int64)
    as_int = x.to(torch.int64)
    bad = (as_int < 0) | (as_int >= domain_sizes)
    if torch.is_floating_point(x):
        bad |= as_int != x
    if bad.any():
        expected = (f"binary (0/1) features: {_NON_BINARY} (pass group_size= to OR-group "
                    "counts, or domain_sizes= for categorical features)") if binary \
            else "integer features with column i in [0, domain_sizes[i])"
        raise InvalidParameterError("x", expected, f"a tensor containing {x[bad][0].item()!r}")
    return as_int


def _grr_tables(domain_sizes: Tensor, feature_epsilon: float) -> tuple[Tensor, Tensor]:
    """Per-feature GRR ``(p_i, q_i)`` (float64); ``q_i = 0`` for constant features (``gamma_i = 1``)."""
    gamma = domain_sizes.to(torch.float64)
    scaled = math.exp(-feature_epsilon)
    denominator = 1.0 + (gamma - 1.0) * scaled
    return 1.0 / denominator, torch.where(gamma > 1, scaled / denominator, 0.0)


def grr_fs_sample(x: Tensor, *, feature_epsilon: float, m: int, domain_sizes: Tensor,
                  source: RandomSource) -> Tensor:
    """GRR-FS on validated int64 ``(n, d)`` categories (no checks; see `GRRFS`)."""
    n, d = x.shape
    gamma = domain_sizes.to(torch.int64)
    other = _grr_tables(gamma, feature_epsilon)[1]
    sampled = source.random_subsets(n, d, m)
    return grr_sample(x, other_probability=other, num_categories=gamma, source=source, apply=sampled)


class GRRFS(Mechanism):
    """GRR with feature sampling: ``m`` of ``d`` features via GRR(``epsilon / m``), the rest uniform.

    *Privacy*: ``epsilon``-LDP per user (``epsilon = m * eps_x``, tight: the exact worst-case
    probability ratio equals ``e^epsilon``), unit ``FEATURE`` (a user's whole feature vector),
    replace relation (any vector may replace any other; ``sensitivity`` = the number of
    reported features, all of which may change). Event: `pure_epsilon_event` at
    ``epsilon``. `paper_epsilon` is the paper's (unsound) amplified figure.

    Args:
        epsilon: per-user budget ``> 0``; each sampled feature gets ``eps_x = epsilon / m``.
        num_features: ``d``, the number of input columns (public).
        m: features sampled per user, ``1 <= m <= d'`` (``d'`` = columns after grouping);
            ``None`` means ``d'``.
        domain_sizes: per-column domain sizes ``gamma_i >= 1`` for categorical input (default:
            all binary). Not combinable with ``group_size``.
        group_size: OR-group contiguous blocks of this many columns first (input may then be any
            non-negative counts); ``None`` requires binary input.
        unit: privacy unit (default ``FEATURE``).
        secure_mode: draw from the OS CSPRNG.

    Raises:
        InvalidParameterError: ``epsilon <= 0``, ``m > d'``, bad domain sizes, or (at call time)
            non-binary input without grouping, wrong width, values outside the domains.

    Example:
        >>> import torch
        >>> from gnnprivacy.mechanisms import GRRFS
        >>> mech = GRRFS(epsilon=1.0, num_features=8, m=2)      # each user reports 2 of 8 features
        >>> reports = mech(torch.randint(0, 2, (5, 8)).float(), generator=torch.Generator().manual_seed(0))
        >>> reports.shape
        torch.Size([5, 8])
    """

    _repr_fields = ("epsilon", "feature_epsilon", "m", "num_features", "num_reported",
                    "group_size", "paper_epsilon", "unit", "secure_mode")

    def __init__(self, *, epsilon: float, num_features: int, m: int | None = None,
                 domain_sizes=None, group_size: int | None = None,
                 unit: PrivacyUnit | str = PrivacyUnit.FEATURE, secure_mode: bool = False):
        self.epsilon = check_positive("epsilon", epsilon)
        self.num_features = check_int("num_features", num_features, low=1)
        self.group_size = None if group_size is None else check_int("group_size", group_size, low=1)
        if self.group_size is not None and domain_sizes is not None:
            raise InvalidParameterError("domain_sizes", "None when group_size is given "
                                        "(grouped features are binary)", domain_sizes)
        d_out = self.num_features if self.group_size is None \
            else math.ceil(self.num_features / self.group_size)
        self.num_reported = d_out
        self.m = d_out if m is None else check_int("m", m, low=1, high=d_out)
        self.domain_sizes = self._check_domains(domain_sizes, d_out)
        self.feature_epsilon = self.epsilon / self.m
        self.unit = check_unit(unit)
        self.relation = NeighboringRelation.REPLACE
        self.sensitivity = float(d_out)
        self.secure_mode = check_flag("secure_mode", secure_mode)

    @classmethod
    def from_feature_epsilon(cls, feature_epsilon: float, **kwargs) -> GRRFS:
        """Build from the per-feature budget ``eps_x`` (spec 004 notation): ``epsilon = m * eps_x``."""
        eps_x = check_positive("feature_epsilon", feature_epsilon)
        probe = cls(epsilon=1.0, **kwargs)
        return cls(epsilon=probe.m * eps_x, **kwargs)

    @staticmethod
    def _check_domains(domain_sizes, d: int) -> Tensor:
        if domain_sizes is None:
            return torch.full((d,), 2, dtype=torch.int64)
        sizes = torch.as_tensor(domain_sizes)
        if sizes.shape != (d,) or torch.is_floating_point(sizes) or (sizes < 1).any():
            raise InvalidParameterError("domain_sizes", f"{d} integers >= 1 (one per feature)",
                                        domain_sizes)
        return sizes.to(torch.int64)

    @property
    def paper_epsilon(self) -> float:
        """Theorem 1's ``ln(1 + (m/d)(e^{m eps_x} - 1))`` (unsound for LDP; reproduction only)."""
        return _grr_fs_epsilon(self.feature_epsilon, self.m, self.num_reported, "paper")

    @property
    def event(self):
        return pure_epsilon_event(self.epsilon)

    def prepare(self, x: Tensor) -> Tensor:
        """Validate ``x`` (``(n, num_features)``) and return the int64 categories that are reported."""
        if not isinstance(x, Tensor) or x.dim() != 2 or x.size(1) != self.num_features:
            raise InvalidParameterError(
                "x", f"a 2-D (n, {self.num_features}) tensor",
                tuple(x.shape) if isinstance(x, Tensor) else type(x))
        if self.group_size is not None:
            return _or_group(x, self.group_size)
        binary = bool((self.domain_sizes == 2).all())
        return _as_categories(x, self.domain_sizes, binary)

    def __call__(self, x: Tensor, *, generator: torch.Generator | None = None) -> Tensor:
        """Randomize each row of ``x``; returns int64 ``(n, num_reported)`` reports."""
        categories = self.prepare(x)
        source = RandomSource(generator, secure=self.secure_mode)
        return grr_fs_sample(categories, feature_epsilon=self.feature_epsilon, m=self.m,
                             domain_sizes=self.domain_sizes, source=source)

    def probability(self, x: Tensor, y: Tensor) -> Tensor:
        """Exact ``P[M(x_r) = y_r]`` per row (float64, shape ``(n,)``), from the joint law.

        ``sum_{|S|=m} prod_{S} a_i prod_{not S} b_i = prod_i b_i * e_m(a / b)`` with
        ``a_i = GRR_i(y_i | x_i)``, ``b_i = 1 / gamma_i``; ``e_m`` by the usual recursion.
        """
        cat = self.prepare(x)
        y = _as_categories(torch.as_tensor(y), self.domain_sizes, binary=False)
        gamma = self.domain_sizes.to(torch.float64)
        keep, other = _grr_tables(self.domain_sizes, self.feature_epsilon)
        grr = torch.where(cat == y, keep, other)
        ratio = grr * gamma
        e = torch.zeros(cat.size(0), self.m + 1, dtype=torch.float64)
        e[:, 0] = 1.0
        for i in range(self.num_reported):  # loop over features (not nodes)
            e[:, 1:] = e[:, 1:] + ratio[:, i:i + 1] * e[:, :-1].clone()
        return e[:, self.m] / torch.prod(gamma) / math.comb(self.num_reported, self.m)

    def estimate_frequencies(self, counts: Tensor, *, feature: int = 0) -> Tensor:
        """Unbiased value frequencies of one feature from report counts (spec 004 eq. 5)."""
        gamma = int(self.domain_sizes[check_int("feature", feature, low=0, high=self.num_reported - 1)])
        return grr_fs_frequencies(counts, feature_epsilon=self.feature_epsilon, m=self.m,
                                  num_features=self.num_reported, domain_size=gamma)


__all__ = ["GRRFS", "grr_fs_sample"]
