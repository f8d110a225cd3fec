"""Edge-level DP graph releases as PyG transforms: EdgeRand, LapGraph and EdgeRR.

Thin classes over the functional code: `edge_rand` and `lap_graph`
(`gnnprivacy.mechanisms.edge_dp`, Wu et al., "LinkTeller: Recovering Private Edges from Graph
Neural Networks via Influence Analysis", IEEE S&P 2022) and `edge_rr`
(`gnnprivacy.ldp.heterorr.edge_rr`, Tran et al., "Heterogeneous Randomized Response for
Differential Privacy in Graph Neural Networks", IEEE BigData 2022).

*Privacy*: unit ``EDGE``, relation ``ADD_OR_REMOVE`` (neighbouring graphs differ in one edge;
the node set is public). Only ``edge_index`` is replaced: features and labels pass through
unprotected, and `privacy_spent` reports the edge epsilon only.
"""

from __future__ import annotations

import numpy as np
from torch_geometric.data import Data

from gnnprivacy._validation import (check_choice, check_int, check_positive, check_probability,
                                   check_real)
from gnnprivacy.accounting.units import NeighboringRelation, PrivacyUnit
from gnnprivacy.transforms.base import PrivatizingTransform
from gnnprivacy.mechanisms.edge_dp import (MAX_EDGES, edge_rand, edge_rand_events, lap_graph,
                                           lap_graph_events)

__all__ = ["EdgeRR", "EdgeRand", "LapGraph"]


class _EdgeTransform(PrivatizingTransform):
    unit = PrivacyUnit.EDGE
    relation = NeighboringRelation.ADD_OR_REMOVE


class EdgeRand(_EdgeTransform):
    """EdgeRand: randomized response on every unordered node pair.

    Each pair's presence is flipped with probability ``1 / (1 + e^epsilon)``; the release is
    built sparsely (no ``N x N`` matrix). Wu et al., IEEE S&P 2022.

    *Privacy*: ``epsilon``-edge-DP, unit ``EDGE``, relation ``ADD_OR_REMOVE``; one pure event
    per application.

    Args:
        epsilon: the budget ``> 0``.
        generator: int seed, ``numpy.random.Generator`` or ``None`` (OS entropy).
        max_edges: refuse a budget whose expected output exceeds this many edges.

    Example:
        >>> import torch
        >>> import torch_geometric.transforms as T
        >>> from torch_geometric.data import Data
        >>> from gnnprivacy.transforms import EdgeRand, privacy_spent
        >>> data = Data(x=torch.rand(20, 3), edge_index=torch.tensor([[0, 1, 2], [1, 2, 3]]))
        >>> out = T.Compose([T.ToUndirected(), EdgeRand(epsilon=2.0, generator=0)])(data)
        >>> privacy_spent(out)
        {'edge': 2.0}
    """

    def __init__(self, *, epsilon: float, generator=None, max_edges: int = MAX_EDGES):
        super().__init__(generator=generator)
        self._events = tuple(edge_rand_events(epsilon))          # validates epsilon
        self.epsilon = float(epsilon)
        self.max_edges = check_int("max_edges", max_edges, low=1)

    def _release(self, data: Data) -> Data:
        data.edge_index = edge_rand(data.edge_index, data.num_nodes, epsilon=self.epsilon,
                                    generator=self.numpy_rng(), max_edges=self.max_edges)
        return data, self._events


class LapGraph(_EdgeTransform):
    """LapGraph: the ``T`` largest Laplace-noised adjacency entries become the edges.

    ``T = |E| + Laplace(1 / eps1)`` with ``eps1 = count_share * epsilon``; every pair gets
    ``Laplace(1 / eps2)`` noise, ``eps2 = epsilon - eps1`` (sparse, exact law). Wu et al.,
    IEEE S&P 2022.

    *Privacy*: ``epsilon``-edge-DP by sequential composition, unit ``EDGE``, relation
    ``ADD_OR_REMOVE``; two pure events (count, entries) per application.

    Args:
        epsilon: the budget ``> 0``.
        count_share: share of the budget spent on the edge count (0.01 in LinkTeller).
        generator: int seed, ``numpy.random.Generator`` or ``None``.

    Example:
        >>> import torch
        >>> from torch_geometric.data import Data
        >>> from gnnprivacy.transforms import LapGraph, privacy_spent
        >>> data = Data(edge_index=torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]]), num_nodes=40)
        >>> privacy_spent(LapGraph(epsilon=4.0, generator=0)(data))
        {'edge': 4.0}
    """

    _repr_fields = ("epsilon", "count_share")

    def __init__(self, *, epsilon: float, count_share: float = 0.01, generator=None):
        super().__init__(generator=generator)
        self.count_share = check_real("count_share", count_share, low=0.0, high=1.0,
                                      low_open=True, high_open=True)
        self._events = tuple(lap_graph_events(epsilon, self.count_share))   # validates epsilon
        self.epsilon = float(epsilon)

    def _release(self, data: Data) -> Data:
        data.edge_index = lap_graph(data.edge_index, data.num_nodes, epsilon=self.epsilon,
                                    generator=self.numpy_rng(), count_share=self.count_share)
        return data, self._events


