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
    from gnnprivacy.training import _privacy

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


# ------------------------------------------------------------- issue 22 item 2
ADAPTIVE = {"name": "a", "base": {"method": "dpmlp", "dataset": "csbm",
                                  "dataset_args": "num_nodes=300", "train_frac": 0.5,
                                  "val_frac": 0.25, "test_frac": 0.25},
            "grid": {"lr": [0.01]}, "epsilon": 8.0,
            "trials": {"distribution": "negative_binomial", "mean": 2, "eta": 1},
            "seed": 0, "compare": False}


def test_total_is_composed_from_what_the_trials_ran(tmp_path):
    """The adaptive defaults choose the steps from the epsilon (here 102 at the target 8,
    fewer at the per-trial epsilon): the plan sized at the target recorded a total below
    the executed one (Cora dpmlp 7.901 vs 7.982). One setting, so Q's curve is the trials'
    own ledgers: recomputed here."""
    import numpy as np

    from gnnprivacy.accounting.hparam_tuning import trials_distribution
    from gnnprivacy.accounting.verify import ledger_rdp
    from gnnprivacy.records.record import read_record

    out = tune(ADAPTIVE, runs_dir=tmp_path)
    t = out["tuning"]
    records = [read_record(p) for p in (tmp_path / "tune-a-trials").glob("*.json")]
    (steps_run,) = {r.privacy["steps"] for r in records}
    assert steps_run < 102 and t["training_epsilon_per_trial"] < 8.0
    orders = _orders()
    curve = np.max([ledger_rdp(r.privacy["ledger"], orders) for r in records], axis=0)
    curve = curve + orders / (2 * 5.0 ** 2)
    dist = trials_distribution("negative_binomial", mean=2, eta=1)
    executed = tuned_epsilon(orders, curve, dist, t["delta"])
    assert t["total_epsilon"] == pytest.approx(executed, rel=1e-9) and executed <= 8.0
    assert out["epsilon"] == t["total_epsilon"]


def _cli_tune(tmp_path, name, *extra):
    import yaml
    from click.testing import CliRunner

    from gnnprivacy.cli import main

    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump({**ADAPTIVE, "name": name,
                                    "grid": {"lr": [0.01, 0.05], "hidden": [8, 16]},
                                    "base": {**ADAPTIVE["base"], "steps": 8}}))
    result = CliRunner().invoke(main, ["tune", "-c", str(path), "--runs-dir", str(tmp_path / name),
                                       "-q", *extra])
    assert result.exit_code == 0, result.output
    record = json.loads((tmp_path / name / f"tune-{name}.json").read_text())
    return record, result.output


def test_tune_twice_records_different_noisy_scores_unless_reproducible(tmp_path):
    """Acceptance (issue 22): the selection's randomness is not derived from the public
    seed; with --reproducible-selection it is, and the record says the selection is public."""
    first, _ = _cli_tune(tmp_path, "one")
    second, _ = _cli_tune(tmp_path, "two")

    def scores(rec):
        return [t["noisy_val_accuracy"] for t in rec["internal"]["trials"]]
    assert scores(first) != scores(second)
    assert first["tuning"]["selection"]["selection public"] is False
    assert not any("selection public" in u for u in first["privacy"]["unaccounted"])
    # control: the reproducible selection repeats exactly, and says so
    third, text = _cli_tune(tmp_path, "three", "--reproducible-selection")
    fourth, _ = _cli_tune(tmp_path, "four", "--reproducible-selection")
    assert scores(third) == scores(fourth)
    assert [t["seed"] for t in third["internal"]["trials"]] == \
        [t["seed"] for t in fourth["internal"]["trials"]]
    assert third["tuning"]["selection"]["selection public"] is True
    assert any("selection public" in u for u in third["privacy"]["unaccounted"])
    assert "selection public" in text


def test_selection_randomness_draws_are_in_range_and_secure_by_default():
    from gnnprivacy.experiments.tune import SelectionRandomness

    secure = SelectionRandomness()
    assert not secure.public
    draws = [secure.integers(3) for _ in range(300)]
    assert set(draws) == {0, 1, 2}
    assert 0.0 <= secure.random() < 1.0 and secure.poisson(2.0) >= 0
    a, b = SelectionRandomness(0), SelectionRandomness(0)
    assert [a.integers(10) for _ in range(5)] == [b.integers(10) for _ in range(5)]


def test_no_trial_drawn_records_the_plans_total(tmp_path):
    """Poisson K = 0 (seed 0, reproducible): nothing ran, the total is the settings' plans."""
    spec_ = {**ADAPTIVE, "name": "k0", "trials": {"distribution": "poisson", "mean": 0.5},
             "reproducible_selection": True}
    out = tune(spec_, runs_dir=tmp_path)
    assert out["internal"] == {"trials": 0} and out["released"] is None
    t = out["tuning"]
    assert out["epsilon"] == t["total_epsilon"] == pytest.approx(t["planned_total_epsilon"])
    assert t["total_epsilon"] <= 8.0 and t["selection"]["selection public"] is True


# ------------------------------------------------------------- issue 32 part 3
def _released_and_retrained(tmp_path, name, **kw):
    """The tuned model's weights, and those of a model retrained from its published config."""
    import torch

    from gnnprivacy.method.runner import run

    out = tune(spec(name=name, compare=False, grid={"lr": [0.05]}, **kw), runs_dir=tmp_path / name)
    (model,) = [f for f in out["files"] if f.endswith(".model.pt")]
    released = torch.load(tmp_path / name / f"tune-{name}-trials" / model, weights_only=True)
    again = run({**out["config"], "runs_dir": str(tmp_path / f"{name}-again")}, log=None, save=True)
    (model2,) = [f for f in again.files if f.endswith(".model.pt")]
    retrained = torch.load(tmp_path / f"{name}-again" / model2, weights_only=True)
    same = all(torch.equal(released["tensors"][k], retrained["tensors"][k])
               for k in released["tensors"])
    return out, same


def test_tuned_model_noise_cannot_be_regenerated_from_the_record(tmp_path):
    """Secret selection: the trials train with secure noise, so retraining from the published
    config (seed included) does not give the released model back."""
    out, same = _released_and_retrained(tmp_path, "secret")
    assert out["privacy"]["secure_mode"] is True and out["config"]["secure_mode"] is True
    assert not same
    assert not any("training noise public" in u for u in out["privacy"]["unaccounted"])


def test_seeded_trial_noise_is_regenerable_and_listed(tmp_path):
    """Control: with seeded trial noise (base secure_mode false) the published config gives
    the released model back bit for bit, and the record lists it as unaccounted."""
    out, same = _released_and_retrained(tmp_path, "seeded",
                                        base={**BASE, "secure_mode": False})
    assert out["privacy"]["secure_mode"] is False and same
    assert any("training noise public" in u for u in out["privacy"]["unaccounted"])
