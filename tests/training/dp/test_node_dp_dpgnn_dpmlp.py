"""DPGNNTrainer and DPMLPTrainer: noise scale, one-sided calibration, settings, bad input."""

from __future__ import annotations

import pytest
import torch

from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.training.node_dp import DPGNNTrainer, DPMLPTrainer

from test_node_dp_heterpoisson import toy_data  # noqa: E402  (same test directory)


def test_dpgnn_noise_is_lambda_times_sensitivity_and_calibration_is_one_sided():
    data = toy_data(n=60)
    tr = DPGNNTrainer(epsilon=4.0, max_degree=3, batch_size=10, steps=5, clip_norm=0.7,
                      hidden_channels=8, generator=0).fit(data)
    assert tr.noise_std_ == pytest.approx(tr.noise_multiplier_ * 2 * (3 + 1) * 0.7)
    assert tr.steps_ == 5 and tr.accountant_.ledger.total_count == 5
    assert tr.epsilon_ <= 4.0 and tr.epsilon_ > 3.9  # one-sided, within the calibration rtol
    assert tr.delta_ == pytest.approx(1 / (10 * 30))
    assert tr.privacy_record()["relation"] == "replace"
    assert tr.predict(data).shape == (60,)
    assert "test_accuracy" in tr.score(data)


def test_dpgnn_variants_per_tensor_poisson_sgd_percentile():
    data = toy_data(n=60)
    with pytest.warns(UserWarning, match="without privacy accounting"):
        tr = DPGNNTrainer(epsilon=8.0, max_degree=2, batch_size=10, steps=3, sampling="poisson",
                          optimizer="sgd", clip_grouping="per_tensor", clip_percentile=75,
                          noise_multiplier=1.0, hidden_channels=4, generator=1).fit(data)
    record = tr.privacy_record()
    assert record["relation"] == "add_or_remove" and len(record["clip_norms"]) == 5
    assert "clip_percentile calibration" in record["unaccounted"]
    assert any("greedy degree bounding" in u for u in record["unaccounted"])
    assert any("inference on the full graph" in u for u in record["unaccounted"])
    c_eff = torch.tensor(record["clip_norms"]).square().sum().sqrt().item()
    assert tr.noise_std_ == pytest.approx(1.0 * 2 * 3 * c_eff)
    assert tr.lr == 1.0  # SGD default


def test_dpgnn_inductive_trains_on_the_training_graph():
    data = toy_data(n=60, inductive=True)
    a = DPGNNTrainer(epsilon=8.0, max_degree=2, batch_size=8, steps=2, noise_multiplier=1.0,
                     hidden_channels=4, generator=3).fit(data)
    altered = data.clone()
    altered.x[data.test_mask] = 1e3
    b = DPGNNTrainer(epsilon=8.0, max_degree=2, batch_size=8, steps=2, noise_multiplier=1.0,
                     hidden_channels=4, generator=3).fit(altered)
    for p, q in zip(a.model_.parameters(), b.model_.parameters()):
        assert torch.equal(p, q)


def test_dpmlp_noise_and_accounting():
    data = toy_data(n=60)
    tr = DPMLPTrainer(epsilon=2.0, batch_size=10, steps=6, clip_norm=0.3, generator=0).fit(data)
    assert tr.noise_std_ == pytest.approx(tr.noise_multiplier_ * 0.3)
    assert tr.epsilon_ <= 2.0 and tr.steps_ == 6
    assert tr.privacy_record()["sample_rate"] == pytest.approx(10 / 30)
    assert tr.predict(data).shape == (60,)
    shapes = [tuple(p.shape) for p in tr.model_.parameters()]
    assert shapes[0] == (32, 6) and shapes[-1] == (3,)


@pytest.mark.parametrize("cls", [DPGNNTrainer, DPMLPTrainer])
@pytest.mark.parametrize("kw", [dict(epsilon=0.0), dict(delta=1.0), dict(delta=-0.1),
                                dict(batch_size=0), dict(steps=0), dict(clip_norm=0.0)])
def test_bad_input(cls, kw):
    with pytest.raises(InvalidParameterError):
        cls(**kw)


def test_dpgnn_specific_bad_input():
    for kw in [dict(max_degree=-1), dict(sampling="replace"), dict(optimizer="rmsprop"),
               dict(clip_grouping="per_layer"), dict(clip_percentile=120.0),
               dict(activation="gelu")]:
        with pytest.raises(InvalidParameterError):
            DPGNNTrainer(**kw)
    with pytest.raises(InvalidParameterError):  # batch larger than the training set
        DPGNNTrainer(batch_size=1000, steps=1, noise_multiplier=1.0).fit(toy_data(n=20))


def test_zero_noise_is_labelled_non_private():
    tr = DPMLPTrainer(epsilon=1.0, batch_size=10, steps=2, noise_multiplier=0.0,
                      generator=0).fit(toy_data(n=40))
    assert tr.noise_std_ == 0.0 and tr.epsilon_ == float("inf")
