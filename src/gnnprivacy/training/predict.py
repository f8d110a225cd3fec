"""One prediction shape for every method: logits ``[num_nodes, C]``, or the rows asked for."""

from __future__ import annotations

import inspect

import torch
from torch import Tensor

__all__ = ["as_graph_list", "check_nodes", "expected_features", "module_logits", "node_logits",
           "prepare_prediction_graph"]


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


def as_graph_list(data) -> list | None:
    """The graphs of ``data`` when it holds several (a list or tuple of ``Data``, a PyG
    ``Dataset``, a `gnnprivacy.datasets.tu_graphs.GraphSet`: every graph), else ``None``."""
    from torch_geometric.data import Data, Dataset

    if hasattr(data, "graphs") and hasattr(data, "split") and hasattr(data, "subset"):
        return list(data.graphs)
    if isinstance(data, Dataset):
        return [data[i] for i in range(len(data))]
    if isinstance(data, (list, tuple)):
        return list(data)
    if isinstance(data, Data):
        return None
    return None


def expected_features(module: torch.nn.Module) -> int | None:
    """Input feature size of the first layer that states one (``in_channels``,
    ``in_features``); ``None`` when unknown or lazy."""
    for sub in module.modules():
        for attr in ("in_channels", "in_features"):
            size = getattr(sub, attr, None)
            if isinstance(size, int) and size > 0:
                return size
            if isinstance(size, tuple) and size and all(isinstance(v, int) for v in size):
                return size[0] if size[0] > 0 else None
    return None


def _check_width(model: torch.nn.Module, width: int, unit: str) -> None:
    from gnnprivacy.errors import InvalidParameterError

    want = expected_features(model)
    if want is not None and width != want:
        raise InvalidParameterError("data", f"{unit} with {want} features per node (what the "
                                    "model was trained on)", f"{width} features")


def _float_dtype(model: torch.nn.Module) -> torch.dtype:
    return next((p.dtype for p in model.parameters() if p.is_floating_point()), torch.float32)


def module_logits(model: torch.nn.Module, data, rows=None, *, level: str = "node") -> Tensor:
    """Logits of a plain ``nn.Module`` (a saved user model, the graph task's classifier), in
    evaluation mode without gradients (its mode is restored).

    * ``level="node"``: ``model(x, edge_index)`` on the graph ``data`` (checked and converted
      as `prepare_prediction_graph`), one row per node;
    * ``level="graph"``: ``model(x, edge_index, batch[, edge_attr])`` on the graphs of
      ``data`` (a list of ``Data``, a PyG ``Dataset``, a ``GraphSet``; one ``Data`` is one
      graph), one row per graph, each graph checked (`validate_graphs`, labels not needed).

    ``rows``: node ids (graph indices) or a boolean mask of the rows to return.

    Raises:
        InvalidParameterError: no data, data the model cannot use, or an output that is not
            one row of finite logits per node (graph).
    """
    import copy

    from gnnprivacy.errors import InvalidParameterError

    if data is None:
        raise InvalidParameterError(
            "data", "the " + ("graphs" if level == "graph" else "graph") + " to predict on (a "
            "loaded model keeps no data)", None)
    graphs = as_graph_list(data)
    if level != "graph" and graphs is not None:
        if len(graphs) != 1:
            raise InvalidParameterError("data", "one graph (torch_geometric Data) for a node "
                                        "model", f"{len(graphs)} graphs")
        data, graphs = graphs[0], None
    if level == "graph":
        from gnnprivacy.datasets.validate import validate_graphs
        from gnnprivacy.training.graph_classification import graph_logits

        graphs = [data] if graphs is None else graphs
        if not graphs:
            raise InvalidParameterError("data", "at least one graph to predict on", "none")
        validate_graphs(graphs, labels=False)
        _check_width(model, int(graphs[0].x.shape[1]), "graphs")
        dtype = _float_dtype(model)
        ready = []
        for g in graphs:
            g = copy.copy(g)
            if g.x.is_floating_point():
                g.x = g.x.to(dtype)
            g.edge_index = g.edge_index.long()
            ready.append(g)
        try:
            out = graph_logits(model, ready)
        except (RuntimeError, TypeError, IndexError) as exc:
            raise InvalidParameterError(
                "data", "graphs the model runs on (model(x, edge_index, batch[, edge_attr]))",
                f"{type(exc).__name__}: {str(exc).splitlines()[0]}") from None
        return _checked_rows(out, len(ready), "graph", rows)
    graph = prepare_prediction_graph(data, num_features=expected_features(model))
    was = model.training
    model.eval()
    try:
        with torch.no_grad():
            out = model(graph.x.to(_float_dtype(model)), graph.edge_index)
    except (RuntimeError, TypeError, IndexError) as exc:
        raise InvalidParameterError(
            "data", "a graph the model runs on (model(x, edge_index))",
            f"{type(exc).__name__}: {str(exc).splitlines()[0]}") from None
    finally:
        model.train(was)
    return _checked_rows(out, int(graph.num_nodes), "node", rows)


def _checked_rows(out, count: int, unit: str, rows) -> Tensor:
    from gnnprivacy.errors import InvalidParameterError

    if not isinstance(out, Tensor) or out.dim() != 2 or int(out.shape[0]) != count:
        got = tuple(out.shape) if isinstance(out, Tensor) else type(out).__name__
        raise InvalidParameterError("model", f"an output of one row of logits per {unit} "
                                    f"(shape [{count}, num_classes])", got)
    out = out.detach()
    return out if rows is None else out[check_nodes(rows, count)]
