"""DPEngine: noise std, empty batches, accounting of executed steps, DP-SGD/DP-Adam updates."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.training.dp import DPEngine, StepInfo, gaussian_noise, make_optimizer

DT = torch.float64


def small_model(seed=0, d=8, hidden=16, classes=4):
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return nn.Sequential(nn.Linear(d, hidden), nn.ELU(), nn.Linear(hidden, classes)).to(DT)


def data(num=32, d=8, classes=4, seed=1):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(num, d, generator=g, dtype=DT)
    return x, torch.randint(0, classes, (num,), generator=g)


class Recorder:
    def __init__(self):
        self.events = []

    def compose(self, event):
        self.events.append(event)
        return self


def collect_noise(engine: DPEngine, steps: int) -> torch.Tensor:
    """Noisy sums of empty batches: every coordinate is pure noise. (steps, n_params)."""
    empty = torch.zeros(0, 8, dtype=DT)
    out = []
    for _ in range(steps):
        noisy, num = engine.noisy_sum(lambda: F.cross_entropy(
            engine.model(empty), torch.zeros(0, dtype=torch.long), reduction="none"))
        assert num == 0
        out.append(torch.cat([v.flatten() for v in noisy.values()]))
    return torch.stack(out)


def noise_std_matches(engine: DPEngine, expected_std: float, steps: int = 100) -> bool:
    """Statistical check of G4 with tolerances from the sample size (5 standard errors)."""
    z = collect_noise(engine, steps)
    n = z.numel()
    std = float(z.std())
    mean = float(z.mean())
    lag1 = float((z[1:] * z[:-1]).mean() / z.var())
    return (abs(std / expected_std - 1) < 5 / math.sqrt(2 * n)
            and abs(mean) < 5 * expected_std / math.sqrt(n)
            and abs(lag1) < 5 / math.sqrt(z[1:].numel()))


def make_engine(model=None, *, clip_norm=0.5, noise_multiplier=2.0, seed=7, **kw):
    model = model or small_model()
    opt = make_optimizer("sgd", model.parameters(), lr=0.1)
    gen = None if kw.get("secure_mode") else torch.Generator().manual_seed(seed)
    return DPEngine(model, opt, clip_norm=clip_norm, noise_multiplier=noise_multiplier,
                    expected_batch_size=16.0, generator=gen, **kw)


def test_noise_std_equals_multiplier_times_clip_norm():
    engine = make_engine(clip_norm=0.5, noise_multiplier=2.0)
    assert engine.noise_std == pytest.approx(1.0)
    assert noise_std_matches(engine, 1.0)


def test_noise_positive_control_wrong_scale_is_caught():
    """A broken engine using std = multiplier (forgetting the clip norm) fails the same check."""

    class Broken(DPEngine):
        @property
        def noise_std(self):
            return self.noise_multiplier

    model = small_model()
    broken = Broken(model, make_optimizer("sgd", model.parameters(), lr=0.1), clip_norm=0.5,
                    noise_multiplier=2.0, expected_batch_size=16.0,
                    generator=torch.Generator().manual_seed(7))
    assert not noise_std_matches(broken, 1.0)


def test_secure_mode_noise_std():
    engine = make_engine(clip_norm=0.25, noise_multiplier=4.0, secure_mode=True)
    assert noise_std_matches(engine, 1.0, steps=60)


def test_fresh_noise_every_step_and_reproducible_from_generator():
    a = collect_noise(make_engine(seed=3), 3)
    b = collect_noise(make_engine(seed=3), 3)
    torch.testing.assert_close(a, b)
    assert not torch.allclose(a[0], a[1])


def test_empty_batch_still_adds_noise_and_is_accounted():
    model = small_model()
    before = [p.detach().clone() for p in model.parameters()]
    acct, infos = Recorder(), []
    engine = make_engine(model, accountant=acct, step_event="EVENT", sampling="full",
                         on_step=infos.append)
    empty = torch.zeros(0, 8, dtype=DT)
    info = engine.step(lambda: F.cross_entropy(model(empty), torch.zeros(0, dtype=torch.long),
                                               reduction="none"))
    assert info == StepInfo(1, 0, 1.0) and infos == [info]
    assert acct.events == ["EVENT"]
    assert all(not torch.equal(b, p) for b, p in zip(before, model.parameters()))


def test_accountant_sees_every_executed_step():
    x, y = data()
    acct = Recorder()
    engine = make_engine(accountant=acct, step_event="E", sampling="full")
    for t in range(5):
        engine.step(lambda: F.cross_entropy(engine.model(x[t:t + 4]), y[t:t + 4], reduction="none"))
    assert len(acct.events) == 5 == engine.steps_


@pytest.mark.parametrize("name", ["sgd", "adam"])
def test_without_noise_and_clipping_matches_plain_optimizer(name):
    """Spec 002 check 13: sigma = 0 and C = inf give exactly SGD / Adam on the mean loss."""
    x, y = data()
    dp_model, ref_model = small_model(), small_model()
    engine = DPEngine(dp_model, make_optimizer(name, dp_model.parameters(), lr=0.05),
                      clip_norm=1e12, noise_multiplier=0.0, expected_batch_size=8.0)
    ref_opt = make_optimizer(name, ref_model.parameters(), lr=0.05)
    for t in range(4):
        idx = slice(8 * t, 8 * t + 8)
        engine.step(lambda: F.cross_entropy(dp_model(x[idx]), y[idx], reduction="none"))
        ref_opt.zero_grad()
        F.cross_entropy(ref_model(x[idx]), y[idx]).backward()
        ref_opt.step()
    for p, q in zip(dp_model.parameters(), ref_model.parameters()):
        torch.testing.assert_close(p, q)


def test_update_divides_by_expected_not_realised_batch_size():
    x, y = data()
    model = small_model()
    w0 = model[2].bias.detach().clone()
    engine = DPEngine(model, make_optimizer("sgd", model.parameters(), lr=1.0), clip_norm=1e12,
                      noise_multiplier=0.0, expected_batch_size=100.0)
    ref = small_model()
    F.cross_entropy(ref(x[:5]), y[:5], reduction="sum").backward()
    engine.step(lambda: F.cross_entropy(model(x[:5]), y[:5], reduction="none"))
    torch.testing.assert_close(model[2].bias, w0 - ref[2].bias.grad / 100.0)


def test_update_clamp_bounds_the_update():
    model = small_model()
    w0 = [p.detach().clone() for p in model.parameters()]
    engine = make_engine(model, noise_multiplier=100.0, update_clamp=1e-3)
    empty = torch.zeros(0, 8, dtype=DT)
    engine.step(lambda: F.cross_entropy(model(empty), torch.zeros(0, dtype=torch.long),
                                        reduction="none"))
    for a, b in zip(w0, model.parameters()):  # sgd lr 0.1
        assert float((a - b.detach()).abs().max()) <= 0.1 * 1e-3 * (1 + 1e-9)


def test_bad_arguments():
    model = small_model()
    opt = make_optimizer("adam", model.parameters(), lr=0.01)
    gen = torch.Generator()
    for kw in [dict(clip_norm=0.0), dict(noise_multiplier=-1.0), dict(expected_batch_size=0.0),
               dict(update_clamp=-1.0)]:
        args = dict(clip_norm=1.0, noise_multiplier=1.0, expected_batch_size=4.0, generator=gen)
        args.update(kw)
        with pytest.raises(InvalidParameterError):
            DPEngine(model, opt, **args)
    with pytest.raises(ValueError, match="generator"):
        DPEngine(model, opt, clip_norm=1.0, noise_multiplier=1.0, expected_batch_size=4.0)
    with pytest.raises(ValueError, match="accountant"):
        DPEngine(model, opt, clip_norm=1.0, noise_multiplier=1.0, expected_batch_size=4.0,
                 generator=gen, accountant=Recorder())
    with pytest.raises(InvalidParameterError, match="secure"):
        DPEngine(model, opt, clip_norm=1.0, noise_multiplier=1.0, expected_batch_size=4.0,
                 generator=gen, secure_mode=True)
    with pytest.raises(InvalidParameterError):
        make_optimizer("rmsprop", model.parameters(), lr=0.1)
    with pytest.raises(ValueError):
        gaussian_noise(torch.zeros(3), 1.0)
    assert "noise_std" in repr(DPEngine(model, opt, clip_norm=1.0, noise_multiplier=1.0,
                                        expected_batch_size=4.0, generator=gen))


def test_noise_is_one_flat_draw_over_all_parameters_and_the_update_reads_it_whole():
    """One ``randn`` over the sums laid end to end (not one per parameter): the noisy sums
    are the flat sums plus exactly the generator's next draw of their total length, handed
    back as views of one vector, which `apply` scales in one operation."""
    model = small_model()
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    engine = DPEngine(model, opt, clip_norm=1.0, noise_multiplier=2.0, expected_batch_size=4.0,
                      generator=torch.Generator().manual_seed(5))
    sums = {n: torch.full_like(p, 0.5) for n, p in model.named_parameters()}
    noisy = engine.add_noise(sums)
    total = sum(p.numel() for p in model.parameters())
    draw = torch.randn(total, generator=torch.Generator().manual_seed(5), dtype=DT) * 2.0
    flat = torch.cat([v.reshape(-1) for v in noisy.values()])
    torch.testing.assert_close(flat, 0.5 + draw, rtol=0, atol=1e-12)
    assert list(noisy) == list(sums) and all(noisy[n].shape == sums[n].shape for n in sums)
    assert all(v._base is noisy.flat for v in noisy.values())
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    engine.apply(noisy, 4)
    for n, p in model.named_parameters():     # SGD at lr 1: p <- p - noisy / B_exp
        torch.testing.assert_close(p.detach(), before[n] - noisy[n] / 4.0)


def test_noise_over_sums_of_mixed_dtypes_keeps_each_dtype():
    gen = torch.Generator().manual_seed(0)
    from gnnprivacy.training.dp.noise import noised_flat

    out = noised_flat({"a": torch.zeros(3, dtype=torch.float32), "b": torch.zeros(2, dtype=DT)},
                      1.0, generator=gen)
    assert out["a"].dtype == torch.float32 and out["b"].dtype == DT
    assert float(out["a"].abs().sum()) > 0 and float(out["b"].abs().sum()) > 0
