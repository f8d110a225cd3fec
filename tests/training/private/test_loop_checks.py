"""make_private's conventions that passed silently or with a misleading error (issue 45 items
5 and 7): a loss reduced otherwise than ``loss_reduction`` says, ``clip_grad_norm_`` before
``optimizer.step()``, make_private twice on one model, ``DataLoader`` options, a full-graph
forward between the draw and the step."""

from __future__ import annotations

import pytest
import torch
from torch.nn import functional as F
from torch_geometric.nn import GCNConv

import gnnprivacy as gp
from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.training.dp.flat_capture import SubgraphMixingError
from gnnprivacy.training.private import loop_checks


@pytest.fixture(scope="module")
def data():
    return gp.load_dataset("csbm", num_nodes=300)


def _setup(data, **kw):
    torch.manual_seed(0)
    model = GCNConv(data.num_features, int(data.y.max()) + 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    pt = gp.make_private(model, opt, data, sampler="nodes", noise_multiplier=1.0, steps=3,
                         seed=0, **kw)
    return model, opt, pt


def _run(data, loss_of, *, after_backward=None, **kw):
    model, opt, pt = _setup(data, **kw)
    try:
        for b in pt.loader:
            opt.zero_grad()
            loss_of(model(b.x, b.edge_index)[b.center], b.y[b.center], b).backward()
            if after_backward is not None:
                after_backward(model)
            opt.step()
    finally:
        pt.close()
    return pt


LOSSES = {
    "mean": lambda out, y, b: F.cross_entropy(out, y),
    "sum": lambda out, y, b: F.cross_entropy(out, y, reduction="sum"),
    "none-then-sum": lambda out, y, b: F.cross_entropy(out, y, reduction="none").sum(),
    "none-then-mean": lambda out, y, b: F.cross_entropy(out, y, reduction="none").mean(),
    "sum-over-batch": lambda out, y, b: F.cross_entropy(out, y, reduction="sum") / y.numel(),
}


@pytest.mark.parametrize("loss, declared, refused", [
    ("mean", "mean", False), ("sum", "mean", True), ("none-then-sum", "mean", True),
    ("sum-over-batch", "mean", False), ("sum", "sum", False), ("mean", "sum", True),
    ("none-then-mean", "sum", True)])
def test_a_loss_reduced_against_the_declared_reduction_is_refused(data, loss, declared, refused):
    if refused:
        with pytest.raises(SubgraphMixingError, match=f"loss_reduction={declared!r}"):
            _run(data, LOSSES[loss], loss_reduction=declared)
    else:
        assert _run(data, LOSSES[loss], loss_reduction=declared).steps == 3


def test_control_without_the_check_a_summed_loss_passes_silently(data, monkeypatch):
    import importlib

    module = importlib.import_module("gnnprivacy.training.private.make_private")
    monkeypatch.setattr(module, "check_loss_reduction", lambda ops, losses, expected: None)
    assert _run(data, LOSSES["sum"]).steps == 3


def test_clip_grad_norm_before_step_is_refused(data):
    def clip(model):
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)

    with pytest.raises(SubgraphMixingError, match="clip_grad_norm_.*max_grad_norm"):
        _run(data, LOSSES["mean"], after_backward=clip)

    def clip_value(model):
        torch.nn.utils.clip_grad_value_(model.parameters(), 0.1)

    with pytest.raises(SubgraphMixingError, match="p.grad was changed"):
        _run(data, LOSSES["mean"], after_backward=clip_value)


def test_control_without_the_sentinels_clip_grad_norm_passes_silently(data, monkeypatch):
    monkeypatch.setattr(loop_checks.GradSentinels, "check", lambda self: None)
    pt = _run(data, LOSSES["mean"],
              after_backward=lambda m: torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0))
    assert pt.steps == 3


def test_make_private_twice_on_one_model_is_refused_until_closed(data):
    model, opt, pt = _setup(data)
    with pytest.raises(InvalidParameterError, match="no open make_private uses.*close"):
        gp.make_private(model, torch.optim.SGD(model.parameters(), lr=0.1), data,
                        sampler="nodes", noise_multiplier=1.0, steps=3)
    pt.close()
    again = gp.make_private(model, opt, data, sampler="nodes", noise_multiplier=1.0, steps=3)
    again.close()


@pytest.mark.parametrize("option, fragment", [
    ("num_workers", "not a torch DataLoader"), ("shuffle", "not a torch DataLoader"),
    ("epsilonn", "make_private option")])
def test_options_make_private_does_not_take_are_named(data, option, fragment):
    model = GCNConv(data.num_features, 2)
    with pytest.raises(InvalidParameterError, match=fragment):
        gp.make_private(model, torch.optim.SGD(model.parameters(), lr=0.1), data,
                        sampler="nodes", epsilon=1.0, **{option: 2})


def test_a_full_graph_forward_between_draw_and_step_is_named(data):
    model, opt, pt = _setup(data)
    with pytest.raises(SubgraphMixingError, match="other data than the batch.*after "
                                                  "optimizer.step"):
        for b in pt.loader:
            opt.zero_grad()
            F.cross_entropy(model(b.x, b.edge_index)[b.center], b.y[b.center]).backward()
            model(data.x.clone(), data.edge_index.clone())         # monitoring, grads on
            opt.step()
    pt.close()


def test_control_without_the_refusal_a_second_make_private_misleads(data, monkeypatch):
    """Control: without _refuse_if_private the second make_private is accepted and its loop
    fails with the misleading error of issue 45 ('without a batch from pt.loader')."""
    import importlib

    module = importlib.import_module("gnnprivacy.training.private.make_private")
    monkeypatch.setattr(module, "_refuse_if_private", lambda model, optimizer: None)
    model, opt, first = _setup(data)
    second = gp.make_private(model, opt, data, sampler="nodes", noise_multiplier=1.0, steps=2,
                             seed=0)
    with pytest.raises(SubgraphMixingError, match="without a batch from pt.loader"):
        for b in second.loader:
            opt.zero_grad()
            F.cross_entropy(model(b.x, b.edge_index)[b.center], b.y[b.center]).backward()
            opt.step()
    second.close()
    first.close()
