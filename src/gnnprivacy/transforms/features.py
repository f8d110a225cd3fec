"""Local-DP feature releases as PyG transforms: FeatureRR and the one-dimensional mechanisms.

Thin classes over the mechanisms: HeteroRR's FeatureRR (`gnnprivacy.ldp.heterorr.feature_rr`,
Tran et al., "Heterogeneous Randomized Response for Differential Privacy in Graph Neural
Networks", IEEE BigData 2022), the numeric mechanisms of `gnnprivacy.mechanisms.feature_ldp`
(Duchi et al., JASA 2018; piecewise and hybrid, Wang et al., ICDE 2019; three-output and
PM-SUB, Zhao et al., IEEE IoT-J 2020) and LPGNN's multi-bit encoder
(`gnnprivacy.mechanisms.MultiBit`, Sajadmanesh & Gatica-Perez, ACM CCS 2021), applied to
``data.x`` as HeteroRR's harness applies them.

*Privacy*: each node randomises its own feature vector (local DP): unit ``FEATURE`` (one
node's feature vector), relation ``REPLACE``; one pure ``epsilon`` event per application.
Each row is first min-max normalised by itself (a local map, no privacy cost). Edges and
labels pass through unprotected.
"""

from __future__ import annotations

import torch
from torch_geometric.data import Data

from gnnprivacy._validation import check_int, check_positive
from gnnprivacy.accounting.events import ScopedDpEvent
from gnnprivacy.accounting.units import NeighboringRelation, PrivacyUnit
from gnnprivacy.errors import InvalidParameterError, UnknownNameError
from gnnprivacy.mechanisms.base import pure_epsilon_event
from gnnprivacy.transforms.base import PrivatizingTransform

__all__ = ["FEATURE_LDP_MECHANISMS", "FeatureLDP", "FeatureRR"]

#: the mechanisms `FeatureLDP` applies (HeteroRR's feature baselines)
FEATURE_LDP_MECHANISMS = ("duchi", "piecewise", "hybrid", "three-output", "pm-sub", "multibit")


class _FeatureTransform(PrivatizingTransform):
    unit = PrivacyUnit.FEATURE
    relation = NeighboringRelation.REPLACE

    def __init__(self, *, epsilon: float, generator=None):
        super().__init__(generator=generator)
        self.epsilon = check_positive("epsilon", epsilon)
        self._events = (ScopedDpEvent(pure_epsilon_event(self.epsilon), self.unit,
                                      self.relation),)

    @staticmethod
    def _x(data: Data) -> torch.Tensor:
        x = getattr(data, "x", None)
        if not isinstance(x, torch.Tensor) or x.dim() != 2 or not torch.is_floating_point(x):
            raise InvalidParameterError("data.x", "a 2-D floating-point feature matrix",
                                        None if x is None else tuple(x.shape))
        return x


class FeatureRR(_FeatureTransform):
    """HeteroRR's FeatureRR: k-level randomized response on every feature of every node.

    Each row is min-max normalised to ``[0, 1]``, discretised to ``k`` levels and every
    coordinate ``i`` is resampled with budget ``epsilon * theta_i`` (``theta`` uniform by
    default; give public importance scores to favour informative features). The output is
    ``u / k`` minus the public constant ``(k + 1) / (2k)`` when ``center`` (what the
    ``featurerr`` method trains on), else the levels ``u / k`` in ``[1/k, 1]``.

    *Privacy*: ``epsilon``-LDP per node's feature vector for a ``theta`` fixed before seeing
    the data; unit ``FEATURE``, relation ``REPLACE``; one pure event per application.

    Args:
        epsilon: the node's budget ``eps_f > 0``.
        k: number of levels (>= 2).
        theta: per-feature scores ``(d,)``, public and non-negative; ``None`` = uniform.
        center: subtract ``(k + 1) / (2k)`` (post-processing).
        generator: int seed, ``torch.Generator`` or ``None``.

    Example:
        >>> import torch
        >>> from torch_geometric.data import Data
        >>> from gnnprivacy.transforms import FeatureRR, privacy_spent
        >>> out = FeatureRR(epsilon=2.0, generator=0)(Data(x=torch.rand(5, 8)))
        >>> out.x.shape, privacy_spent(out)
        (torch.Size([5, 8]), {'feature': 2.0})
    """

    _repr_fields = ("epsilon", "k", "center")

    def __init__(self, *, epsilon: float, k: int = 10, theta=None, center: bool = True,
                 generator=None):
        super().__init__(epsilon=epsilon, generator=generator)
        self.k = check_int("k", k, low=2)
        self.theta = theta
        self.center = bool(center)

    def _release(self, data: Data):
        from gnnprivacy.ldp.heterorr.feature_rr import FeatureRR as Mechanism

        x = self._x(data)
        mech = Mechanism(epsilon=self.epsilon, num_features=x.size(1), k=self.k,
                         theta=self.theta)
        out = mech(x.to(torch.float64), generator=self.torch_rng())
        if self.center:
            out = out - (self.k + 1) / (2 * self.k)
        data.x = out.to(x.dtype)
        return data, (ScopedDpEvent(mech.event, self.unit, self.relation),)


