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

*Units are what the user thinks.* The guarantee is per *entry* of the training list. When
one individual holds several entries (a patient's several scans, a copy of one molecule),
``GraphSampler(groups=ids)`` makes the individual the unit: ``ids[i]`` names the individual
of graph ``i``; a step keeps each individual with probability ``q`` together with all its
graphs, each graph is still clipped to ``C``, and the noise is scaled to the largest group
``k`` (one individual moves the clipped sum by at most ``k C``), so the epsilon is per
individual. Entries that are the same graph (one object listed twice, or equal tensors)
without ``groups=`` get a `DuplicateGraphWarning` naming them.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from gnnprivacy.accounting.units import PrivacyUnit
from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.training.private.samplers import NodeSubgraphs

__all__ = ["DuplicateGraphWarning", "GraphSampler", "check_graphs", "duplicate_graphs"]

#: default sampling rate and its bounds on the expected batch (graphs per step)
GRAPH_BATCH_FRACTION, GRAPH_BATCH_LOW, GRAPH_BATCH_HIGH = 1.0 / 16.0, 32, 512


def check_graphs(dataset) -> list:
    """The training graphs of ``dataset`` (a PyG ``Dataset`` or a sequence of ``Data``) as a
    list, each with node features ``x``, an ``edge_index`` and a graph label ``y``.

    Raises:
        InvalidParameterError: not a sequence of graphs, fewer than 2 graphs, or a graph that
            `gnnprivacy.datasets.validate.validate_graphs` refuses (one line naming the graph
            and the fix).
    """
    from torch_geometric.data import Data

    from gnnprivacy.datasets.validate import validate_graphs

    if isinstance(dataset, Data) or not isinstance(dataset, Sequence) and not hasattr(
            dataset, "__getitem__"):
        raise InvalidParameterError(
            "dataset", "a PyG Dataset or a list of Data graphs (the training graphs; "
            "sampler='graphs' samples whole graphs)", type(dataset).__name__)
    try:
        graphs = [dataset[i] for i in range(len(dataset))]
    except (KeyError, TypeError, IndexError) as exc:
        raise InvalidParameterError("dataset", "a PyG Dataset or a list of Data graphs",
                                    f"{type(dataset).__name__} ({type(exc).__name__}: {exc})"
                                    ) from None
    if len(graphs) < 2:
        raise InvalidParameterError("dataset", "at least 2 training graphs (the privacy unit "
                                    "is one graph; Poisson sampling over one graph hides "
                                    "nothing)", f"{len(graphs)} graph(s)")
    validate_graphs(graphs)    # features, edges, labels and edge features of every graph
    return graphs


class DuplicateGraphWarning(UserWarning):
    """Training graphs that are the same graph (one object twice, or equal tensors): the
    guarantee covers each entry, so an individual behind several entries is protected only
    as several units (group them with ``GraphSampler(groups=...)``)."""


def duplicate_graphs(graphs: list) -> list[list[int]]:
    """The sets (of two entries or more) of training graphs that are the same graph: the
    same object, or equal ``x``, ``edge_index``, ``edge_attr`` and ``y``."""
    import hashlib

    def digest(g) -> str:
        h = hashlib.sha256()
        for key in ("x", "edge_index", "edge_attr", "y"):
            t = getattr(g, key, None)
            h.update(key.encode())
            if t is not None:
                t = t.detach().cpu().contiguous()
                h.update(str((tuple(t.shape), t.dtype)).encode())
                h.update(t.numpy().tobytes())
        return h.hexdigest()

    seen: dict[str, list[int]] = {}
    for i, g in enumerate(graphs):
        seen.setdefault(digest(g), []).append(i)
    return [ids for ids in seen.values() if len(ids) > 1]


def _float_dtype(model: torch.nn.Module | None, x: Tensor) -> torch.dtype:
    """The dtype floating-point features are given in: the model's floating parameters'
    (a float64 graph for a float32 model, or graphs of mixed float dtypes, are converted once
    here rather than failing in the user's forward), else the first graph's."""
    for p in (model.parameters() if model is not None else ()):
        if p.is_floating_point():
            return p.dtype
    return x.dtype


class GraphSampler(NodeSubgraphs):
    """Poisson sampling of whole graphs: the ``"graphs"`` sampler (graph-level DP-SGD).

    Args:
        groups: optional, one id per training graph (any hashable values, or an integer
            tensor): graphs with one id belong to one individual, which becomes the unit
            (see the module docstring); ``batch_size`` then counts individuals.
        sampling_stream: ``"generator"`` (default) or ``"counter"`` (each unit's trial keyed
            by its index: the single-process reference of
            `gnnprivacy.training.sharded_graphs`; same law, same event).

    Privacy: unit graph (or, with ``groups``, one individual with all its graphs),
    add/remove; one Poisson-subsampled Gaussian event (rate ``q``) per step, sensitivity
    one clip norm per graph of the unit (each graph is one subgraph of the engine; the
    noise is scaled to the largest group). The number of training graphs (and groups),
    which sets ``q``, is assumed public.
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

    def __init__(self, *, groups=None, sampling_stream: str = "generator"):
        super().__init__(sampling_stream=sampling_stream)
        self.groups = groups

    def setup(self, data, *, model: torch.nn.Module | None = None,
              generator: torch.Generator | None = None) -> None:
        from torch_geometric.data import Data

        graphs = check_graphs(data)
        self._set_groups(graphs)
        sizes = torch.tensor([int(g.num_nodes) for g in graphs], dtype=torch.long)
        esizes = torch.tensor([int(g.edge_index.shape[1]) for g in graphs], dtype=torch.long)
        self.num_nodes = int(sizes.sum())
        self.train_nodes = torch.arange(self.num_train)     # the units: graphs or groups
        self._sizes, self._esizes = sizes, esizes
        self._ptr = torch.cat([torch.zeros(1, dtype=torch.long), sizes.cumsum(0)])
        self._eptr = torch.cat([torch.zeros(1, dtype=torch.long), esizes.cumsum(0)])
        dtype = _float_dtype(model, graphs[0].x)
        self._x = torch.cat([g.x.to(dtype) if g.x.is_floating_point() else g.x
                             for g in graphs]).detach()   # data, even if x requires grad
        self._ei = torch.cat([g.edge_index.long() for g in graphs], 1)   # local ids per graph
        self._y = torch.cat([g.y.to(dtype) if g.y.is_floating_point() else g.y for g in graphs])
        has_attr = getattr(graphs[0], "edge_attr", None) is not None
        self._ea = torch.cat([g.edge_attr.to(dtype) if g.edge_attr.is_floating_point()
                              else g.edge_attr for g in graphs]).detach() if has_attr else None
        # the private tensors, for the loop guard: a read outside the batch is refused
        self.source_graphs = graphs
        self.graph = Data(x=self._x, y=self._y, edge_index=self._ei, edge_attr=self._ea)

    def _set_groups(self, graphs: list) -> None:
        """The units: every graph alone, or the individuals of ``groups`` (a warning for
        equal entries that no group joins)."""
        import warnings

        n = len(graphs)
        self.num_graphs = n
        if self.groups is None:
            self._group_of = None
            self.num_train, self.group_size = n, 1
        else:
            ids = self.groups.tolist() if isinstance(self.groups, Tensor) else list(self.groups)
            if len(ids) != n:
                raise InvalidParameterError("groups", f"one id per training graph ({n})",
                                            f"{len(ids)} ids")
            index: dict = {}
            try:
                group_of = [index.setdefault(g, len(index)) for g in ids]
            except TypeError:
                raise InvalidParameterError("groups", "hashable ids (ints, strings)",
                                            type(ids[0]).__name__) from None
            self._group_of = torch.tensor(group_of, dtype=torch.long)
            self.num_train = len(index)
            counts = torch.bincount(self._group_of)
            self.group_size = int(counts.max())
            order = torch.argsort(self._group_of, stable=True)
            self._members = torch.split(order, counts.tolist())
            if self.num_train < 2:
                raise InvalidParameterError("groups", "at least 2 individuals (the privacy "
                                            "unit is one individual)", f"{self.num_train}")
        loose = [ids for ids in duplicate_graphs(graphs)
                 if self._group_of is None or len(set(self._group_of[ids].tolist())) > 1]
        if loose:
            shown = "; ".join(", ".join(map(str, ids[:4])) + (" ..." if len(ids) > 4 else "")
                              for ids in loose[:3])
            warnings.warn(
                f"{sum(len(ids) for ids in loose)} training graphs are copies of one another "
                f"(entries {shown}{' ...' if len(loose) > 3 else ''}): the guarantee is per "
                "entry of the training list, so an individual listed k times is protected "
                "only as k units; pass GraphSampler(groups=ids) to make the individual the "
                "unit (ids[i]: whose graph i is), or drop the copies",
                DuplicateGraphWarning, stacklevel=4)

    def default_batch_size(self) -> int:
        from gnnprivacy.training.defaults import adaptive_batch

        return adaptive_batch(self.num_train, fraction=GRAPH_BATCH_FRACTION,
                              low=GRAPH_BATCH_LOW, high=GRAPH_BATCH_HIGH)

    def plan(self, *, batch_size: int | None):
        """`NodeSubgraphs.plan` over the units; with groups, the expected batch counts
        graphs (``q`` times all graphs) and the noise is scaled to the largest group."""
        import dataclasses

        plan = super().plan(batch_size=batch_size)
        if self._group_of is None:
            return plan
        k = self.group_size
        return dataclasses.replace(
            plan, expected_batch_size=plan.rate * self.num_graphs, noise_scale=float(k),
            occurrence=k,
            scope=("the model's parameters: every executed noisy step, for one individual "
                   f"(a group of up to {k} training graphs) added or removed with all its "
                   "graphs"),
            details={**plan.details, "num_groups": self.num_train, "largest_group": k})

    def _details(self) -> dict:
        return {"num_train_graphs": self.num_graphs}

    def graph_rows(self, g_id: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Where training graphs ``g_id`` (indices in the training list) lie in this
        sampler's arrays: their first node rows, node counts and label rows (the code
        audit reads a batch's rows against them)."""
        return self._ptr[g_id], self._sizes[g_id], g_id

    def _nodes_batch(self, nodes: Tensor):
        """The step's batch of the sampled units (`NodeSubgraphs.sample` draws them: Poisson
        from the generator, or each unit's trial keyed by its index with
        ``sampling_stream="counter"``, the single-process reference of a sharded run): the
        graphs themselves, or with ``groups`` every graph of each kept individual."""
        if self._group_of is not None and nodes.numel():
            nodes = torch.cat([self._members[int(g)] for g in nodes])
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
        if self._group_of is not None:            # the individual of each graph
            fields["group"] = self._group_of[picked]
        if self._ea is not None:
            fields["edge_attr"] = self._ea[erows]
        out = Batch(**fields)
        out._num_graphs = num
        return out

    def __repr__(self) -> str:
        args = [] if self.groups is None else ["groups=..."]
        if self.sampling_stream != "generator":
            args.append(f"sampling_stream={self.sampling_stream!r}")
        return f"{type(self).__name__}({', '.join(args)})"
