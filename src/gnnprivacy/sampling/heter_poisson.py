"""HeterPoisson sub-graph sampling (Xiang, Wang & Wang, S&P 2024, Alg. 2 and 3; spec 000 §3.1-3.2).

One step:

```
central_i  ~ Bernoulli(q_b)                        for i in Cand          (independent)
keep_{i,j} ~ Bernoulli(min(1, M / D_ot(j)))        for j in NB(i) ∩ Elig, j != i
drop j from every sub-graph if j is itself central  (enforce_no_overlap, note (a))
```

``D_ot(j)`` is ``j``'s out-degree in the WHOLE graph ``G`` (self-loops removed), a public
quantity under the paper's neighbouring relation. When all of ``j``'s out-neighbours are
central candidates, ``j`` is a peripheral ``k ~ Binomial(D_ot(j), q_b min(1, M / D_ot(j)))``
times per step (before overlap removal), i.e. ``q_b min(M, D_ot(j))`` times on average.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from gnnprivacy._validation import check_real
from gnnprivacy.accounting.units import NeighboringRelation, PrivacyUnit
from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.sampling._graph import clean_graph, gather_segments, node_mask
from gnnprivacy.sampling.counter_rng import CounterRandom, uniform_like
from gnnprivacy.sampling.minibatch import poisson_subset
from gnnprivacy.sampling.star_batch import StarBatch

#: counter-mode stream ids (domain separation between the two kinds of trials)
STREAM_CENTRAL = 1
STREAM_NEIGHBOR = 2

_WHERE = "HeterPoissonSampler"


def _check_torch_generator(generator: object) -> None:
    if not isinstance(generator, torch.Generator):
        raise InvalidParameterError("generator", "a torch.Generator or a CounterRandom",
                                    type(generator).__name__, where=f"{_WHERE}.sample")


class HeterPoissonSampler:
    """Poisson sampling of star sub-graphs with out-degree-aware neighbour sampling.

    Reference: Z. Xiang, T. Wang, D. Wang, "Preserving Node-level Privacy in Graph Neural
    Networks", IEEE S&P 2024, Algorithms 2 (HeterPoisson) and 3 (NeighborSampling).

    Each call to `sample` is one training step: every central candidate ``i`` becomes
    a centre with probability ``q_b``; each in-neighbour ``j`` of a centre with ``j`` in
    ``eligible`` and ``j != i`` is kept independently with probability
    ``p_j = min(1, M / D_ot(j))``; with ``enforce_no_overlap`` (default) every peripheral that
    is a centre of the same step (any sub-graph, not only earlier ones: spec 000 §9 A9) is
    REMOVED from the sub-graph, row and edge (note (a)), so a central node influences only its
    own sub-graph. ``enforce_no_overlap=False`` is the §3.6 ablation.

    Graph handling: self-loops are removed before ``NB`` and ``D_ot`` are computed (a node is
    never its own peripheral), duplicate edges are merged. An isolated centre (no eligible
    in-neighbour) gives a centre-only sub-graph; it is never filled with other nodes. An
    empty step gives an empty `StarBatch` (the training step must still add noise).

    Privacy:
        Unit: node (features, label, all in- and out-edges). Relation: add/remove of one
        sensitive (candidate) node inside a fixed whole graph ``G`` whose degrees are public
        (spec 000 §2.3, scenario S2). The sampler emits no event itself; the trainer records,
        for every executed step, the mixture-of-Gaussians event of spec 000 §4.1 (or §4.6
        without overlap removal) built from `accounting_params`. The neighbouring input
        ``G* = G' - z`` is the same ``edge_index`` (the whole graph ``G``) with ``z`` taken out
        of ``candidates`` and ``eligible``; with a `CounterRandom` every trial not
        involving ``z`` is then identical (spec 000 §3.2 (h), check S5).

    Args:
        edge_index: (2, E) int tensor of the whole graph ``G``; column ``(j, i)`` means ``i``
            aggregates ``j``.
        num_nodes: number of nodes of ``G``.
        candidates: central candidates ``Cand`` (the sensitive training nodes), a bool mask
            (N,) or a tensor of ids.
        eligible: peripheral-eligible nodes ``Elig`` (mask or ids).
        q_b: central sampling rate, in (0, 1].
        M: neighbour multiplier, >= 1.
        enforce_no_overlap: remove central nodes from other sub-graphs (default True).

    Raises:
        InvalidParameterError: bad ``q_b``, ``M``, node sets, empty candidate set,
            or ``edge_index`` out of range.

    Example:
        >>> import torch
        >>> from gnnprivacy.datasets import load_dataset
        >>> from gnnprivacy.sampling import HeterPoissonSampler
        >>> data = load_dataset("csbm", num_nodes=400, seed=0)
        >>> train = data.train_mask.nonzero().view(-1)
        >>> sampler = HeterPoissonSampler(data.edge_index, data.num_nodes, candidates=train,
        ...                               eligible=torch.ones(400, dtype=torch.bool), q_b=0.1, M=1.0)
        >>> batch = sampler.sample(torch.Generator().manual_seed(0))   # star subgraphs
        >>> batch.num_subgraphs == batch.centers.numel()
        True
    """

    def __init__(self, edge_index: Tensor, num_nodes: int, *, candidates: Tensor, eligible: Tensor,
                 q_b: float, M: float, enforce_no_overlap: bool = True) -> None:
        self.q_b = check_real("q_b", q_b, low=0.0, high=1.0, low_open=True, where=_WHERE)
        self.M = check_real("M", M, low=1.0, where=_WHERE)
        if math.isinf(self.M):
            raise InvalidParameterError("M", "a finite real >= 1", M, where=_WHERE)
        if not isinstance(enforce_no_overlap, bool):
            raise InvalidParameterError("enforce_no_overlap", "a bool", enforce_no_overlap, where=_WHERE)
        self.enforce_no_overlap = enforce_no_overlap
        graph = clean_graph(edge_index, num_nodes, where=_WHERE)
        self.graph = graph
        self.num_nodes = graph.num_nodes
        self.candidate_mask = node_mask(candidates, self.num_nodes, name="candidates", where=_WHERE)
        self.eligible_mask = node_mask(eligible, self.num_nodes, name="eligible", where=_WHERE)
        self.candidate_nodes = self.candidate_mask.nonzero().flatten()
        if self.candidate_nodes.numel() == 0:
            raise InvalidParameterError("candidates", "a non-empty set of central candidates",
                                        "an empty set", where=_WHERE)
        self.out_degree = graph.out_degree()
        self._build_candidate_edges()

    def _build_candidate_edges(self) -> None:
        """Keep the edges ``j -> i`` with ``i`` a candidate and ``j`` eligible (CSR over i)."""
        g = self.graph
        keep = self.candidate_mask[g.dst] & self.eligible_mask[g.src]
        self._src, dst = g.src[keep], g.dst[keep]
        self._rowptr = torch.zeros(self.num_nodes + 1, dtype=torch.long)
        self._rowptr[1:] = torch.cumsum(torch.bincount(dst, minlength=self.num_nodes), 0)
        self._keep_prob = self._peripheral_probability(self._src)

    def _peripheral_probability(self, src: Tensor) -> Tensor:
        """``min(1, M / D_ot(j))`` per candidate edge (``D_ot(j) >= 1`` since ``j -> i`` exists)."""
        return torch.clamp(self.M / self.out_degree[src].to(torch.float64), max=1.0)

    @property
    def max_out_degree(self) -> int:
        """``D_max(G)``: the largest out-degree in the whole graph ``G`` (all nodes).

        Taken over every node of ``G`` (not only the candidates present), so it does not
        change when one sensitive node is added or removed: it is a function of the public
        degree sequence only (spec 000 §9 A2, option ``d_max="graph"``).
        """
        return int(self.out_degree.max()) if self.num_nodes else 0

    def out_degree_histogram(self) -> Tensor:
        """``hist[d]`` = number of nodes of ``G`` with ``D_ot = d`` (public, like ``D_max``)."""
        return torch.bincount(self.out_degree)

    def accounting_params(self) -> dict:
        """What the HeterPoisson accountant needs (spec 000 §4.1/§4.6), plus context.

        ``max_out_degree`` is ``D_max(G)``; using it instead of ``num_nodes - 1`` is sound only
        when the degree sequence of ``G`` is public (spec 000 §9 A2: the accountant's default
        maximises over ``D <= num_nodes - 1``); ``out_degrees`` are the distinct ``D_ot`` values
        of ``G`` (same caveat). ``enforce_no_overlap`` selects the §4.1 mixture (True) or the
        §4.6 ablation mixture (False).
        """
        out_degrees = tuple(int(d) for d in torch.unique(self.out_degree))
        return {"q_b": self.q_b, "M": self.M, "max_out_degree": self.max_out_degree,
                "out_degrees": out_degrees,
                "enforce_no_overlap": self.enforce_no_overlap, "num_nodes": self.num_nodes,
                "num_candidates": int(self.candidate_nodes.numel()),
                "expected_batch_size": self.q_b * int(self.candidate_nodes.numel()),
                "unit": PrivacyUnit.NODE, "relation": NeighboringRelation.ADD_OR_REMOVE}

    def sample(self, generator: torch.Generator | CounterRandom) -> StarBatch:
        """Draw the sub-graphs of one step.

        Args:
            generator: a ``torch.Generator`` (training), or a `CounterRandom` at step
                ``t`` for the coupling of spec 000 §3.2 (h): central trial keyed by
                ``(seed, t, i)``, neighbour trial by ``(seed, t, i, j)``.

        Returns:
            A `StarBatch`, centres ascending, peripherals grouped by sub-graph.
        """
        cand = self.candidate_nodes
        if isinstance(generator, CounterRandom):            # keyed trial per candidate
            centers = cand[uniform_like(generator, STREAM_CENTRAL, cand) < self.q_b]
        else:                                               # O(batch): binomial count + subset
            _check_torch_generator(generator)
            centers = cand[poisson_subset(cand.numel(), self.q_b, generator)]
        edge_ids, sub = gather_segments(self._rowptr, centers)
        src = self._src[edge_ids]
        if isinstance(generator, CounterRandom):
            u = generator.uniform(STREAM_NEIGHBOR, centers[sub], src)
        else:
            u = uniform_like(generator, STREAM_NEIGHBOR, src)
        kept = (u < self._keep_prob[edge_ids]).nonzero().flatten()
        src, sub = src[kept], sub[kept]
        if self.enforce_no_overlap and centers.numel() and src.numel():
            pos = torch.searchsorted(centers, src).clamp_(max=centers.numel() - 1)
            not_center = (centers[pos] != src).nonzero().flatten()   # centres are ascending
            src, sub = src[not_center], sub[not_center]
        return StarBatch(centers, src, sub, int(centers.numel()))

    def __repr__(self) -> str:
        return (f"HeterPoissonSampler(num_nodes={self.num_nodes}, num_edges={self.graph.num_edges}, "
                f"num_candidates={int(self.candidate_nodes.numel())}, "
                f"num_eligible={int(self.eligible_mask.sum())}, q_b={self.q_b:g}, M={self.M:g}, "
                f"enforce_no_overlap={self.enforce_no_overlap})")
