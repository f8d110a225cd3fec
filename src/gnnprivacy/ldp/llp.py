"""Learning from label proportions (LLP) on graph clusters: RGNN's regulariser.

Bhaila et al., SDM 2024, Section IV-C, eq. 15; spec 004 §7. The server partitions the public
graph into ``C`` clusters (`gnnprivacy.ldp.partition.metis_partition`); bag ``r`` is
``B_r = C_r ∩ V_train`` (empty bags are skipped). From the users' *perturbed* one-hot labels it
computes the observed proportions ``b'_r = mean_{v in B_r} y'_v`` and de-biases them once with
the GRR inverse, ``b~_r = clip_renorm(P_y^{-1} b'_r)`` (negative entries set to ``1e-5``, rows
renormalised, then ``1e-20`` added, as in the authors' code). During training the predicted
proportions are ``b^_r = mean_{v in B_r} softmax(z_v)`` and the loss is:

```
L_llp = (1/|R|) sum_{r in R} KL(b~_r || b^_r)       (direction "target_pred", default)
```

``direction="pred_target"`` gives the paper's literal ``KL(b^_r || b~_r)`` (spec §13.10).

Privacy: pure post-processing of the label reports; no event.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from gnnprivacy._validation import check_choice
from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.mechanisms import grr_frequencies

KL_DIRECTIONS = ("target_pred", "pred_target")

#: Value given to negative de-biased entries before renormalising (authors' code).
CLIP_VALUE = 1e-5


@dataclass(frozen=True)
class Bags:
    """Non-empty bags over the training nodes.

    Attributes:
        node_index: ``(n_bagged,)`` ids of the training nodes that lie in a non-empty bag.
        bag_of_node: ``(n_bagged,)`` bag id in ``[0, num_bags)`` of each such node.
        num_bags: ``|R|``.
        sizes: ``(num_bags,)`` number of training nodes per bag.
    """

    node_index: Tensor
    bag_of_node: Tensor
    num_bags: int
    sizes: Tensor

    def mean(self, values: Tensor) -> Tensor:
        """``(num_bags, F)`` per-bag mean of ``values[node_index]`` (differentiable)."""
        out = values.new_zeros(self.num_bags, values.size(1))
        out = out.index_add(0, self.bag_of_node, values[self.node_index])
        return out / self.sizes.to(values.dtype).unsqueeze(1)


def make_bags(parts: Tensor, train_mask: Tensor) -> Bags:
    """Bags ``B_r = C_r ∩ V_train`` from a partition, dropping the empty ones.

    Args:
        parts: ``(N,)`` part id per node (e.g. from ``metis_partition``).
        train_mask: ``(N,)`` boolean mask of the training nodes.
    """
    if parts.shape != train_mask.shape:
        raise InvalidParameterError("parts", f"shape {tuple(train_mask.shape)} like train_mask",
                                    tuple(parts.shape))
    idx = train_mask.nonzero().view(-1)
    _, bag = torch.unique(parts[idx], return_inverse=True)
    num = int(bag.max()) + 1 if idx.numel() else 0
    return Bags(node_index=idx, bag_of_node=bag.view(-1), num_bags=num,
                sizes=torch.bincount(bag.view(-1), minlength=num))


def clip_renormalize(props: Tensor, *, clip_value: float = CLIP_VALUE) -> Tensor:
    """Set entries ``< 0`` to ``clip_value`` and renormalise every row to sum 1."""
    out = torch.where(props < 0, torch.full_like(props, clip_value), props)
    return out / out.sum(dim=1, keepdim=True)


def bag_targets(bags: Bags, labels: Tensor, *, epsilon: float, num_classes: int) -> Tensor:
    """De-biased bag proportions ``b~_r = clip_renorm(P^{-1} b'_r) + 1e-20`` (computed once).

    Args:
        bags: the bags (`make_bags`).
        labels: ``(N,)`` GRR label reports (or reconstructed labels) of the nodes.
        epsilon: the GRR budget ``eps_y`` of the reports.
        num_classes: ``c``.
    """
    if bags.num_bags == 0:
        return torch.zeros(0, num_classes)
    observed = bags.mean(torch.nn.functional.one_hot(labels.clamp_min(0), num_classes).float())
    est = grr_frequencies(observed, epsilon=epsilon, num_categories=num_classes, normalize=True)
    return clip_renormalize(est).float() + 1e-20


def llp_loss(logits: Tensor, bags: Bags, targets: Tensor, *,
             direction: str = "target_pred") -> Tensor:
    """Mean KL divergence between the bags' target and predicted label proportions.

    Args:
        logits: ``(N, c)`` model outputs.
        bags: the bags (`make_bags`).
        targets: ``(num_bags, c)`` de-biased proportions ``b~`` (rows non-negative, sum 1).
        direction: ``"target_pred"`` = ``KL(b~ || b^)`` (default) or ``"pred_target"``.

    Returns:
        Scalar loss; ``0`` when there is no bag.
    """
    check_choice("direction", direction, KL_DIRECTIONS)
    if bags.num_bags == 0:
        return logits.sum() * 0.0
    pred = bags.mean(torch.softmax(logits, dim=1)).clamp_min(1e-20)
    if direction == "target_pred":
        kl = targets * (targets.clamp_min(1e-20).log() - pred.log())
    else:
        kl = pred * (pred.log() - targets.clamp_min(1e-20).log())
    return kl.sum() / bags.num_bags


__all__ = ["Bags", "CLIP_VALUE", "KL_DIRECTIONS", "bag_targets", "clip_renormalize", "llp_loss",
           "make_bags"]
