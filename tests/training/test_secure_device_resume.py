"""Secure noise end to end, device handling, and kill-and-resume of private training (issue 10).

* Secure mode: two runs with the same seed add different noise; the noise goes through the
  OS CSPRNG seam of :mod:`gnnprivacy.mechanisms._random`; no private code path calls the
  global torch or numpy RNG (each such function is patched to raise while training).
* Device: an unusable device is refused with one line before any work; the record states
  the device actually used; a ``gpu`` test trains every trainer on CUDA where there is one.
* Resume: a real subprocess is SIGKILLed after its first checkpoint, resumed, and must end
  with the same ledger (no step lost or counted twice) and the same model as an
  uninterrupted run with the same seed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from gnnprivacy.datasets import load_dataset
from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.mechanisms import _random
from gnnprivacy.training.device import DeviceUnavailableError, resolve_device
from gnnprivacy.training.node_dp import DPGNNTrainer, DPMLPTrainer, HeterPoissonTrainer

FAST = {
    HeterPoissonTrainer: dict(q_b=0.2, steps=4, noise_multiplier=1.0, degree_public=True,
                              hidden_channels=8),
    DPGNNTrainer: dict(max_degree=3, batch_size=32, steps=4, noise_multiplier=1.0,
                       hidden_channels=8),
    DPMLPTrainer: dict(batch_size=32, steps=4, noise_multiplier=1.0, hidden_channels=8),
}
TRAINERS = list(FAST)


@pytest.fixture(scope="module")
def csbm():
    return load_dataset("csbm", num_nodes=200, seed=0)


def params(tr) -> torch.Tensor:
    return torch.cat([p.detach().flatten().cpu() for p in tr.model_.parameters()])


# -- secure mode ------------------------------------------------------------------------------
@pytest.mark.parametrize("cls", TRAINERS, ids=lambda c: c.name)
def test_secure_mode_same_seed_different_noise(cls, csbm):
    seeded = [params(cls(**FAST[cls], generator=3).fit(csbm)) for _ in range(2)]
    assert torch.equal(*seeded)  # control: seeded noise is reproducible bit for bit
    a = cls(**FAST[cls], generator=3, secure_mode=True).fit(csbm)
    b = cls(**FAST[cls], generator=3, secure_mode=True).fit(csbm)
    assert not torch.equal(params(a), params(b))
    assert a.privacy_record()["secure_mode"] is True
    assert cls(**FAST[cls], generator=3).fit(csbm).privacy_record()["secure_mode"] is False


def _forbid_global_rng(monkeypatch) -> None:
    """Make every global-RNG draw raise (torch draws without ``generator=``, numpy legacy)."""
    def guard(name, fn):
        def wrapped(*args, **kwargs):
            if kwargs.get("generator") is None:
                raise AssertionError(f"global torch RNG used: torch.{name}")
            return fn(*args, **kwargs)
        return wrapped

    for name in ("rand", "randn", "randint", "randperm", "normal", "bernoulli", "multinomial",
                 "rand_like", "randn_like", "randint_like", "poisson"):
        monkeypatch.setattr(torch, name, guard(name, getattr(torch, name)))

    def np_guard(name):
        def wrapped(*args, **kwargs):
            raise AssertionError(f"global numpy RNG used: np.random.{name}")
        return wrapped

    for name in ("rand", "randn", "random", "randint", "choice", "permutation", "shuffle",
                 "normal", "binomial", "uniform", "random_sample", "poisson"):
        monkeypatch.setattr(np.random, name, np_guard(name))


@pytest.mark.parametrize("cls", TRAINERS, ids=lambda c: c.name)
@pytest.mark.parametrize("secure", [False, True], ids=["seeded", "secure"])
def test_private_paths_never_touch_the_global_rng(cls, secure, csbm, monkeypatch):
    calls = []
    real = _random._os_random_bytes
    monkeypatch.setattr(_random, "_os_random_bytes", lambda n: calls.append(n) or real(n))
    torch_state, np_state = torch.random.get_rng_state(), np.random.get_state()
    _forbid_global_rng(monkeypatch)
    tr = cls(**FAST[cls], generator=1, secure_mode=secure).fit(csbm)
    tr.score(csbm)
    monkeypatch.undo()
    assert torch.equal(torch.random.get_rng_state(), torch_state)
    assert all(np.array_equal(a, b) for a, b in zip(np.random.get_state(), np_state))
    assert bool(calls) == secure  # secure noise comes from the OS CSPRNG, seeded never does


def test_guard_catches_a_global_draw(monkeypatch):
    """Positive control: the guard above does fire on a global draw."""
    _forbid_global_rng(monkeypatch)
    with pytest.raises(AssertionError, match="global torch RNG"):
        torch.randn(3)
    with pytest.raises(AssertionError, match="global numpy RNG"):
        np.random.rand(3)


def test_ldp_reports_secure_mode(monkeypatch):
    from torch_geometric.data import Data

    from gnnprivacy.method.context import RunContext
    from gnnprivacy.method.builtin.ldp import LDPParams, _reports

    g = torch.Generator().manual_seed(0)
    n = 120
    masks = torch.zeros(3, n, dtype=torch.bool)
    masks[torch.arange(n) % 3, torch.arange(n)] = True
    data = Data(x=(torch.rand(n, 12, generator=g) < 0.5).float(), y=torch.arange(n) % 3,
                edge_index=torch.randint(0, n, (2, 400), generator=g), train_mask=masks[0],
                val_mask=masks[1], test_mask=masks[2], num_classes=3)
    data.split = type("S", (), {"kind": "random"})()

    def view(secure):
        ctx = RunContext(config=None, params=LDPParams(m=4, secure_mode=secure), data=data,
                         seed=5)
        return _reports(ctx, "grr-fs")[0]

    assert torch.equal(view(False).x_reports, view(False).x_reports)
    calls = []
    real = _random._os_random_bytes
    monkeypatch.setattr(_random, "_os_random_bytes", lambda n: calls.append(n) or real(n))
    a, b = view(True), view(True)
    assert calls and not torch.equal(a.x_reports, b.x_reports)


# -- device -----------------------------------------------------------------------------------
@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_cuda_refused_in_one_line_before_work():
    with pytest.raises(DeviceUnavailableError) as err:
        HeterPoissonTrainer(device="cuda")
    assert str(err.value) == "device 'cuda' requested but torch.cuda.is_available() is False"
    for cls in TRAINERS:
        with pytest.raises(InvalidParameterError, match="torch.cuda.is_available"):
            cls(device="cuda:0")
    from gnnprivacy.method.config import RunConfig

    with pytest.raises(InvalidParameterError, match="torch.cuda.is_available"):
        RunConfig(method="gcn", device="cuda")


def test_bad_device_names():
    assert resolve_device(None) == torch.device("cpu")
    with pytest.raises(InvalidParameterError, match="device"):
        resolve_device("tpu-please")


def test_record_states_device_used(tmp_path):
    from gnnprivacy.method.runner import run

    rec = run({"method": "dpmlp", "dataset": "csbm", "dataset_args": "num_nodes=150",
               "runs_dir": str(tmp_path), "steps": 2, "secure_mode": True})
    assert rec.privacy["secure_mode"] is True and rec.info["device"] == "cpu"
    assert {"unit", "relation", "scope", "unaccounted"} <= set(rec.privacy)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("method", ["heterpoisson", "dpgnn", "dpmlp", "gcn", "rgnn", "lpgnn"])
def test_every_trainer_runs_on_cuda(method, tmp_path):
    from gnnprivacy.method.runner import run

    extra = ({"steps": 5} if method in ("heterpoisson", "dpgnn", "dpmlp")
             else {"epochs": 5, "group_size": 1} if method in ("rgnn", "lpgnn")
             else {"epochs": 5})
    rec = run({"method": method, "dataset": "csbm", "dataset_args": "num_nodes=400",
               "runs_dir": str(tmp_path), "device": "cuda", **extra})
    assert str(rec.info.get("device", "")).startswith("cuda")
    assert 0.0 <= rec.metrics["test_accuracy"] <= 1.0


# -- kill and resume --------------------------------------------------------------------------
CHILD = r"""
import sys, time, torch
from gnnprivacy.datasets import load_dataset
from gnnprivacy.training.node_dp import {cls}

