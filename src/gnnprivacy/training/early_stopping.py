"""Early stopping on validation accuracy with restoration of the best weights."""

from __future__ import annotations

import math

import torch

from gnnprivacy._validation import check_int


class EarlyStopping:
    """Tracks the best epoch by validation accuracy (ties broken by lower validation loss).

    After each epoch call `step`; it snapshots the weights when the epoch improves on the
    best so far and returns ``True`` once ``patience`` epochs in a row brought no improvement.
    `restore` loads the best snapshot back. An epoch without validation nodes
    (``val_accuracy`` is ``nan``) always counts as an improvement, so without a validation set
    training runs to the last epoch and keeps its weights.

    Args:
        patience: epochs without improvement before stopping (>= 1).
    """

    def __init__(self, patience: int):
        self.patience = check_int("patience", patience, low=1)
        self.best_epoch: int | None = None
        self.best_accuracy = -math.inf
        self.best_loss = math.inf
        self._state: dict[str, torch.Tensor] | None = None
        self._bad_epochs = 0

    def _improves(self, accuracy: float, loss: float) -> bool:
        if math.isnan(accuracy):
            return True
        if accuracy != self.best_accuracy:
            return accuracy > self.best_accuracy
        return loss < self.best_loss

    def step(self, epoch: int, model: torch.nn.Module, val_accuracy: float,
             val_loss: float) -> bool:
        """Record one epoch; return whether training should stop now."""
        if self._improves(val_accuracy, val_loss):
            self.best_epoch, self.best_accuracy, self.best_loss = epoch, val_accuracy, val_loss
            self._state = {k: v.detach().clone() for k, v in model.state_dict().items()}
            self._bad_epochs = 0
            return False
        self._bad_epochs += 1
        return self._bad_epochs >= self.patience

    def restore(self, model: torch.nn.Module) -> None:
        """Load the best snapshot into ``model`` (no-op before the first `step`)."""
        if self._state is not None:
            model.load_state_dict(self._state)

    def __repr__(self) -> str:
        return (f"EarlyStopping(patience={self.patience}, best_epoch={self.best_epoch}, "
                f"best_accuracy={self.best_accuracy:.4f})")


__all__ = ["EarlyStopping"]
