"""One prediction shape for every method: logits ``[num_nodes, C]``, or the rows asked for."""

from __future__ import annotations

import inspect

import torch
from torch import Tensor

__all__ = ["node_logits"]


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
        nodes = torch.as_tensor(nodes)
        if nodes.dtype == torch.bool:
            nodes = nodes.nonzero().flatten()
    with torch.no_grad():
        if not hasattr(model, "predict_logits"):
            logits = model.logits_
            return logits if nodes is None else logits[nodes]
        if data is not None and "nodes" in inspect.signature(model.predict_logits).parameters:
            every = torch.arange(int(data.num_nodes)) if nodes is None else nodes
            return model.predict_logits(data, nodes=every)
        logits = model.predict_logits(data)
        return logits if nodes is None else logits[nodes]