class Slow:
    def update(self, n):
        time.sleep(0.02)

data = load_dataset("csbm", num_nodes=200, seed=0)
tr = {cls}(**{kw}, generator=7, checkpoint_path=sys.argv[1], checkpoint_every=5,
           resume=sys.argv[2] == "1", progress=lambda name, total: Slow()).fit(data)
torch.save({{"params": [p.detach() for p in tr.model_.parameters()],
            "ledger": tr.accountant_.ledger.to_dict(), "epsilon": tr.epsilon_,
            "resumed_from": tr.resumed_from_step_}}, sys.argv[3])
"""


def _child(cls, kw, ckpt, resume, out) -> subprocess.Popen:
    code = CHILD.format(cls=cls.__name__, kw=repr(kw))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.Popen([sys.executable, "-c", code, str(ckpt), "1" if resume else "0",
                             str(out)], env=env)


@pytest.mark.parametrize("cls", [DPGNNTrainer, pytest.param(HeterPoissonTrainer,
                                                               marks=pytest.mark.slow)],
                         ids=lambda c: c.name)
def test_sigkill_then_resume_matches_uninterrupted_run(cls, tmp_path, csbm):
    kw = {**FAST[cls], "steps": 60}
    ckpt = tmp_path / "run.ckpt"
    proc = _child(cls, kw, ckpt, False, tmp_path / "killed.pt")
    deadline = time.time() + 120
    while not ckpt.exists():
        assert proc.poll() is None, "child finished before it could be killed"
        assert time.time() < deadline
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL and not (tmp_path / "killed.pt").exists()
    killed_at = torch.load(ckpt, weights_only=False)["step"]
    assert 0 < killed_at < 60

    assert _child(cls, kw, ckpt, True, tmp_path / "resumed.pt").wait() == 0
    resumed = torch.load(tmp_path / "resumed.pt", weights_only=False)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as in the children: the same reductions, bit for bit
    try:
        fresh = cls(**kw, generator=7).fit(csbm)
    finally:
        torch.set_num_threads(threads)
    assert resumed["resumed_from"] >= killed_at > 0 and fresh.resumed_from_step_ == 0
    assert resumed["ledger"] == fresh.accountant_.ledger.to_dict()
    assert sum(e["count"] for e in resumed["ledger"]["entries"]) == 60
    assert resumed["epsilon"] == fresh.epsilon_
    for p, q in zip(resumed["params"], fresh.model_.parameters()):
        assert torch.equal(p, q.detach())


def test_resume_refuses_another_configuration(tmp_path, csbm):
    ckpt = tmp_path / "c.ckpt"
    DPMLPTrainer(**FAST[DPMLPTrainer], generator=0, checkpoint_path=ckpt,
                 checkpoint_every=2).fit(csbm)
    with pytest.raises(InvalidParameterError, match="same configuration"):
        DPMLPTrainer(**{**FAST[DPMLPTrainer], "hidden_channels": 4}, generator=0,
                     checkpoint_path=ckpt, resume=True).fit(csbm)
    tr = DPMLPTrainer(**FAST[DPMLPTrainer], generator=0, checkpoint_path=ckpt,
                      resume=True).fit(csbm)  # finished checkpoint: nothing left to run
    assert tr.resumed_from_step_ == 4 and tr.accountant_.ledger.total_count == 4


@pytest.mark.slow
def test_cli_resume_continues_a_killed_runner(tmp_path):
    """The runner path: a child runs ``runner.run`` slowly, is SIGKILLed after a checkpoint,
    then ``gnnprivacy train ... --resume`` finishes it with the ledger of a fresh run."""
    runs = tmp_path / "runs"
    values = {"method": "dpmlp", "dataset": "csbm", "dataset_args": "num_nodes=200",
              "steps": 400, "runs_dir": str(runs)}
    code = ("import json, sys, time\n"
            "from gnnprivacy.method.runner import run\n"
            "class Slow:\n    def update(self, n): time.sleep(0.01)\n"
            f"run(json.loads({json.dumps(json.dumps(values))}), "
            "progress=lambda name, total: Slow())\n")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-c", code], env=env)
    deadline = time.time() + 120
    while not list(runs.glob("checkpoints/*.pt")):
        assert proc.poll() is None and time.time() < deadline
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not list(runs.glob("*.json"))
    cli = [str(Path(sys.executable).parent / "gnnprivacy"), "train", "--method", "dpmlp",
           "--dataset", "csbm", "--dataset-args", "num_nodes=200", "--steps", "400", "--json"]
    out = subprocess.run(cli + ["--runs-dir", str(runs), "--resume"], env=env,
                         capture_output=True, text=True, check=True)
    resumed = json.loads(out.stdout)
    fresh = json.loads(subprocess.run(cli + ["--runs-dir", str(tmp_path / "fresh")], env=env,
                                      capture_output=True, text=True, check=True).stdout)
    assert resumed["epsilon"] == fresh["epsilon"]
    assert resumed["metrics"] == fresh["metrics"]
    assert not list((runs / "checkpoints").glob("*.pt"))  # removed once the record is written
    rec = json.loads(Path(runs, resumed["run_id"] + ".json").read_text())
    assert sum(e["count"] for e in rec["privacy"]["ledger"]["ledger"]["entries"]) == 400
