"""Check what was spent (issue 22 item 7).

* every event the library records rebuilds from its JSON form (the ledger can be composed
  again in a fresh accountant);
* a damaged or hand-edited accounting-cache entry fails its checksum: a warning, then the
  value is recomputed (before: an edited calibration gave epsilon 7,915 against a target
  of 8 and a finished record);
* the runner composes every private run's executed ledger in a fresh accountant and
  refuses to write a finished record above the target, even when the cache entry was
  forged with a valid checksum or the calibration undershot.
"""

from __future__ import annotations

import json
import math
import warnings

import pytest
from dp_accounting import dp_event

from gnnprivacy.accounting import (calibrate_noise_multiplier, disk_cache, dpgnn_event,
                                   heterpoisson_event, make_accountant)
from gnnprivacy.accounting.events import EpsilonDeltaDpEvent, ScopedDpEvent, event_to_dict
from gnnprivacy.accounting.units import NeighboringRelation, PrivacyUnit
from gnnprivacy.accounting.verify import (SpentBudgetError, check_spent, event_from_dict,
                                          recompute_epsilon)
from gnnprivacy.training import _privacy

EVENTS = [
    dp_event.GaussianDpEvent(1.3),
    dp_event.PoissonSampledDpEvent(0.1, dp_event.GaussianDpEvent(2.0)),
    dp_event.LaplaceDpEvent(0.5),
    dp_event.RandomizedResponseDpEvent(0.2, 4),
    dp_event.SelfComposedDpEvent(dp_event.GaussianDpEvent(3.0), 7),
    dp_event.ComposedDpEvent([dp_event.GaussianDpEvent(3.0), dp_event.LaplaceDpEvent(1.0)]),
    dp_event.MixtureOfGaussiansDpEvent(2.0, (0.0, 1.0, 2.0), (0.5, 0.3, 0.2)),
    heterpoisson_event(q_b=0.2, M=2.0, max_out_degree=40, noise_multiplier=3.0),
    dpgnn_event(num_train=500, max_degree=3, batch_size=64, noise_multiplier=1.5),
    EpsilonDeltaDpEvent(1.0, 0.0),
    ScopedDpEvent(dp_event.LaplaceDpEvent(1.0), PrivacyUnit.EDGE, NeighboringRelation.REPLACE),
    dp_event.NonPrivateDpEvent(),
]


@pytest.mark.parametrize("event", EVENTS, ids=lambda e: type(e).__name__)
def test_every_recorded_event_rebuilds_from_its_json(event):
    data = json.loads(json.dumps(event_to_dict(event)))
    assert event_from_dict(data) == event
    assert repr(event_from_dict(data)) == repr(event)      # same accountant cache keys


def _ledger(z=1.5, steps=50, q=0.1, delta=1e-5):
    acc = make_accountant("pld").compose(
        dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(z)), steps)
    return json.loads(json.dumps(acc.to_dict(delta))), acc.get_epsilon(delta)


def test_recompute_matches_the_accountant_and_check_spent_refuses_above_target():
    data, eps = _ledger()
    assert recompute_epsilon(data) == pytest.approx(eps, rel=1e-12)
    assert check_spent(data, reported=eps, target=eps * 1.01) == pytest.approx(eps)
    with pytest.raises(SpentBudgetError, match="above its target"):
        check_spent(data, reported=eps, target=0.5 * eps)
    # a record that understates what its ledger costs is refused too
    with pytest.raises(SpentBudgetError, match="the epsilon it reports"):
        check_spent(data, reported=0.5 * eps)


def _entries(kind):
    directory = disk_cache.cache_dir()
    return sorted(directory.glob(f"{kind}-*"))


def _edit_json(path, key, value):
    stored = json.loads(path.read_text())
    stored["value"][key] = value
    path.write_text(json.dumps(stored))


def test_an_edited_calibration_entry_is_recomputed_with_a_warning():
    kw = dict(steps=30, target_epsilon=2.0, target_delta=1e-5)
    make = _privacy.dpsgd_event_factory(sample_rate=0.05)
    before = set(_entries("calibration"))
    z = calibrate_noise_multiplier(make, **kw)
    (path,) = set(_entries("calibration")) - before
    _edit_json(path, "noise_multiplier", z / 100)
    with pytest.warns(RuntimeWarning, match="failed its checksum"):
        again = calibrate_noise_multiplier(make, **kw)
    assert again == pytest.approx(z, rel=1e-12)
    with warnings.catch_warnings():
        warnings.simplefilter("error")                 # rewritten entry: read silently
        assert calibrate_noise_multiplier(make, **kw) == again


