"""Fixtures for the sweep tests: a tiny, fast training method importable by worker processes.

Sweep workers are fresh processes (spawn, Ray), so a method registered only in the test process
would be unknown there. The fixture writes a small module that registers ``sweep-probe`` into a
temporary folder, puts that folder on ``sys.path`` and ``PYTHONPATH`` (inherited by spawned and
Ray workers and by subprocesses), and sweeps name it in their ``imports``.
"""

from __future__ import annotations

import importlib
import os
import sys

import pytest

PROBE_MODULE = "gnnprivacy_sweep_probe"

PROBE_SOURCE = '''
"""`sweep-probe`: logistic regression on node features, a few full-batch steps (tests only)."""
import time
from dataclasses import dataclass, field

import torch

from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.method.context import MethodResult
from gnnprivacy.method.registry import register_method


@dataclass(frozen=True)
class ProbeParams:
    steps: int = field(default=20, metadata={"help": "gradient steps"})
    lr: float = field(default=0.5, metadata={"help": "learning rate"})
    sleep: float = field(default=0.0, metadata={"help": "seconds to sleep (slow runs on purpose)"})
    fail: bool = field(default=False, metadata={"help": "raise instead of training"})

    def __post_init__(self):
        if not isinstance(self.steps, int) or self.steps < 1:
            raise InvalidParameterError("steps", "an integer >= 1", self.steps)


@register_method("sweep-probe", params=ProbeParams, private=False, force=True,
                 description="tests only: logistic regression on features")
def fit_probe(ctx):
    if ctx.params.fail:
        raise RuntimeError("probe failure requested")
    time.sleep(ctx.params.sleep)
    data = ctx.data
    x, y = data.x, data.y
    w = (0.01 * torch.randn(x.size(1), int(data.num_classes), generator=ctx.torch_generator("init"))).requires_grad_()
    for _ in range(ctx.params.steps):
        loss = torch.nn.functional.cross_entropy(x[data.train_mask] @ w, y[data.train_mask])
        (grad,) = torch.autograd.grad(loss, w)
        with torch.no_grad():
            w -= ctx.params.lr * grad
    with torch.no_grad():
        pred = (x @ w).argmax(1)
    acc = lambda m: float((pred[m] == y[m]).float().mean())
    return MethodResult(metrics={"test_accuracy": acc(data.test_mask), "val_accuracy": acc(data.val_mask),
                                 "train_loss": float(loss.detach())})
'''

# A small CSBM graph: loads in milliseconds.
SMALL_GRAPH = "num_nodes=200,num_features=16,num_classes=3,avg_degree=6"


@pytest.fixture(scope="session")
def probe_module(tmp_path_factory):
    """Register `sweep-probe` here and make it importable by workers; returns the module name."""
    folder = tmp_path_factory.mktemp("probe")
    (folder / f"{PROBE_MODULE}.py").write_text(PROBE_SOURCE)
    sys.path.insert(0, str(folder))
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(folder), old) if p)
    importlib.import_module(PROBE_MODULE)
    yield PROBE_MODULE
    sys.path.remove(str(folder))
    if old is None:
        os.environ.pop("PYTHONPATH", None)
    else:
        os.environ["PYTHONPATH"] = old


@pytest.fixture
def probe_base(probe_module):
    """Base config of a probe run on a small CSBM graph."""
    return {"method": "sweep-probe", "dataset": "csbm", "dataset_args": SMALL_GRAPH}
