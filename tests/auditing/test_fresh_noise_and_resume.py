"""Issue 43 items 3 and 4. Noise is fresh: a reused or correlated noise draw is flagged by
the code audit's ``fresh_noise`` check on every path, DP-GNN's included, whatever its variance
(the variance test only caught it by chance). Resumes are audited: a run killed after a
checkpoint and resumed is judged as one run, both halves' releases against the one ledger;
an honest resume passes, a resume that composes one step fewer (or a checkpoint that claims
one fewer) is flagged."""

from __future__ import annotations

import math

import pytest
import torch

import gnnprivacy as gp
from audit_paths import Sage, audit, failed, node_data, node_loop
from gnnprivacy.auditing.code import code_audit
from gnnprivacy.auditing.outside import fresh_noise_check
from gnnprivacy.training.dp import engine as engine_module
from gnnprivacy.training.dp import noise as noise_module
from test_mutants import Mutant, applied, by_id


# ---------------------------------------------------------------------- fresh noise
def _reuse_first_draw(monkeypatch):
    """Every engine puts its noise generator back to where it was before its first draw."""
    add = engine_module.DPEngine.add_noise

    def reused(self, sums):
        if not hasattr(self, "_first_state"):
            self._first_state = self.generator.get_state()
        else:
            self.generator.set_state(self._first_state)
        return add(self, sums)

    monkeypatch.setattr(engine_module.DPEngine, "add_noise", reused)


def _carry_over(monkeypatch, weight=0.6):
    """Each draw keeps ``weight`` of the previous one (the same variance)."""
    draw = noise_module.gaussian_noise
    previous = {}

    def correlated(like, std, **kw):
        fresh = draw(like, std, **kw)
        old = previous.get(like.numel())
        out = fresh if old is None else weight * old + math.sqrt(1 - weight ** 2) * fresh
        previous[like.numel()] = out
        return out

    monkeypatch.setattr(noise_module, "gaussian_noise", correlated)


@pytest.mark.parametrize("path", ["method:dpgnn", "method:heterpoisson", "make_private:nodes",
                                  "make_private:graphs"])
def test_a_reused_noise_draw_is_flagged_on_every_path(path, monkeypatch):
    _reuse_first_draw(monkeypatch)
    result = audit(path, publication=False) if path.startswith("method") else audit(path)
    assert result.violation and "fresh_noise" in failed(result), result.summary()
    fresh = result.details["checks"][0]["fresh_noise"]
    assert "same noise" in fresh["detail"], fresh


@pytest.mark.parametrize("path", ["method:dpgnn", "make_private:heterpoisson"])
def test_a_correlated_noise_draw_is_flagged(path, monkeypatch):
    _carry_over(monkeypatch)
    result = audit(path, publication=False) if path.startswith("method") else audit(path)
    fresh = result.details["checks"][0]["fresh_noise"]
    assert "fresh_noise" in failed(result) and "correlated" in fresh["detail"], fresh
    # the variance of each draw is right: the noise check alone would not see it
    assert "noise" not in failed(result), result.summary()


class _Observer:
    def __init__(self, samples):
        self.noise_samples = samples


def _samples(steps, coords, gen, carry=0.0, reuse=False):
    out, prev = [], None
    for _ in range(steps):
        z = torch.randn(coords, generator=gen, dtype=torch.float64)
        if prev is not None and reuse:
            z = prev.clone()
        elif prev is not None and carry:
            z = carry * prev + math.sqrt(1 - carry ** 2) * z
        prev = z
        out.append({"w": z[: coords - 70], "b": z[coords - 70:]})
    return out


@pytest.mark.statistical
def test_fresh_noise_false_alarm_rate_and_power():
    """Honest draws (1,000 runs of 30 releases x 1,000 coordinates) are flagged at most at
    the stated rate 1e-3 plus binomial slack; a reused draw, and a draw carrying a third of
    the previous one, are flagged every time."""
    gen = torch.Generator().manual_seed(0)
    alarms = sum(not fresh_noise_check(_Observer(_samples(30, 1000, gen)))["passed"]
                 for _ in range(1000))
    assert alarms <= 5                        # mean 1; P(Bin(1000, 1e-3) > 5) < 1e-3
    assert all(not fresh_noise_check(_Observer(_samples(30, 1000, gen, reuse=True)))["passed"]
               for _ in range(50))
    assert all(not fresh_noise_check(_Observer(_samples(30, 1000, gen, carry=1 / 3)))["passed"]
               for _ in range(50))


