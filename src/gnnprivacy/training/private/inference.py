"""Private inference for the user's own model: predictions that read no training node.

The built-in HeterPoisson inference lets each query aggregate only non-training neighbours
(`gnnprivacy.training.node_dp.private_inference`). `private_predict` does the same for any
model trained with `make_private`: the model runs on the graph with every training node
removed (with its edges and every node- and edge-level attribute of them), so a prediction is
a function of the released DP parameters and of the non-training nodes alone.

*Privacy.* Nothing is spent: the DP guarantee of training covers the parameters, and these
predictions read only them and non-training nodes (post-processing). *Scope:* that holds for
any architecture, multi-hop message passing, attention, normalisation across nodes or global
pooling included, because the training nodes are absent from the graph the model sees; it
does not hold for state the model carries from training besides its parameters (a cache of
training-node embeddings, a buffer filled in ``forward``), and a training node is never a
query (its own prediction would read its own private features). Unlike the built-in, every
non-training neighbour is aggregated (no ``fanout`` sample).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn

from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.sampling._graph import node_ids, node_mask

__all__ = ["private_predict"]

_WHERE = "private_predict"


def private_predict(model: nn.Module, data, *, train_mask: Tensor | None = None,
                    nodes: Tensor | None = None,
                    forward: Callable[[nn.Module, object], Tensor] | None = None) -> Tensor:
    """Logits of ``nodes`` from the user's model, run on ``data`` without its training nodes.

    Args:
        model: the trained model (put in ``eval`` mode for the call and restored after).
        data: the PyG ``Data`` graph.
        train_mask: the private training nodes (bool mask or ids); default ``data.train_mask``.
            Pass the set training used when ``data`` carries another split.
        nodes: the query nodes (ids or bool mask), none of them a training node; default every
            non-training node.
        forward: ``forward(model, graph) -> logits [graph.num_nodes, C]``; default
            ``model(graph.x, graph.edge_index)``. ``graph`` is the subgraph of the
            non-training nodes (PyG ``Data.subgraph``: ``edge_weight``/``edge_attr`` are
            sliced with the edges).

    Returns:
        logits ``(len(nodes), C)``, in the order of ``nodes``.

    Raises:
        InvalidParameterError: no training set, a query that is a training node, or node
            ids outside the graph.

    Example:
        >>> import torch
        >>> from torch_geometric.data import Data
        >>> from gnnprivacy.training.private import private_predict
        >>> lin = torch.nn.Linear(2, 2)
        >>> data = Data(x=torch.randn(4, 2), edge_index=torch.tensor([[0, 1], [1, 0]]),
        ...             train_mask=torch.tensor([True, False, False, False]))
        >>> private_predict(lambda x, ei: lin(x), data).shape     # nodes 1, 2, 3
        torch.Size([3, 2])
    """
    n = int(data.num_nodes)
    if train_mask is None:
        train_mask = getattr(data, "train_mask", None)
        if train_mask is None:
            raise InvalidParameterError("train_mask", "the training nodes (data.train_mask "
                                        "or train_mask=)", None, where=_WHERE)
    train = node_mask(train_mask, n, name="train_mask", where=_WHERE)
    public = ~train
    queries = (public.nonzero().flatten() if nodes is None
               else node_ids(nodes, n, name="nodes", where=_WHERE, keep_order=True))
    if bool(train[queries].any()):
        bad = queries[train[queries]]
        raise InvalidParameterError(
            "nodes", "non-training nodes (a training node's prediction reads its private "
            "features)", f"{bad.numel()} training node(s), e.g. {int(bad[0])}", where=_WHERE)
    graph = data.subgraph(public)
    position = torch.full((n,), -1, dtype=torch.long)
    position[public] = torch.arange(int(public.sum()))
    call = forward or (lambda m, g: m(g.x, g.edge_index))
    was_training = getattr(model, "training", False)
    if isinstance(model, nn.Module):
        model.eval()
    try:
        with torch.no_grad():
            logits = call(model, graph)
    finally:
        if isinstance(model, nn.Module) and was_training:
            model.train()
    return logits[position[queries]]