class FeatureLDP(_FeatureTransform):
    """A numeric LDP mechanism on every node's feature vector (HeteroRR's baselines).

    Each row is min-max normalised and mapped to ``[-1, 1]``. ``"multibit"`` (LPGNN) encodes
    the whole vector at ``epsilon`` and rectifies it (unbiased); the others (``"duchi"``,
    ``"piecewise"``, ``"hybrid"``, ``"three-output"``, ``"pm-sub"``) randomise each of the
    ``d`` coordinates at ``epsilon / d`` (unbiased estimates of the mapped values).

    *Privacy*: ``epsilon``-LDP per node's feature vector (basic composition over the
    coordinates); unit ``FEATURE``, relation ``REPLACE``; one pure event per application.

    Args:
        mechanism: one of `FEATURE_LDP_MECHANISMS`.
        epsilon: the node's budget ``> 0``.
        generator: int seed, ``torch.Generator`` or ``None``.

    Raises:
        UnknownNameError: an unknown mechanism (the message lists the choices).

    Example:
        >>> import torch
        >>> import torch_geometric.transforms as T
        >>> from torch_geometric.data import Data
        >>> from gnnprivacy.transforms import EdgeRand, FeatureLDP, privacy_spent
        >>> data = Data(x=torch.rand(30, 4), edge_index=torch.tensor([[0, 1], [1, 2]]))
        >>> pipeline = T.Compose([FeatureLDP("piecewise", epsilon=3.0, generator=0),
        ...                       EdgeRand(epsilon=1.0, generator=1)])
        >>> privacy_spent(pipeline(data))     # two units, never added
        {'feature': 3.0, 'edge': 1.0}
    """

    _repr_fields = ("mechanism", "epsilon")

    def __init__(self, mechanism: str, *, epsilon: float, generator=None):
        if mechanism not in FEATURE_LDP_MECHANISMS:
            raise UnknownNameError("mechanism", mechanism, FEATURE_LDP_MECHANISMS)
        super().__init__(epsilon=epsilon, generator=generator)
        self.mechanism = mechanism

    def _release(self, data: Data):
        from gnnprivacy.ldp.heterorr.feature_rr import normalize_features

        x = self._x(data)
        d = x.size(1)
        signed = 2.0 * normalize_features(x, "row_minmax") - 1.0
        if self.mechanism == "multibit":
            from gnnprivacy.mechanisms.multibit import MultiBit

            mech = MultiBit(epsilon=self.epsilon, num_features=d, lower=-1.0, upper=1.0,
                            clip=True)
            out = mech.rectify(mech(signed, generator=self.torch_rng()))
        else:
            from gnnprivacy.mechanisms.feature_ldp import FEATURE_MECHANISMS

            mech = FEATURE_MECHANISMS[self.mechanism](epsilon=self.epsilon / d)
            out = mech(signed, generator=self.torch_rng())
        data.x = out.to(x.dtype)
        return data, self._events
