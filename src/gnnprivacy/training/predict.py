"""One prediction shape for every method: logits ``[num_nodes, C]``, or the rows asked for."""

from __future__ import annotations

import inspect

import torch
from torch import Tensor

__all__ = ["check_nodes", "node_logits", "prepare_prediction_graph"]


def node_logits(model, data, nodes: Tensor | None = None) -> Tensor:
    """Logits of ``nodes`` (default: every node of ``data``) from any fitted model.

    Models whose ``predict_logits`` takes ``nodes=`` (HeterPoisson's private inference, which
    defaults to the test nodes) are asked for exactly those rows; others run on the whole
    graph and are indexed; a transductive model without ``predict_logits`` (the local-DP
    pipelines) returns its stored ``logits_``.

    Args:
        model: a fitted trainer, or a loaded model.
        data: the graph (``None`` only for stored predictions).
        nodes: node ids or a boolean mask.
    """
    if nodes is not None:
        num_nodes = int(data.num_nodes) if data is not None else int(model.logits_.shape[0])
        nodes = check_nodes(nodes, num_nodes)
    with torch.no_grad():
        if not hasattr(model, "predict_logits"):
            logits = model.logits_
            return logits if nodes is None else logits[nodes]
        if data is not None and "nodes" in inspect.signature(model.predict_logits).parameters:
            every = torch.arange(int(data.num_nodes)) if nodes is None else nodes
            return model.predict_logits(data, nodes=every)
        logits = model.predict_logits(data)
        return logits if nodes is None else logits[nodes]


def check_nodes(nodes, num_nodes: int) -> Tensor:
    """``nodes`` (ids or a boolean mask) as a 1-D ``int64`` tensor of ids in ``[0, num_nodes)``.

    Raises:
        InvalidParameterError: not integers or a mask, a mask of the wrong length, or an id
            outside the graph (the message names the first and the bound).
    """
    from gnnprivacy.errors import InvalidParameterError

    expected = f"node ids in [0, {num_nodes}) or a boolean mask of {num_nodes} entries"
    try:
        ids = torch.as_tensor(nodes)
    except (TypeError, ValueError, RuntimeError, OverflowError):
        raise InvalidParameterError("nodes", expected, _short(nodes)) from None
    if ids.dtype == torch.bool:
        if ids.dim() != 1 or ids.numel() != num_nodes:
            raise InvalidParameterError("nodes", expected, f"a mask of shape {tuple(ids.shape)}")
        return ids.nonzero().flatten()
    if ids.is_floating_point() or ids.is_complex() or ids.dim() > 1:
        raise InvalidParameterError("nodes", expected, _short(nodes))
    ids = ids.reshape(-1).to(torch.long)
    bad = ids[(ids < 0) | (ids >= num_nodes)]
    if bad.numel():
        raise InvalidParameterError("nodes", expected, f"{int(bad[0])} ({bad.numel()} ids outside)")
    return ids


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def prepare_prediction_graph(data, *, num_features: int | None):
    """A checked, standardised shallow copy of a graph to predict on (the user's object is not
    modified), in the form the model was trained on.

    * features: dense float32 (float64 or sparse are converted), ``num_features`` columns, finite;
    * edges: ``(2, E)`` integer ids within ``[0, num_nodes)``, symmetrised as every training
      graph is (a directed graph gets a warning saying so);
    * masks: a graph without ``train_mask`` has no training node (every node is a query for
      the methods with a private inference), without ``test_mask`` every node is a test node.

    Raises:
        InvalidParameterError: naming ``data``, ``data.x`` or ``data.edge_index``.
    """
    import copy
    import warnings

    from torch_geometric.data import Data
    from torch_geometric.utils import is_undirected, to_undirected

    from gnnprivacy.datasets.validate import check_storage
    from gnnprivacy.errors import InvalidParameterError

    if not isinstance(data, Data):
        raise InvalidParameterError("data", "a torch_geometric.data.Data graph to predict on",
                                    type(data).__name__)
    out = copy.copy(data)
    x = getattr(out, "x", None)
    if not isinstance(x, Tensor):
        raise InvalidParameterError("data.x", "a node feature tensor", type(x).__name__)
    if x.layout != torch.strided and x.device.type != "meta":
        out.x = x = x.to_dense()
    if "num_nodes" in out._store and out._store["num_nodes"] is None:
        del out._store["num_nodes"]
    check_storage(out)
    if x.dim() != 2 or not x.is_floating_point():
        raise InvalidParameterError("data.x", "a 2-D floating-point feature matrix",
                                    f"shape {tuple(x.shape)}, dtype {x.dtype}")
    if num_features is not None and x.shape[1] != num_features:
        raise InvalidParameterError("data.x", f"{num_features} features per node (what the "
                                    "model was trained on)", f"{x.shape[1]} features")
    out.x = x = x.to(torch.float32)
    if not bool(torch.isfinite(x).all()):
        bad = int((~torch.isfinite(x)).any(1).nonzero()[0])
        raise InvalidParameterError("data.x", "finite features (no NaN or inf)",
                                    f"a non-finite value in row {bad}")
    n = int(x.shape[0])
    ei = getattr(out, "edge_index", None)
    if ei is None:
        ei = torch.zeros(2, 0, dtype=torch.long)
    if (not isinstance(ei, Tensor) or ei.dim() != 2 or ei.shape[0] != 2
            or ei.is_floating_point()):
        raise InvalidParameterError("data.edge_index", "a (2, E) integer tensor",
                                    getattr(ei, "shape", type(ei).__name__))
    ei = ei.to(torch.long)
    if ei.numel() and (int(ei.min()) < 0 or int(ei.max()) >= n):
        bad = int(ei.max()) if int(ei.max()) >= n else int(ei.min())
        raise InvalidParameterError("data.edge_index", f"node ids in [0, {n})", f"node id {bad}")
    if ei.numel() and not is_undirected(ei, num_nodes=n):
        warnings.warn("the graph to predict on is directed: it is symmetrised, as every graph a "
                      "model of this library was trained on", UserWarning, stacklevel=3)
        ei = to_undirected(ei, num_nodes=n)
    out.edge_index = ei
    for key in ("edge_attr", "edge_weight"):
        if key in out:
            del out[key]
    if getattr(out, "train_mask", None) is None:
        out.train_mask = torch.zeros(n, dtype=torch.bool)
    if getattr(out, "test_mask", None) is None:
        out.test_mask = ~out.train_mask
    if getattr(out, "val_mask", None) is None:
        out.val_mask = torch.zeros(n, dtype=torch.bool)
    return out
