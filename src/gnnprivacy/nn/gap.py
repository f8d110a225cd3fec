"""GAP's model pieces (Sajadmanesh et al., USENIX Security 2023): the degree bounding, the
per-hop sensitivity of the aggregate, the composed privacy event and the MLPs.

The trainer, its noisy aggregation and its accounting are in `gnnprivacy.training.gap` (the
method's description and privacy analysis are there too).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from gnnprivacy._validation import check_choice, check_int

__all__ = ["GAP_MODES", "gap_sensitivity", "bound_degree", "gap_event", "check_gap_mode",
           "true_sensitivity"]

GAP_MODES = ("bounded-graph", "paper")
#: the previous name of ``"bounded-graph"`` (refused: the guarantee is not for every graph)
_RENAMED = {"sound": "bounded-graph"}


def check_gap_mode(mode: str, name: str = "accounting") -> str:
    """``mode`` if it is one of `GAP_MODES`; the old ``"sound"`` gets a message that
    names its replacement and why it was renamed.

    Raises:
        InvalidParameterError: naming ``name``.
    """
    if mode in _RENAMED:
        from gnnprivacy.errors import InvalidParameterError

        raise InvalidParameterError(
            name, f"one of {list(GAP_MODES)} (GAP's {mode!r} mode was renamed "
            f"{_RENAMED[mode]!r}: its guarantee covers the degree-bounded graph, not every "
            "input graph; see docs/gap.md)", mode)
    return check_choice(name, mode, GAP_MODES)


def gap_sensitivity(max_degree: int, mode: str = "bounded-graph") -> float:
    """Per-hop ℓ2 sensitivity of the aggregate: ``2(D+1)`` (bounded-graph) or ``√D``
    (GAP's)."""
    d = check_int("max_degree", max_degree, low=1)
    return 2.0 * (d + 1) if check_gap_mode(mode, "mode") == "bounded-graph" else math.sqrt(d)


def true_sensitivity(max_degree: int) -> float:
    """Worst-case shift of the aggregate matrix under add/remove: ``√((D+1)² + D)``."""
    return math.sqrt((max_degree + 1) ** 2 + max_degree)


def bound_degree(edge_index: Tensor, num_nodes: int, max_degree: int, *,
                 generator: torch.Generator) -> Tensor:
    """Keep at most ``max_degree`` in-edges and out-edges per node (random priorities)."""
    if edge_index.numel() == 0:
        return edge_index
    prio = torch.rand(edge_index.size(1), generator=generator)
    keep = torch.ones(edge_index.size(1), dtype=torch.bool)
    for row in (1, 0):                       # targets (in-degree), then sources (out-degree)
        idx = keep.nonzero().flatten()
        key = edge_index[row, idx].double() * 2.0 + prio[idx].double()
        order = idx[torch.argsort(key)]
        nodes = edge_index[row, order]
        first = torch.ones_like(nodes, dtype=torch.bool)
        first[1:] = nodes[1:] != nodes[:-1]
        start = torch.cummax(torch.where(first, torch.arange(nodes.numel()), 0), 0).values
        rank = torch.arange(nodes.numel()) - start
        keep[order[rank >= max_degree]] = False
    return edge_index[:, keep]


def gap_event(noise_multiplier: float, *, sample_rate: float, encoder_steps: int,
              classifier_steps: int, hops: int):
    """The composed event of one GAP training run (noise multiplier ``z``)."""
    from dp_accounting import dp_event as e

    step = e.PoissonSampledDpEvent(sample_rate, e.GaussianDpEvent(noise_multiplier))
    parts = [e.SelfComposedDpEvent(step, encoder_steps),
             e.SelfComposedDpEvent(e.GaussianDpEvent(noise_multiplier), hops),
             e.SelfComposedDpEvent(step, classifier_steps)]
    return e.ComposedDpEvent(parts)


def _mlp(dims: list[int]) -> nn.Sequential:
    layers: list[nn.Module] = []
    for k, (a, b) in enumerate(zip(dims[:-1], dims[1:])):
        layers.append(nn.Linear(a, b))
        if k < len(dims) - 2:
            layers.append(nn.SELU())
    return nn.Sequential(*layers)
