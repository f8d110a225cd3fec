"""What a user of `make_private` is told (issue 38 item 5): refusals name the documented
modules and what to use instead, a loop over epochs that meets the end of the plan hears so
once, and an LR scheduler created first raises no PyTorch warning."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn
from torch.nn import functional as F
from torch_geometric.nn import JumpingKnowledge, SAGEConv

import gnnprivacy as gp
from gnnprivacy.datasets import load_dataset
from gnnprivacy.training.dp import UnsupportedModuleError, check_model

INTERNAL = ("IndexedLinear", "SelfScale")


@pytest.fixture(scope="module")
def data():
    return load_dataset("csbm", num_nodes=200, num_features=8, num_classes=3, seed=0)


class Net(nn.Module):
    def __init__(self, jk: str | None = None, norm: nn.Module | None = None):
        super().__init__()
        self.c1, self.c2, self.head = SAGEConv(8, 8), SAGEConv(8, 8), nn.Linear(8, 3)
        self.jk = JumpingKnowledge(jk, 8, 2) if jk else None
        self.norm = norm

    def forward(self, x, edge_index):
        h1 = torch.relu(self.c1(x, edge_index))
        h1 = self.norm(h1) if self.norm is not None else h1
        h2 = torch.relu(self.c2(h1, edge_index))
        return self.head(self.jk([h1, h2]) if self.jk else h2)


def _private(model, data, **kw):
    opt = kw.pop("optimizer", None) or torch.optim.SGD(model.parameters(), lr=0.1)
    return gp.make_private(model, opt, data, sampler="heterpoisson", noise_multiplier=1.0,
                           seed=0, **kw), opt


def _step(model, opt, batch):
    opt.zero_grad()
    F.cross_entropy(model(batch.x, batch.edge_index)[batch.center],
                    batch.y[batch.center]).backward()
    opt.step()


def test_jumping_knowledge_lstm_is_refused_with_an_alternative(data):
    with pytest.raises(UnsupportedModuleError) as err:
        _private(Net(jk="lstm"), data)
    text = str(err.value)
    assert "'jk.lstm'" in text and "JumpingKnowledge('cat')" in text
    assert "GCNConv" in text and "docs/own-model.md" in text
    assert not any(name in text for name in INTERNAL), text
    _private(Net(jk="cat"), data)          # the alternative it names is accepted


def test_refusals_name_documented_modules_not_internal_classes(data):
    with pytest.raises(UnsupportedModuleError) as err:
        _private(Net(norm=nn.BatchNorm1d(8)), data)
    assert "use LayerNorm" in str(err.value) and "SAGEConv" in str(err.value)
    assert not any(name in str(err.value) for name in INTERNAL), str(err.value)
    with pytest.raises(UnsupportedModuleError) as err:           # the library trainers' engine
        check_model(nn.Sequential(nn.Linear(3, 3), nn.Conv1d(1, 1, 2)))
    assert "nn.Linear" in str(err.value) and "make_private" in str(err.value)
    assert not any(name in str(err.value) for name in INTERNAL), str(err.value)


def test_a_loop_over_epochs_hears_once_that_the_plan_is_done(data):
    model = Net()
    pt, opt = _private(model, data, steps=3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        passes = []
        for _ in range(3):
            passes.append(0)
            for batch in pt.loader:
                _step(model, opt, batch)
                passes[-1] += 1
    told = [w for w in caught if "yields nothing more" in str(w.message)]
    assert pt.steps == 3 and passes[1:] == [0, 0]
    assert len(told) == 1 and "3 noisy steps" in str(told[0].message)
    assert "epochs=" in str(told[0].message)
    # control: a loop that stays within the plan hears nothing
    model = Net()
    pt, opt = _private(model, data, epochs=2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):
            for batch in pt.loader:
                _step(model, opt, batch)
    assert pt.steps == pt.steps_planned >= 2
    assert not [w for w in caught if "yields nothing" in str(w.message)]


def _scheduler_warnings(caught):
    return [str(w.message) for w in caught if "lr_scheduler" in str(w.message)
            or "overridden" in str(w.message)]


def test_an_lr_scheduler_created_before_make_private_raises_no_warning(data):
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    pt, _ = _private(model, data, steps=2, optimizer=opt)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for batch in pt.loader:
            _step(model, opt, batch)
            sched.step()
    assert not _scheduler_warnings(caught), _scheduler_warnings(caught)
    assert pt.steps == 2 and opt.param_groups[0]["lr"] == pytest.approx(0.025)
    pt.close()                               # the scheduler's own wrapper is given back
    assert getattr(opt.step, "_wrapped_by_lr_sched", False) and "step" in opt.__dict__


def test_the_scheduler_warning_check_can_fail():
    # control: a step replaced after the scheduler, as make_private did, warns
    model = nn.Linear(2, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1)
    own = opt.step
    opt.step = lambda closure=None: own(closure)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        opt.step()
        sched.step()
    assert _scheduler_warnings(caught)
