"""gnnprivacy tune: a random number of trials, selection accounted (Papernot & Steinke)."""

import json

import pytest

from gnnprivacy.accounting.hparam_tuning import TruncatedNegativeBinomial, tuned_epsilon
from gnnprivacy.errors import InvalidParameterError, UnknownNameError
from gnnprivacy.experiments.tune import TuneSpec, _orders, _trial_rdp, plan_trial_budget, tune

BASE = {"method": "dpmlp", "dataset": "csbm", "dataset_args": "num_nodes=400",
        "train_frac": 0.5, "val_frac": 0.25, "test_frac": 0.25, "steps": 8, "batch_size": 64}


def spec(**kw):
    data = {"name": "t", "base": dict(BASE), "grid": {"lr": [0.01, 0.05], "hidden": [8, 16]},
            "epsilon": 4.0, "trials": {"distribution": "negative_binomial", "mean": 2, "eta": 1},
            "seed": 0, "compare": True}
    data.update(kw)
    return data


def test_spec_validation():
    s = TuneSpec.from_dict(spec())
    assert len(s.settings()) == 4 and s.distribution().mean() == pytest.approx(2)
    with pytest.raises(UnknownNameError):
        TuneSpec.from_dict(spec(budget=3))
    with pytest.raises(InvalidParameterError):
        TuneSpec.from_dict(spec(base={**BASE, "epsilon": 3}))
    with pytest.raises(InvalidParameterError):
        TuneSpec.from_dict(spec(base={**BASE, "method": "gcn"}))
    with pytest.raises(UnknownNameError):
        TuneSpec.from_dict(spec(trials={"distribution": "poisson", "mu": 3}))


def _plans():
    from gnnprivacy.accounting.units import NeighboringRelation
    from gnnprivacy.training.node_dp import _privacy

    return [(_privacy.dpsgd_event_factory(sample_rate=0.1), 50, "pld",
             NeighboringRelation.ADD_OR_REMOVE)]


@pytest.mark.parametrize("dist", [TruncatedNegativeBinomial.with_mean(5.0, 1.0),
                                  TruncatedNegativeBinomial.with_mean(5.0, 0.0)])
def test_budget_meets_the_target_and_ignoring_selection_would_not(dist):
    delta = 1e-5
    plan = plan_trial_budget(_plans(), epsilon=4.0, delta=delta, distribution=dist, score_std=5.0)
    assert plan["total_epsilon"] <= 4.0 and plan["total_epsilon"] >= 0.9 * 4.0
    assert plan["training_epsilon"] < 4.0
    # positive control: training every trial at the full target (selection not counted)
    orders = _orders()
    curve, _ = _trial_rdp(_plans(), 4.0, delta, orders, orders / (2 * 25.0))
    assert tuned_epsilon(orders, curve, dist, delta) > 4.0


def test_tune_end_to_end_records_total_epsilon_and_comparison(tmp_path):
    out = tune(spec(), runs_dir=tmp_path)
    t = out["tuning"]
    assert out["epsilon"] == t["total_epsilon"] <= 4.0
    assert t["training_epsilon_per_trial"] < t["total_epsilon"]
    assert out["privacy"]["training_epsilon"] <= t["training_epsilon_per_trial"] + 1e-9
    assert t["public"] and "unaccounted" in out["privacy"]
    assert t["chosen_setting"] in TuneSpec.from_dict(spec()).settings()
    assert out["comparison"]["nominal_epsilon"] == 4.0 and len(out["comparison"]["rows"]) == 4
    assert out["internal"]["num_trials"] == len(out["internal"]["trials"]) >= 1
    assert "val_accuracy" not in out["metrics"] and "val_accuracy_noisy" in out["metrics"]
    saved = json.loads((tmp_path / "tune-t.json").read_text())
    assert saved["tuning"]["total_epsilon"] == pytest.approx(t["total_epsilon"])


def test_tune_needs_validation_nodes(tmp_path):
    with pytest.raises(InvalidParameterError):
        tune(spec(base={**BASE, "train_frac": 0.8, "val_frac": 0.0, "test_frac": 0.2}),
             runs_dir=tmp_path)
