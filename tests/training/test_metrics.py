"""Tests of gnnprivacy.training.metrics against hand-computed values."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.training.metrics import accuracy, evaluate, macro_f1, roc_auc


def test_accuracy_hand_computed():
    y = torch.tensor([0, 1, 0, 0])
    assert accuracy(torch.tensor([0, 1, 1, 0]), y) == 0.75
    mask = torch.tensor([True, False, True, False])
    assert accuracy(torch.tensor([0, 1, 1, 0]), y, mask) == 0.5


def test_accuracy_takes_argmax_of_logits_and_numpy_inputs():
    logits = torch.tensor([[2.0, 1.0], [0.0, 3.0], [5.0, -1.0]])
    assert accuracy(logits, torch.tensor([0, 1, 1])) == pytest.approx(2 / 3)
    assert accuracy(logits.numpy(), np.array([0, 1, 1]), np.array([True, True, False])) == 1.0


def test_empty_mask_gives_nan():
    y = torch.tensor([0, 1])
    none = torch.zeros(2, dtype=torch.bool)
    assert math.isnan(accuracy(y, y, none))
    assert math.isnan(macro_f1(y, y, none))


def test_macro_f1_hand_computed():
    # class 0: P=1/2 R=1/2 F1=1/2; class 1: P=2/3 R=1 F1=4/5; class 2: P=1 R=1/2 F1=2/3
    y = torch.tensor([0, 0, 1, 1, 2, 2])
    pred = torch.tensor([0, 1, 1, 1, 2, 0])
    assert macro_f1(pred, y) == pytest.approx((1 / 2 + 4 / 5 + 2 / 3) / 3)


def test_macro_f1_differs_from_accuracy_on_imbalanced_labels():
    y = torch.tensor([0] * 9 + [1])
    pred = torch.zeros(10, dtype=torch.long)
    assert accuracy(pred, y) == 0.9
    # class 0: P=0.9 R=1 F1=18/19; class 1: F1=0
    assert macro_f1(pred, y) == pytest.approx((18 / 19) / 2)


def test_roc_auc_hand_computed():
    # positive scores {0.35, 0.8} vs negatives {0.1, 0.4}: 3 of 4 pairs ordered -> 0.75
    y = torch.tensor([0, 0, 1, 1])
    assert roc_auc(torch.tensor([0.1, 0.4, 0.35, 0.8]), y) == pytest.approx(0.75)
    logits = torch.tensor([[0.0, 0.1], [0.0, 0.4], [0.0, 0.35], [0.0, 0.8]])
    assert roc_auc(logits, y) == pytest.approx(0.75)
    assert roc_auc(torch.tensor([0.1, 0.4, 0.35, 0.8]), y,
                   torch.tensor([True, False, True, True])) == 1.0


def test_roc_auc_single_class_is_nan_and_multiclass_raises():
    assert math.isnan(roc_auc(torch.tensor([0.2, 0.9]), torch.tensor([1, 1])))
    with pytest.raises(InvalidParameterError, match="binary"):
        roc_auc(torch.tensor([0.2, 0.9, 0.1]), torch.tensor([0, 1, 2]))
    with pytest.raises(InvalidParameterError, match="scores"):
        roc_auc(torch.zeros(3, 3), torch.tensor([0, 1, 1]))


def test_evaluate_reports_auc_only_for_binary_tasks():
    y = torch.tensor([0, 1, 1, 0])
    binary = evaluate(torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 0.5], [2.0, 0.0]]), y)
    assert binary == pytest.approx({"accuracy": 0.75, "macro_f1": macro_f1(
        torch.tensor([0, 1, 0, 0]), y), "roc_auc": 1.0})
    multi = evaluate(torch.eye(3), torch.tensor([0, 1, 1]))
    assert set(multi) == {"accuracy", "macro_f1"}
    assert multi["accuracy"] == pytest.approx(2 / 3)


def test_bad_masks_raise():
    y = torch.tensor([0, 1, 1])
    with pytest.raises(InvalidParameterError, match="mask"):
        accuracy(y, y, torch.tensor([1, 0, 1]))
    with pytest.raises(InvalidParameterError, match="mask"):
        accuracy(y, y, torch.tensor([True, False]))
    with pytest.raises(InvalidParameterError, match="predictions"):
        accuracy(torch.tensor([0, 1]), y)


def test_inputs_are_not_modified():
    logits = torch.tensor([[0.3, 0.7], [0.9, 0.1]])
    y = torch.tensor([1, 1])
    before = logits.clone()
    evaluate(logits, y)
    assert torch.equal(logits, before)
