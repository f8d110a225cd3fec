"""The shared full-batch loop: epoch selection on noisy validation targets."""

from __future__ import annotations

import pytest
import torch

from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.ldp.training import train_full_batch


def _problem(seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(60, 4, generator=g)
    y = (x[:, 0] > 0).long()
    model = torch.nn.Linear(4, 2)
    return x, y, model


def test_keeps_first_best_epoch_and_its_logits():
    x, y, model = _problem()
    val = torch.arange(60) >= 40
    out = train_full_batch(model, lambda: model(x), lambda z: torch.nn.functional.cross_entropy(
        z[:40], y[:40]), val_mask=val, val_targets=y, epochs=30, lr=0.1)
    accs = [h["val_accuracy"] for h in out.history]
    assert out.best_epoch == accs.index(max(accs)) + 1 and out.best_val_accuracy == max(accs)
    assert out.logits.shape == (60, 2) and not out.logits.requires_grad
    assert out.history[-1]["loss"] < out.history[0]["loss"]


def test_rows_without_target_are_ignored_and_no_validation_uses_last_epoch():
    x, y, model = _problem(1)
    targets = y.clone()
    targets[40:50] = -1
    val = torch.arange(60) >= 40
    out = train_full_batch(model, lambda: model(x), lambda z: z.pow(2).mean(), val_mask=val,
                           val_targets=targets, epochs=3)
    assert 0.0 <= out.best_val_accuracy <= 1.0
    none = train_full_batch(model, lambda: model(x), lambda z: z.pow(2).mean(),
                            val_mask=torch.zeros(60, dtype=torch.bool), val_targets=y, epochs=4)
    assert none.best_epoch == 4


def test_bad_arguments():
    x, y, model = _problem()
    kw = dict(val_mask=torch.ones(60, dtype=torch.bool), val_targets=y)
    with pytest.raises(InvalidParameterError, match="epochs"):
        train_full_batch(model, lambda: model(x), lambda z: z.sum(), epochs=0, **kw)
    with pytest.raises(InvalidParameterError, match="lr"):
        train_full_batch(model, lambda: model(x), lambda z: z.sum(), lr=0.0, **kw)
