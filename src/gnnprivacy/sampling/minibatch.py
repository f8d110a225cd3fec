"""Minibatch samplers over a fixed item set (training nodes / sub-graphs).

* ``sampling="fixed"``: a uniformly random subset of exactly ``m`` distinct items, drawn
  fresh each step (never with replacement; spec 002 §8 A12). For a fixed set of ``d``
  items, ``|S ∩ B| ~ Hypergeometric(N, d, m)`` (Lemma 3): the hypergeometric accountant.
* ``sampling="poisson"``: each item independently with probability ``q = m / N``, so
  ``|S ∩ B| ~ Binomial(d, q)``: the binomial accountant (spec 002 §4.4 [EXT]) and, for
  DP-MLP, the standard Poisson-subsampled Gaussian (Mironov et al. 2019).
"""

from __future__ import annotations

import torch
from torch import Tensor

from gnnprivacy._validation import check_choice, check_int, check_real
from gnnprivacy.errors import InvalidParameterError

SAMPLING_MODES = ("fixed", "poisson")


def _check_generator(generator: object, where: str) -> torch.Generator:
    if not isinstance(generator, torch.Generator):
        raise InvalidParameterError("generator", "a torch.Generator", type(generator).__name__, where=where)
    return generator


def uniform_subset(num_items: int, size: int, generator: torch.Generator) -> Tensor:
    """A uniformly random ``size``-subset of ``0..num_items-1``, in uniformly random order,
    in O(size) expected time and memory (never a permutation of all items when
    ``size <= num_items / 2``).

    iid uniform draws are taken in rounds and the first ``size`` distinct values, in order
    of first appearance, are returned: by exchangeability that set is a uniform subset and
    its order a uniform order. Above ``num_items / 2`` a permutation costs O(size) anyway.
    """
    if size <= 0:
        return torch.zeros(0, dtype=torch.long)
    if 2 * size > num_items:
        return torch.randperm(num_items, generator=generator)[:size]
    draws = torch.zeros(0, dtype=torch.long)
    while True:
        need = size - (int(torch.unique(draws).numel()) if draws.numel() else 0)
        if need <= 0:
            break
        extra = need + need // 2 + 16
        draws = torch.cat([draws, torch.randint(num_items, (extra,), generator=generator)])
    values, inverse = torch.unique(draws, return_inverse=True)
    first = torch.full((values.numel(),), draws.numel(), dtype=torch.long)
    first.scatter_reduce_(0, inverse, torch.arange(draws.numel()), reduce="amin")
    order = torch.argsort(first)[:size]
    return values[order]


def poisson_subset(num_items: int, rate: float, generator: torch.Generator) -> Tensor:
    """Poisson sampling of ``0..num_items-1`` at ``rate``, ascending, in O(batch) time.

    Exactly the distribution of ``nonzero(rand(num_items) < rate)``: the count is
    ``Binomial(num_items, rate)`` and, given the count, the subset is uniform.
    """
    if rate >= 1.0:
        return torch.arange(num_items)
    if num_items == 0 or rate <= 0.0:
        return torch.zeros(0, dtype=torch.long)
    count = int(torch.binomial(torch.tensor([float(num_items)], dtype=torch.float64),
                               torch.tensor([float(rate)], dtype=torch.float64),
                               generator=generator).item())
    return torch.sort(uniform_subset(num_items, count, generator)).values


def poisson_node_batch(nodes: Tensor, *, rate: float, generator: torch.Generator) -> Tensor:
    """Poisson-subsample ``nodes``: keep each independently with probability ``rate``.

    Used by DP-MLP (spec 002 §3.8, naive DP-SGD in spec 000 §3.9), where each node affects
    exactly one loss term.

    Privacy:
        Unit node (or example), relation add/remove. The batch may be empty; the trainer
        records one Poisson-subsampled Gaussian event (sampling probability ``rate``) per
        executed step.

    Args:
        nodes: 1-D tensor of node ids (or any items).
        rate: sampling probability in (0, 1].
        generator: a ``torch.Generator``.

    Returns:
        The kept entries of ``nodes``, in their original order.

    Example:
        >>> import torch
        >>> from gnnprivacy.sampling import poisson_node_batch
        >>> batch = poisson_node_batch(torch.arange(1000), rate=0.05,
        ...                             generator=torch.Generator().manual_seed(0))
        >>> 20 < batch.numel() < 80                     # about 50 nodes
        True
    """
    where = "poisson_node_batch"
    q = check_real("rate", rate, low=0.0, high=1.0, low_open=True, where=where)
    _check_generator(generator, where)
    if not isinstance(nodes, Tensor) or nodes.dim() != 1:
        raise InvalidParameterError("nodes", "a 1-D tensor", type(nodes).__name__, where=where)
    return nodes[poisson_subset(nodes.numel(), q, generator)]


class NodeBatchSampler:
    """Per-step minibatches of positions ``0..num_items-1`` (e.g. rows of ``BoundedSubgraphs``).

    Reference: Daigavane et al., DP-GNN, Algorithm 1 line "B_t <- uniform subset of size m"
    and Lemma 3 (hypergeometric); Poisson variant: spec 002 §4.4 [EXT].

    Privacy:
        Unit node, relation replace-one for DP-GNN. The sampler emits no event; the trainer
        records per executed step the event named by `accounting_params` ("fixed":
        hypergeometric ``HG(N, K+1, m)``; "poisson": binomial ``Bin(K+1, m/N)``).

    Args:
        num_items: ``N`` (number of training nodes).
        batch_size: ``m`` in [1, N] (expected size under Poisson sampling).
        sampling: "fixed" (default, the paper) or "poisson".

    Example:
        >>> import torch
        >>> from gnnprivacy.sampling import NodeBatchSampler
        >>> sampler = NodeBatchSampler(1000, batch_size=100)        # uniform 100-subsets
        >>> sampler.sample_rate, sampler.sample(torch.Generator().manual_seed(0)).numel()
        (0.1, 100)
    """

    def __init__(self, num_items: int, *, batch_size: int, sampling: str = "fixed") -> None:
        where = "NodeBatchSampler"
        self.num_items = check_int("num_items", num_items, low=1, where=where)
        self.batch_size = check_int("batch_size", batch_size, low=1, high=self.num_items, where=where)
        self.sampling = check_choice("sampling", sampling, SAMPLING_MODES)

    @property
    def sample_rate(self) -> float:
        """``m / N``: the inclusion probability of every item in both modes."""
        return self.batch_size / self.num_items

    def sample(self, generator: torch.Generator) -> Tensor:
        """Positions of one step's batch (int64, ascending for Poisson, random order for fixed),
        drawn in O(batch) time (`uniform_subset`, `poisson_subset`)."""
        _check_generator(generator, "NodeBatchSampler.sample")
        if self.sampling == "fixed":
            return uniform_subset(self.num_items, self.batch_size, generator)
        return poisson_subset(self.num_items, self.sample_rate, generator)

    def accounting_params(self) -> dict:
        """``num_train``, ``batch_size``, ``sample_rate`` and ``sampling`` for the accountant."""
        return {"num_train": self.num_items, "batch_size": self.batch_size,
                "sample_rate": self.sample_rate, "sampling": self.sampling}

    def __repr__(self) -> str:
        return (f"NodeBatchSampler(num_items={self.num_items}, batch_size={self.batch_size}, "
                f"sampling={self.sampling!r})")
