"""The registered methods ``rgnn``, ``lpgnn`` and ``ldp-naive`` through the experiment runner."""

from __future__ import annotations

import dataclasses
import math
import os

import pytest

import gnnprivacy.method.builtin.ldp as ldp_methods  # noqa: F401  (registers the methods)
from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.method.registry import get_method
from gnnprivacy.method.runner import run

FAST = {"dataset": "csbm", "seed": 3, "group_size": 1, "epochs": 15}


def _run(**values):
    return run({**FAST, **values}, save=False)


def test_methods_are_registered_with_documented_params():
    for name, params in (("rgnn", ldp_methods.RGNNParams), ("lpgnn", ldp_methods.LPGNNParams),
                         ("ldp-naive", ldp_methods.LDPParams)):
        spec = get_method(name)
        assert spec.private and spec.params is params
        for f in dataclasses.fields(params):
            assert f.metadata.get("help"), f.name
    defaults = ldp_methods.RGNNParams()
    assert (defaults.eps_x, defaults.eps_y, defaults.m, defaults.backbone) == (1.0, 1.0, 10, "sage")
    assert (defaults.kx, defaults.ky, defaults.eps_mode) == (16, 16, "sound")


def test_rgnn_run_reports_sound_epsilon_ledger_and_metrics():
    rec = _run(method="rgnn", eps_x=0.5, eps_y=2.0, kx=2, ky=2, num_clusters=4)
    assert rec.epsilon == pytest.approx(10 * 0.5 + 2.0) and rec.delta == 0.0
    assert {"test_accuracy", "test_macro_f1", "val_accuracy", "val_noisy_accuracy"} <= set(rec.metrics)
    assert 0.0 <= rec.metrics["test_accuracy"] <= 1.0
    priv = rec.privacy
    assert priv["unit"] == "node" and priv["relation"] == "replace"
    assert priv["labeled_user_epsilon_sound"] == pytest.approx(7.0)
    assert priv["labeled_user_epsilon_paper"] < 7.0
    entries = priv["ledger"]["ledger"]["entries"]
    assert [e["event"] for e in entries] == ["EpsilonDeltaDpEvent", "RandomizedResponseDpEvent"]
    assert rec.info["config"]["kx"] == 2 and rec.info["num_features"] == 32


def test_paper_mode_reports_the_amplified_figure():
    rec = _run(method="rgnn", eps_x=1.0, eps_y=1.0, kx=2, ky=2, num_clusters=4, eps_mode="paper")
    d, m = 32, 10
    assert rec.epsilon == pytest.approx(math.log1p(m / d * math.expm1(m)) + 1.0)
    assert rec.privacy["labeled_user_epsilon_sound"] == pytest.approx(11.0)


def test_naive_and_lpgnn_and_selection_run():
    naive = _run(method="ldp-naive", eps_y=3.0)
    assert naive.info["config"]["kx"] == 0 and naive.info["config"]["alpha"] == 0.0
    assert naive.epsilon == pytest.approx(13.0)
    lp = _run(method="lpgnn", eps_y=3.0, kx=2, ky=2)
    assert lp.privacy["feature_mechanism"] == "multibit" and lp.info["multibit_epsilon"] == 10.0
    sel = _run(method="rgnn", select_hparams=True, num_clusters=4, epochs=5)
    table = sel.info["selection"]
    assert len(table) == 4 and sum(row["chosen"] for row in table) == 1


def test_bad_parameters_and_features_raise_clear_errors():
    with pytest.raises(InvalidParameterError, match="eps_x"):
        _run(method="rgnn", eps_x=0.0)
    with pytest.raises(InvalidParameterError, match="eps_mode"):
        _run(method="rgnn", eps_mode="amplified")
    with pytest.raises(InvalidParameterError, match="'m'"):
        _run(method="rgnn", m=40)
    with pytest.raises(InvalidParameterError, match="non-binary features given to GRR-FS"):
        run({**FAST, "group_size": None, "method": "ldp-naive"}, save=False)


def _shared():
    root = os.environ.get("GNNPRIVACY_SHARED_DATASETS",
                          os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared",
                                       "datasets"))
    if not os.path.isdir(os.path.join(root, "Cora")):
        pytest.skip(f"shared datasets not found at {root}")
    return root


@pytest.mark.dataset
def test_rgnn_beats_naive_on_cora(tmp_path, monkeypatch):
    monkeypatch.setenv("GNNPRIVACY_CACHE", str(tmp_path))
    base = {"dataset": "cora", "data_root": _shared(), "split": "random", "seed": 123,
            "eps_x": 1.0, "eps_y": 3.0}
    rgnn = run({**base, "method": "rgnn"}, save=False).metrics["test_accuracy"]
    naive = run({**base, "method": "ldp-naive"}, save=False).metrics["test_accuracy"]
    assert rgnn > 0.72 and rgnn > naive + 0.3, (rgnn, naive)
