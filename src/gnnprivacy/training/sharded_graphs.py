r"""Graph-level DP with the list of graphs sharded over the ranks (``sampler="graphs"`` of
`gnnprivacy.training.sharded.make_private_sharded`, and ``train-sharded`` on graph shards).

Each rank ``k`` holds part ``k`` of `gnnprivacy.datasets.graph_shards.partition_graph_list`
(its graphs' features, edges and labels) and the global maps. Per step:

1. **sampling**: every training graph's trial is keyed by ``(seed, step, its index in the list
   of training graphs)`` (the counter stream of the node samplers; the seed is rank 0's,
   broadcast once): rank ``k`` draws the trials of its own training graphs, so the union over
   the ranks is exactly the Poisson sample of one process running
   ``GraphSampler(sampling_stream="counter")`` on the training list, and no graph is drawn by
   two ranks (a graph lives in one part: `open_graph_shard` checks that its part holds only
   the graphs ``owner.npy`` gives it);
2. **clipping**: each rank clips every one of its sampled graphs' whole gradient (the graph is
   one group of the engine);
3. **noise and release**: rank 0 adds ONE draw of ``N(0, σ² I)``; one ``all_reduce`` sums; every
   rank takes the same step and composes one Poisson-subsampled Gaussian event.

Nothing crosses between ranks but the reduction (a graph is whole on its rank). A batch exposes
``g_id`` (each graph's index in the training list, as in one process) and ``batch``.

*Privacy.* The single-process ``sampler="graphs"`` run's with the counter stream and the same
seed: unit graph, add/remove one training graph, one event per executed step; the ranks are one
trusted party (inside the reduction a rank sees the others' clipped sums).
"""

from __future__ import annotations

import numpy as np
import torch
import torch.distributed as dist
from torch import Tensor
from torch_geometric.data import Data

from gnnprivacy.datasets.graph_shards import GraphShard, open_graph_shard
from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.training.distributed import rank_and_world
from gnnprivacy.training.private.graph_sampler import GraphSampler
from gnnprivacy.training.sharded_parts import collective_guard, open_part, rank_zero_seed

__all__ = ["ShardedGraphSampler", "score_graph_parts"]


class ShardedGraphSampler(GraphSampler):
    """`GraphSampler` on this rank's part of graph shards (``sampler="graphs"`` of
    `make_private_sharded`): the part's training graphs whose keyed trial hits; the rate is
    the global one (``batch_size`` over every part's training graphs)."""

    opener = staticmethod(open_graph_shard)

    def __init__(self, *, sampling_stream: str = "counter"):
        if sampling_stream != "counter":
            raise InvalidParameterError("sampling_stream", "'counter' (sharded sampling keys "
                                        "every trial by graph)", sampling_stream)
        super().__init__(sampling_stream="counter")

    def setup(self, data: GraphShard, *, model: torch.nn.Module | None = None,
              generator: torch.Generator | None = None) -> None:
        if not isinstance(data, GraphShard):
            raise InvalidParameterError("shards", "graph shards (gnnprivacy partition of a "
                                        "graph list or graph dataset)", type(data).__name__)
        index = data.train_index()
        rows = np.flatnonzero(index >= 0)
        node_ptr = torch.from_numpy(np.asarray(data.node_ptr, dtype=np.int64).copy())
        edge_ptr = torch.from_numpy(np.asarray(data.edge_ptr, dtype=np.int64).copy())
        r = torch.from_numpy(rows)
        self.num_train = self.num_graphs = data.num_train
        self._group_of, self.group_size = None, 1       # the unit is one graph
        self.train_nodes = torch.from_numpy(index[rows])    # keys: training-list indices
        self._ptr, self._eptr = node_ptr[r], edge_ptr[r]     # the training graphs' starts
        self._sizes = node_ptr[r + 1] - node_ptr[r]
        self._esizes = edge_ptr[r + 1] - edge_ptr[r]
        self._x = torch.from_numpy(np.array(data.x))
        self._ei = torch.from_numpy(np.array(data.edge_index, dtype=np.int64))
        self._y = torch.from_numpy(np.array(data.y, dtype=np.int64))[r]
        self._ea = None if data.edge_attr is None else torch.from_numpy(np.array(data.edge_attr))
        self.num_nodes = int(self._x.shape[0])
        self.graph = Data(x=self._x, y=self._y, edge_index=self._ei, edge_attr=self._ea)
        self.source_graphs = [self.graph]        # the private tensors, for the loop guard

    def _stream_seed(self, generator: torch.Generator) -> int:
        return rank_zero_seed(generator)

    def _nodes_batch(self, nodes: Tensor):
        """This rank's sampled training graphs (``nodes``: their training-list indices)."""
        return self.collate(torch.searchsorted(self.train_nodes, nodes), g_id=nodes)

    def graph_rows(self, g_id: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """`GraphSampler.graph_rows` of training graphs named by their training-list
        indices (this part's rows found by their keys)."""
        rows = torch.searchsorted(self.train_nodes, g_id)
        if bool((rows >= self.train_nodes.numel()).any()) or not bool(
                (self.train_nodes[rows.clamp(max=self.train_nodes.numel() - 1)] == g_id).all()):
            raise KeyError("a graph id that is not a training graph of this part")
        return self._ptr[rows], self._sizes[rows], rows


def score_graph_parts(model: torch.nn.Module, shards) -> dict[str, float]:
    """Accuracy on the training, validation and test graphs of every part (every rank calls
    it; the counts are all-reduced, the result is the same on every rank). Without a split in
    the shards ``test_accuracy`` is NaN (``num_test`` 0).

    Privacy: none spent (evaluation of the released model).
    """
    from gnnprivacy.training.graph_classification import graph_logits

    shard = open_part(shards, open_graph_shard)
    ids = np.asarray(shard.graphs, dtype=np.int64)
    masks = {"train": shard.train_mask, **{m[:-5]: v for m, v in (shard.masks or {}).items()}}
    names = ["train", *(m for m in ("val", "test") if m in masks)]
    counts = torch.zeros(len(names), 2, dtype=torch.float64)
    for i, name in enumerate(names):
        rows = np.flatnonzero(np.asarray(masks[name], dtype=bool)[ids])
        graphs = shard.graph_list(rows)
        if graphs:
            y = torch.cat([g.y.view(-1)[:1] for g in graphs])
            hit = graph_logits(model, graphs).argmax(1) == y
            counts[i] = torch.tensor([float(hit.sum()), float(len(graphs))])
    if rank_and_world()[1] > 1:
        with collective_guard("scoring"):
            dist.all_reduce(counts)
    out = {f"{n}_accuracy": float(c[0] / c[1]) if c[1] else float("nan")
           for n, c in zip(names, counts)}
    out["num_test"] = int(counts[names.index("test"), 1]) if "test" in names else 0
    out.setdefault("test_accuracy", float("nan"))     # no test graphs in the shards
    return out