class EdgeRR(_EdgeTransform):
    """EdgeRR (HeteroRR's edge side): private edges resampled from a fitted private HRG.

    Each undirected edge is declared private with probability ``private_edge_frac`` (the
    others are public and kept). A dendrogram is fitted by MCMC (exponential mechanism,
    ``split * epsilon``), its private connection counts get Laplace noise (the rest of the
    budget), and private edges are sampled from the noisy probabilities. Tran et al., IEEE
    BigData 2022, with the corrections of `edge_rr` (``mode="sound"``: joint acceptance,
    ``c_em = 2``, every node a possible endpoint of a private edge).

    *Privacy*: ``epsilon``-edge-DP for one **private** edge (public edges and which edges are
    private are not protected), unit ``EDGE``, relation ``ADD_OR_REMOVE``; two pure events
    per application. The MCMC term holds at the chain's stationarity (``guarantee
    "asymptotic"``; ``mode="paper"`` is ``"unsupported"``), recorded in ``info_``.

    Args:
        epsilon: the budget ``eps_e > 0``.
        private_edge_frac: the share of edges declared private (0.3 as in the paper's runs).
        split: ``eps_e1 / eps_e`` for the MCMC, in ``(0, 1)``.
        mode: ``"sound"`` (default) or ``"paper"``.
        mcmc_steps: MCMC moves (default ``ceil(50 n / 65536) * 65536``).
        generator: int seed, ``numpy.random.Generator`` or ``None``.

    Attributes:
        info_: what the last release did (guarantee, edge counts, MCMC acceptance).

    Example:
        >>> import torch
        >>> import torch_geometric.transforms as T
        >>> from torch_geometric.data import Data
        >>> from gnnprivacy.transforms import EdgeRR, privacy_spent
        >>> g = torch.Generator().manual_seed(0)
        >>> data = Data(edge_index=torch.randint(0, 50, (2, 200), generator=g), num_nodes=50)
        >>> edge_rr = EdgeRR(epsilon=2.0, mcmc_steps=500, generator=0)
        >>> released = T.Compose([T.ToUndirected(), edge_rr])(data)
        >>> privacy_spent(released), edge_rr.info_["guarantee"]
        ({'edge': 2.0}, 'asymptotic')
    """

    _repr_fields = ("epsilon", "private_edge_frac", "mode")

    def __init__(self, *, epsilon: float, private_edge_frac: float = 0.3, split: float = 0.5,
                 mode: str = "sound", mcmc_steps: int | None = None, generator=None):
        super().__init__(generator=generator)
        from gnnprivacy.ldp.heterorr.hrg import MODES

        self.epsilon = check_positive("epsilon", epsilon)
        self.private_edge_frac = check_probability("private_edge_frac", private_edge_frac,
                                                   allow_zero=False)
        self.split = check_real("split", split, low=0.0, high=1.0, low_open=True,
                                high_open=True)
        self.mode = check_choice("mode", mode, MODES)
        self.mcmc_steps = None if mcmc_steps is None else check_int("mcmc_steps", mcmc_steps,
                                                                    low=0)
        self._events = (*edge_rand_events(self.split * self.epsilon),      # the same pure
                        *edge_rand_events((1 - self.split) * self.epsilon))  # EDGE events
        self.info_: dict = {}

    def _release(self, data: Data) -> Data:
        from gnnprivacy.ldp.heterorr.edge_rr import edge_rr, split_edges

        rng: np.random.Generator = self.numpy_rng()
        pub, pri = split_edges(data.edge_index, data.num_nodes,
                               private_frac=self.private_edge_frac, rng=rng)
        out = edge_rr(pub, pri, data.num_nodes, epsilon=self.epsilon, generator=rng,
                      split=self.split, mode=self.mode, steps=self.mcmc_steps)
        self.info_ = {"guarantee": out.guarantee, **out.info}
        data.edge_index = out.edge_index
        return data, tuple(out.events)