# ---------------------------------------------------------------------- resumes
def _resumed_user_loop(kill_after: int = 8):
    """A make_private run saved after ``kill_after`` steps, then resumed in a new
    PrivateTraining from that state (the two halves of one run)."""
    data = node_data()

    def fresh():
        torch.manual_seed(0)
        model = Sage(data.num_features, 4)
        opt = torch.optim.Adam(model.parameters(), lr=0.01)
        return model, opt, gp.make_private(model, opt, data, sampler="heterpoisson",
                                           epsilon=4.0, seed=0, steps=20, batch_size=40)

    def train():
        model, opt, pt = fresh()
        batches = iter(pt.loader)
        for _ in range(kill_after):
            batch = next(batches)
            opt.zero_grad()
            out = model(batch.x, batch.edge_index)
            torch.nn.functional.cross_entropy(out[batch.center], batch.y[batch.center]).backward()
            opt.step()
        state = pt.state_dict()
        del batches
        pt.close()
        model, opt, pt = fresh()
        pt.load_state_dict(state)
        node_loop(pt, model, opt)
        pt.close()
        return {"epsilon": pt.epsilon, "delta": pt.delta}

    return train


def _releases(result):
    return [c["releases"] for c in result.details["checks"]]


def test_an_honest_resume_passes_as_one_run():
    result = code_audit(_resumed_user_loop(), seed=0)
    assert not result.violation, result.summary()
    first, second = _releases(result)
    assert (first["releases"], first["ledger_steps"]) == (8, 8)
    assert (second["releases"], second["carried"], second["ledger_steps"]) == (12, 8, 20)


LOAD_ONE_FEWER = by_id("resume-one-fewer")                 # the committed mutant
SAVE_ONE_FEWER = Mutant(
    "checkpoint-one-fewer", "resume",
    "gnnprivacy.training.private.make_private:PrivateTraining.state_dict",
    '"steps": self.steps,', '"steps": self.steps - 1,', "")


def test_a_resume_that_composes_one_step_fewer_is_flagged():
    with applied(LOAD_ONE_FEWER):
        result = code_audit(_resumed_user_loop(), seed=0)
    assert result.violation and "releases" in failed(result), result.summary()
    assert result.epsilon_claimed < 4.0 - 0.05         # the claim that the audit refutes
    assert "composed 7 steps for a checkpoint of 8" in result.summary()


def test_a_checkpoint_that_claims_one_step_fewer_is_flagged():
    """The state claims 7 of its 8 executed steps; the resume composes 7 and runs 13 more:
    21 releases behind a ledger of 20."""
    with applied(SAVE_ONE_FEWER):
        result = code_audit(_resumed_user_loop(), seed=0)
    assert result.violation and "releases" in failed(result), result.summary()
    assert "a checkpoint claims 7 executed steps after 8" in result.summary()


def _killed_trainer(tmp, kill_after=7, steps=20):
    """A HeterPoisson trainer checkpointing every step, killed (an exception from its
    progress bar) after ``kill_after`` steps, then resumed from the checkpoint."""
    from gnnprivacy.training.node_dp.heterpoisson import HeterPoissonTrainer

    data = node_data()

    class Killer:
        def __init__(self):
            self.done = 0

        def update(self, n):
            self.done += n
            if self.done >= kill_after:
                raise KeyboardInterrupt

    def train():
        kw = dict(epsilon=4.0, steps=steps, q_b=0.2, generator=0, checkpoint_every=1,
                  checkpoint_path=tmp / "run.ckpt")
        with pytest.raises(KeyboardInterrupt):
            HeterPoissonTrainer(**kw, progress=lambda name, total: Killer()).fit(data)
        trainer = HeterPoissonTrainer(**kw, resume=True).fit(data)
        return {"epsilon": trainer.epsilon_, "delta": trainer.delta_}

    return train


def test_a_resumed_trainer_passes_and_a_short_checkpoint_is_refused(tmp_path):
    """The built-in trainers' resume: the audit judges both halves as one run (it flagged
    an honest resumed half before); a checkpoint claiming one step fewer than its ledger is
    refused by the resume itself (the rebuilt ledger must equal the saved one)."""
    result = code_audit(_killed_trainer(tmp_path), seed=0)
    assert not result.violation, result.summary()
    first, second = _releases(result)
    # killed during the 7th step's bookkeeping, before its checkpoint: 6 steps carried
    assert (first["releases"], first["ledger_steps"]) == (7, 7)
    assert (second["releases"], second["carried"], second["ledger_steps"]) == (14, 6, 20)
    (tmp_path / "run.ckpt").unlink()
    with applied(Mutant("trainer-checkpoint-one-fewer", "resume",
                        "gnnprivacy.training.node_dp.base:NodeDPTrainer._save",
                        '"step": engine.steps_,', '"step": engine.steps_ - 1,', "")):
        with pytest.raises(RuntimeError, match="rebuilt ledger differs"):
            code_audit(_killed_trainer(tmp_path), seed=0)