def test_edited_epsilon_and_pld_entries_are_recomputed():
    event = heterpoisson_event(q_b=0.3, M=1.0, max_out_degree=17, noise_multiplier=2.7)
    eps = make_accountant("pld").compose(event, 11).get_epsilon(1e-5)
    for path in _entries("epsilon"):
        _edit_json(path, "epsilon", 1e-3)
    for path in _entries("pld"):
        with open(path, "r+b") as handle:            # flip bytes in the stored arrays
            handle.seek(-200, 2)
            chunk = handle.read(8)
            handle.seek(-200, 2)
            handle.write(bytes(b ^ 0xFF for b in chunk))
    with pytest.warns(RuntimeWarning, match="failed its checksum"):
        again = make_accountant("pld").compose(event, 11).get_epsilon(1e-5)
    assert again == pytest.approx(eps, rel=1e-9)


# ---------------------------------------------------------------- the runner refuses
RUN = {"method": "dpmlp", "dataset": "csbm", "dataset_args": "num_nodes=300", "epsilon": 4.0,
       "steps": 20, "seed": 0}


def _forge(path, value):
    """A forger who also recomputes the checksum (the cache alone cannot stop this one)."""
    key = path.stem
    stored = {"value": value, "sha256": disk_cache._json_digest(key, value)}  # noqa: SLF001
    path.write_text(json.dumps(stored))


def test_runner_refuses_a_run_whose_executed_ledger_exceeds_the_target(tmp_path):
    from gnnprivacy.method.runner import run

    _privacy.calibrate.cache_clear()
    before = set(_entries("calibration"))
    honest = run({**RUN, "runs_dir": str(tmp_path / "ok")})
    assert honest.epsilon <= 4.0 and list((tmp_path / "ok").glob("*.json"))  # control
    (path,) = set(_entries("calibration")) - before
    z = json.loads(path.read_text())["value"]["noise_multiplier"]
    _forge(path, {"noise_multiplier": z / 20})
    _privacy.calibrate.cache_clear()
    with pytest.raises(SpentBudgetError, match="above its target 4"):
        run({**RUN, "runs_dir": str(tmp_path / "bad")})
    assert not list((tmp_path / "bad").glob("*.json"))     # no finished record
    path.unlink()
    _privacy.calibrate.cache_clear()


def test_runner_refuses_a_record_that_understates_its_ledger(tmp_path, monkeypatch):
    """A trainer that reports less than its ledger costs (e.g. from a forged cached
    epsilon) is caught: the fresh accountant recomputes the real figure."""
    from gnnprivacy.method.runner import run
    from gnnprivacy.training.node_dp import base

    real = base.NodeDPTrainer._finish

    def understating(self, engine, delta):
        real(self, engine, delta)
        self.epsilon_ *= 0.5
    monkeypatch.setattr(base.NodeDPTrainer, "_finish", understating)
    with pytest.raises(SpentBudgetError, match="the epsilon it reports"):
        run({**RUN, "runs_dir": str(tmp_path)})
    assert not list(tmp_path.glob("*.json"))


def test_cli_train_with_an_edited_cache_exits_nonzero(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from gnnprivacy.cli import main

    args = ["train", "--method", "dpmlp", "--dataset", "csbm", "--dataset-args",
            "num_nodes=300", "--epsilon", "8", "--runs-dir", str(tmp_path), "-q"]
    _privacy.calibrate.cache_clear()
    before = set(_entries("calibration"))
    assert CliRunner().invoke(main, args).exit_code == 0
    for path in set(_entries("calibration")) - before:
        _edit_json(path, "noise_multiplier", 0.05)       # the edit
    _privacy.calibrate.cache_clear()
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output          # detected, recomputed, honest
    records = [json.loads(p.read_text()) for p in tmp_path.glob("*.json")]
    assert len(records) == 2 and all(r["epsilon"] <= 8.0 for r in records)
    assert all(math.isfinite(r["epsilon"]) for r in records)
    for path in set(_entries("calibration")) - before:
        _forge(path, {"noise_multiplier": 0.05})         # checksum recomputed too
    _privacy.calibrate.cache_clear()
    result = CliRunner().invoke(main, args)
    assert result.exit_code != 0 and "above its target 8" in result.output
    assert "Traceback" not in result.output and len(list(tmp_path.glob("*.json"))) == 2
    for path in set(_entries("calibration")) - before:
        path.unlink()
    _privacy.calibrate.cache_clear()
