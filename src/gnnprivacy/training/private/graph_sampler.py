"""Graph-level DP for the user's own PyG model: the ``"graphs"`` sampler of `make_private`.

::

    pt = gp.make_private(model, optimizer, train_graphs, sampler="graphs", epsilon=8.0)
    for batch in pt.loader:
        optimizer.zero_grad()
        out = model(batch.x, batch.edge_index, batch.batch)   # one row per graph
        F.cross_entropy(out, batch.y).backward()
        optimizer.step()        # per-graph clipping, one noise draw, one ledger entry

The privacy unit is one *graph* (a molecule, a patient's record): the training set is a list
of graphs, and neighbouring training sets differ by one graph added or removed with all its
nodes, edges, features and label. Each step keeps every training graph independently with
probability ``q`` (Poisson sampling); the batch is a PyG ``Batch`` of the kept graphs whose
``batch`` vector is the engine's subgraph vector, so the engine clips each graph's whole
gradient (every layer, every node of the graph) to ``C`` and adds one Gaussian draw. One graph
changes the clipped sum by at most ``C``: the event is the Poisson-subsampled Gaussian
(``dpsgd_event_factory``), as for DP-SGD on independent examples.

A batch has ``x``, ``edge_index`` (local ids; every edge inside one graph), ``edge_attr``
(when the graphs have one), ``y`` (one entry per graph), ``batch``, ``ptr``, ``num_graphs``
(= ``num_subgraphs``) and ``g_id`` (each graph's index in the training list). The graphs of a
batch are ordered by size (the order carries no meaning; the engine then reads each size
class of rows as one block).

The model's output must have one row per graph (pool with ``batch=batch.batch``); an output
with one row per node is refused at ``optimizer.step()``, and pooling without ``batch=``
(which mixes the graphs) is caught by the engine's mixing probe.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from gnnprivacy.accounting.units import PrivacyUnit
from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.training.private.samplers import NodeSubgraphs

__all__ = ["GraphSampler", "check_graphs"]

#: default sampling rate and its bounds on the expected batch (graphs per step)
GRAPH_BATCH_FRACTION, GRAPH_BATCH_LOW, GRAPH_BATCH_HIGH = 1.0 / 16.0, 32, 512


def check_graphs(dataset) -> list:
    """The training graphs of ``dataset`` (a PyG ``Dataset`` or a sequence of ``Data``) as a
    list, each with node features ``x``, an ``edge_index`` and a graph label ``y``.

    Raises:
        InvalidParameterError: not a sequence of graphs, fewer than 2 graphs, a graph without
            features, edges or a label (one line naming the graph and the fix).
    """
    from torch_geometric.data import Data

    if isinstance(dataset, Data) or not isinstance(dataset, Sequence) and not hasattr(
            dataset, "__getitem__"):
        raise InvalidParameterError(
            "dataset", "a PyG Dataset or a list of Data graphs (the training graphs; "
            "sampler='graphs' samples whole graphs)", type(dataset).__name__)
    graphs = [dataset[i] for i in range(len(dataset))]
    if len(graphs) < 2:
        raise InvalidParameterError("dataset", "at least 2 training graphs (the privacy unit "
                                    "is one graph; Poisson sampling over one graph hides "
                                    "nothing)", f"{len(graphs)} graph(s)")
    for i, g in enumerate(graphs):
        if not isinstance(g, Data):
            raise InvalidParameterError("dataset", "a sequence of torch_geometric Data graphs",
                                        f"item {i} of type {type(g).__name__}")
        if getattr(g, "x", None) is None:
            raise InvalidParameterError(
                "dataset", "graphs with node features x (give featureless graphs constant or "
                "degree features first, e.g. torch_geometric.transforms.Constant() or "
                "OneHotDegree(max_degree))", f"graph {i} without x")
        if getattr(g, "y", None) is None:
            raise InvalidParameterError("dataset", "graphs with a label y", f"graph {i} without y")
        if g.y.numel() == 0 or g.y.shape[0] != 1:
            raise InvalidParameterError(
                "dataset", "one label row per graph (y of shape [1] or [1, k]; a node-level "
                "label belongs to the node samplers)", f"graph {i} with y of shape "
                f"{tuple(g.y.shape)}")
        ei = getattr(g, "edge_index", None)
        if ei is not None and ei.numel() and (int(ei.min()) < 0
                                              or int(ei.max()) >= int(g.num_nodes)):
            raise InvalidParameterError(
                "dataset", "edge_index entries in [0, num_nodes) of their own graph (local "
                "node ids)", f"graph {i} with node ids {int(ei.min())}..{int(ei.max())} for "
                f"{int(g.num_nodes)} nodes")
    with_attr = [getattr(g, "edge_attr", None) is not None for g in graphs]
    if any(with_attr) and not all(with_attr):
        raise InvalidParameterError("dataset", "edge_attr on every graph or on none",
                                    f"{sum(with_attr)} of {len(graphs)} graphs with edge_attr")
    return graphs


class GraphSampler(NodeSubgraphs):
    """Poisson sampling of whole graphs: the ``"graphs"`` sampler (graph-level DP-SGD).

    Args:
        sampling_stream: ``"generator"`` (default) or ``"counter"`` (each graph's trial keyed
            by its index in the training list: the single-process reference of
            `gnnprivacy.training.sharded_graphs`; same law, same event).

    Privacy: unit graph, add/remove one training graph; one Poisson-subsampled Gaussian
    event (rate ``q``) per step, sensitivity one clip norm (each graph is one group of the
    engine). The number of training graphs (which sets ``q``) is assumed public.
    """

    name = "graphs"
    unit = PrivacyUnit.GRAPH
    scope = ("the model's parameters: every executed noisy step, for one training graph added "
             "or removed with all its nodes, edges, features and label")
    #: the model must return one row per graph (not per node)
    output = "subgraphs"
    #: every edge of a batch lies inside one graph (`check_graphs` checks each graph's
    #: node ids, and `collate` offsets them by the graph's first row), so the engine skips
    #: re-checking the batch's own, unchanged ``edge_index`` at every step
    edges_inside = True

    def setup(self, data, *, model: torch.nn.Module | None = None,
              generator: torch.Generator | None = None) -> None:
        from torch_geometric.data import Data

        graphs = check_graphs(data)
        self.num_train = len(graphs)
        sizes = torch.tensor([int(g.num_nodes) for g in graphs], dtype=torch.long)
        esizes = torch.tensor([int(g.edge_index.shape[1]) for g in graphs], dtype=torch.long)
        self.num_nodes = int(sizes.sum())
        self.train_nodes = torch.arange(self.num_train)     # the units: graph indices
        self._sizes, self._esizes = sizes, esizes
        self._ptr = torch.cat([torch.zeros(1, dtype=torch.long), sizes.cumsum(0)])
        self._eptr = torch.cat([torch.zeros(1, dtype=torch.long), esizes.cumsum(0)])
        self._x = torch.cat([g.x for g in graphs])
        self._ei = torch.cat([g.edge_index for g in graphs], 1)    # local ids per graph
        self._y = torch.cat([g.y for g in graphs])
        has_attr = getattr(graphs[0], "edge_attr", None) is not None
        self._ea = torch.cat([g.edge_attr for g in graphs]) if has_attr else None
        # the private tensors, for the loop guard: a read outside the batch is refused
        self.source_graphs = graphs
        self.graph = Data(x=self._x, y=self._y, edge_index=self._ei, edge_attr=self._ea)

    def default_batch_size(self) -> int:
        from gnnprivacy.training.defaults import adaptive_batch

        return adaptive_batch(self.num_train, fraction=GRAPH_BATCH_FRACTION,
                              low=GRAPH_BATCH_LOW, high=GRAPH_BATCH_HIGH)

    def _details(self) -> dict:
        return {"num_train_graphs": self.num_train}

    def _nodes_batch(self, nodes: Tensor):
        """The step's batch of the sampled training graphs (`NodeSubgraphs.sample` draws
        them: Poisson from the generator, or each graph's trial keyed by its index with
        ``sampling_stream="counter"``, the single-process reference of a sharded run)."""
        return self.collate(nodes)

    def collate(self, picked: Tensor, g_id: Tensor | None = None):
        """A PyG ``Batch`` of the training graphs ``picked`` (rows of this sampler's arrays),
        ordered by size (stable); ``g_id`` (default ``picked``): their ids in the list of
        training graphs."""
        from torch_geometric.data import Batch

        g_id = picked if g_id is None else g_id
        sizes = self._sizes[picked]
        order = torch.argsort(sizes, stable=True)
        picked, sizes, g_id = picked[order], sizes[order], g_id[order]
        esizes = self._esizes[picked]
        num = int(picked.numel())
        ptr = torch.cat([torch.zeros(1, dtype=torch.long), sizes.cumsum(0)])
        seg = torch.repeat_interleave(torch.arange(num), sizes)
        rows = self._ptr[picked][seg] + torch.arange(seg.numel()) - ptr[:-1][seg]
        eseg = torch.repeat_interleave(torch.arange(num), esizes)
        eptr = torch.cat([torch.zeros(1, dtype=torch.long), esizes.cumsum(0)])
        erows = self._eptr[picked][eseg] + torch.arange(eseg.numel()) - eptr[:-1][eseg]
        edge_index = self._ei[:, erows] + ptr[:-1][eseg]
        fields = dict(x=self._x[rows], edge_index=edge_index, y=self._y[picked], batch=seg,
                      ptr=ptr, g_id=g_id, num_subgraphs=num)
        if self._ea is not None:
            fields["edge_attr"] = self._ea[erows]
        out = Batch(**fields)
        out._num_graphs = num
        return out

    def __repr__(self) -> str:
        stream = "" if self.sampling_stream == "generator" else \
            f"sampling_stream={self.sampling_stream!r}"
        return f"{type(self).__name__}({stream})"
