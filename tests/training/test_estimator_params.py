"""scikit-learn's parameter protocol on every trainer (issue 25): get_params / set_params,
so ``sklearn.base.clone`` builds an unfitted twin."""

from __future__ import annotations

import pytest
import torch
from sklearn.base import clone

from gnnprivacy.datasets import load_dataset
from gnnprivacy.defenses import GRID, MemGuard, MinMaxTrainer
from gnnprivacy.errors import InvalidParameterError, UnknownNameError
from gnnprivacy.ldp import LPGNN, RGNN
from gnnprivacy.training import FullBatchTrainer, MiniBatchTrainer
from gnnprivacy.training.node_dp import DPGNNTrainer, DPMLPTrainer, HeterPoissonTrainer

TRAINERS = [
    (HeterPoissonTrainer, {"backbone": "gin", "epsilon": 4.0, "generator": 3}),
    (DPGNNTrainer, {"epsilon": 2.0, "max_degree": 5}),
    (DPMLPTrainer, {"epsilon": 1.0, "batch_size": 64}),
    (FullBatchTrainer, {"encoder": "sage", "hidden_channels": 8, "device": "cpu"}),
    (MiniBatchTrainer, {"encoder": "gcn", "batch_size": 32, "epochs": 3}),
    (RGNN, {}),
    (LPGNN, {}),
    (MinMaxTrainer, {"lam": 0.5}),
    (MemGuard, {"budget": 0.3}),
    (GRID, {"theta": 0.2}),
]


@pytest.mark.parametrize("cls, kwargs", TRAINERS, ids=lambda v: getattr(v, "__name__", ""))
def test_clone_gives_an_equal_unfitted_twin(cls, kwargs):
    est = cls(**kwargs)
    params = est.get_params(deep=False)
    assert sorted(params) == cls._get_param_names()
    for key, value in kwargs.items():
        assert params[key] == value
    twin = clone(est)
    assert type(twin) is cls and twin is not est
    assert twin.get_params(deep=False).keys() == params.keys()
    for key, value in params.items():
        if isinstance(value, (int, float, str, type(None))):
            assert twin.get_params(deep=False)[key] == value


def test_clone_of_a_fitted_trainer_is_unfitted_and_refits_identically():
    data = load_dataset("csbm", num_nodes=200, seed=0)
    est = HeterPoissonTrainer(epsilon=4.0, steps=3, hidden_channels=8, generator=5).fit(data)
    twin = clone(est)
    assert not hasattr(twin, "model_") and hasattr(est, "model_")
    twin.fit(data)
    assert twin.epsilon_ == est.epsilon_
    for a, b in zip(twin.model_.parameters(), est.model_.parameters()):
        assert torch.equal(a, b)


def test_set_params_validates_like_the_constructor():
    est = HeterPoissonTrainer(epsilon=4.0)
    assert est.set_params(epsilon=2.0, backbone="sage") is est
    assert est.epsilon == 2.0 and est.backbone == "sage"
    assert est.get_params()["epsilon"] == 2.0
    with pytest.raises(InvalidParameterError, match="epsilon"):
        est.set_params(epsilon=-1.0)
    with pytest.raises(UnknownNameError, match="epsilon"):
        est.set_params(epsilonn=1.0)
    # MiniBatchTrainer passes **kwargs to FullBatchTrainer: both constructors' names count
    mb = MiniBatchTrainer(hidden_channels=16).set_params(num_layers=3, fanouts="5,5,5")
    assert mb.encoder_kwargs["num_layers"] == 3 and mb.fanouts == [5, 5, 5]
    with pytest.raises(InvalidParameterError, match="fanout"):
        MiniBatchTrainer().set_params(num_layers=3)        # 2 fanouts for 3 layers


def test_a_class_without_the_protocol_cannot_be_cloned():
    # positive control: what clone did to the trainers before issue 25
    class Plain:
        def __init__(self, epsilon=1.0):
            self.epsilon = epsilon

    with pytest.raises(TypeError, match="get_params"):
        clone(Plain(), safe=True)
