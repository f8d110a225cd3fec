"""The full-batch training loop shared by RGNN, LPGNN and the naive LDP baseline.

Spec 004 §8 (Algorithm 3 and the authors' code defaults): Adam (lr 0.01, no weight decay),
full batch, gradient-norm clipping at 5, a fixed number of epochs; after every epoch the
model is evaluated on the validation nodes against *noisy* targets (reconstructed or perturbed
labels: the server never sees a true label), and the epoch with the highest validation
accuracy (strict improvement, so the first best epoch wins) is the one reported. The logits of
that epoch are kept; test labels are only used afterwards, by the caller, to score them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import Tensor

from gnnprivacy._validation import check_int, check_positive, check_real


@dataclass
class TrainOutcome:
    """Result of `train_full_batch`.

    Attributes:
        best_epoch: 1-based epoch with the highest noisy validation accuracy.
        best_val_accuracy: that accuracy (against the noisy targets).
        logits: detached ``(N, c)`` model outputs at ``best_epoch`` (eval mode).
        history: per-epoch ``{"loss", "val_accuracy"}``.
    """

    best_epoch: int
    best_val_accuracy: float
    logits: Tensor
    history: list[dict[str, float]] = field(default_factory=list)


def train_full_batch(model: torch.nn.Module, forward: Callable[[], Tensor],
                     loss_fn: Callable[[Tensor], Tensor], *, val_mask: Tensor,
                     val_targets: Tensor, epochs: int = 100, lr: float = 0.01,
                     weight_decay: float = 0.0, grad_clip: float | None = 5.0) -> TrainOutcome:
    """Train ``model`` full-batch and keep the logits of the best noisy-validation epoch.

    Args:
        model: the module whose parameters are optimised.
        forward: computes the ``(N, c)`` logits with the model in its current mode.
        loss_fn: maps the logits to the scalar training loss.
        val_mask: boolean mask of the validation nodes.
        val_targets: ``(N,)`` int64 noisy targets (only ``val_mask`` rows are read; rows
            holding ``-1``, i.e. without a target, are ignored).
        epochs: number of epochs (>= 1).
        lr: Adam learning rate.
        weight_decay: Adam weight decay.
        grad_clip: maximum global gradient norm; ``None`` disables clipping.

    Returns:
        A `TrainOutcome`. With no validation node, the last epoch is reported.
    """
    epochs = check_int("epochs", epochs, low=1)
    opt = torch.optim.Adam(model.parameters(), lr=check_positive("lr", lr),
                           weight_decay=check_real("weight_decay", weight_decay, low=0.0))
    val_idx = (val_mask & (val_targets >= 0)).nonzero().view(-1)
    targets = val_targets[val_idx]
    best = TrainOutcome(best_epoch=0, best_val_accuracy=-1.0, logits=torch.empty(0))
    for epoch in range(1, epochs + 1):
        model.train()
        opt.zero_grad()
        loss = loss_fn(forward())
        loss.backward()
        if grad_clip is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(),
                                           check_positive("grad_clip", grad_clip))
        opt.step()
        model.eval()
        with torch.no_grad():
            logits = forward()
        acc = (float((logits[val_idx].argmax(1) == targets).float().mean())
               if val_idx.numel() else 0.0)
        best.history.append({"loss": float(loss.detach()), "val_accuracy": acc})
        if acc > best.best_val_accuracy or (not val_idx.numel() and epoch == epochs):
            best.best_epoch, best.best_val_accuracy, best.logits = epoch, acc, logits
    return best


__all__ = ["TrainOutcome", "train_full_batch"]
