"""An interrupt never leaves torch's thread state changed behind the library's entry points.

Ctrl-C (and SIGTERM, which the command line turns into ``KeyboardInterrupt``) is raised
between two bytecodes; landing inside ``torch.no_grad().__exit__`` before it restores the grad
mode, it leaves gradients off for the rest of the thread (a notebook, an in-process command:
every later ``loss.backward()`` fails). CI met this: a SIGINT to an in-process ``tune`` left
the next trainings of that test worker failing with "element 0 of tensors does not require
grad". The tests below land the interrupt exactly there, deterministically.
"""

from __future__ import annotations

import contextlib

import pytest
import torch
from click.testing import CliRunner
from torch.autograd import grad_mode

import gnnprivacy as gp
from gnnprivacy._torch_state import torch_state_kept
from gnnprivacy.cli import main
from gnnprivacy.training.private.guards import LoopTrace

CSBM = "num_nodes=200,num_features=8,num_classes=3,avg_degree=4"


@contextlib.contextmanager
def interrupt_in_no_grad_exit(after: int = 0):
    """The ``after``-th ``no_grad.__exit__`` from now is interrupted before it restores the
    grad mode, as a signal handled at the method's first bytecode is."""
    original = grad_mode.no_grad.__exit__
    calls = {"n": 0}

    def exit_(self, *exc):
        calls["n"] += 1
        if calls["n"] > after:
            grad_mode.no_grad.__exit__ = original
            raise KeyboardInterrupt
        return original(self, *exc)

    grad_mode.no_grad.__exit__ = exit_
    try:
        yield calls
    finally:
        grad_mode.no_grad.__exit__ = original
        torch.set_grad_enabled(True)     # the controls below leave it off on purpose


def test_the_interrupt_leaks_without_the_guard():
    # the broken control: what the entry points would leave without torch_state_kept
    with interrupt_in_no_grad_exit():
        with pytest.raises(KeyboardInterrupt):
            with torch.no_grad():
                pass
        assert not torch.is_grad_enabled()


def test_the_guard_restores_the_grad_mode_and_pops_a_left_trace():
    trace = LoopTrace(light=True)
    with interrupt_in_no_grad_exit():
        with pytest.raises(KeyboardInterrupt):
            with torch_state_kept():
                trace.start()            # a private loader's draw, its step never reached
                with torch.no_grad():
                    pass
        assert torch.is_grad_enabled()
        assert torch._C._len_torch_function_stack() == 0


def test_the_guard_keeps_an_outer_no_grad():
    with torch.no_grad(), torch_state_kept():
        torch.set_grad_enabled(True)
    assert torch.is_grad_enabled()
    with torch.no_grad():
        with torch_state_kept():
            torch.set_grad_enabled(True)
        assert not torch.is_grad_enabled()


@pytest.mark.parametrize("method", ["dpmlp", "dpgnn", "heterpoisson"])
def test_an_interrupted_train_leaves_gradients_on(method):
    with interrupt_in_no_grad_exit(after=3) as calls:
        with pytest.raises(KeyboardInterrupt):
            gp.train("csbm", method=method, epsilon=4.0, dataset_args=CSBM, seed=0)
        assert calls["n"] > 3 and torch.is_grad_enabled()
        assert torch._C._len_torch_function_stack() == 0
    again = gp.train("csbm", method=method, epsilon=4.0, dataset_args=CSBM, seed=0)
    assert again.epsilon <= 4.0 + 1e-6


def test_an_interrupted_command_exits_130_and_leaves_gradients_on(tmp_path):
    args = ["train", "--method", "dpmlp", "--dataset", "csbm", "--dataset-args", CSBM,
            "--epsilon", "4", "-q", "--runs-dir", str(tmp_path)]
    with interrupt_in_no_grad_exit(after=3):
        out = CliRunner().invoke(main, args)
        assert out.exit_code == 130, out.output
        assert torch.is_grad_enabled()
    assert CliRunner().invoke(main, args).exit_code == 0


def test_an_interrupted_step_of_a_users_loop_leaves_gradients_on():
    # make_private's optimizer.step() in the user's own loop, interrupted inside its clipping
    import torch.nn.functional as F

    from gnnprivacy.datasets import load_dataset

    data = load_dataset("csbm", num_nodes=200, num_features=8, num_classes=3, seed=0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    pt = gp.make_private(model, opt, data, sampler="heterpoisson", epsilon=4.0, steps=4, seed=0)
    for batch in pt.loader:
        opt.zero_grad()
        F.cross_entropy(model(batch.x)[batch.center], batch.y[batch.center]).backward()
        with interrupt_in_no_grad_exit():
            with pytest.raises(KeyboardInterrupt):
                opt.step()
            assert torch.is_grad_enabled()
        break
