"""Registered methods heterpoisson / dpgnn / dpmlp: params validation and one run each."""

from __future__ import annotations

import dataclasses
import math

import pytest

import gnnprivacy.method.builtin.node_dp as node_dp_methods
from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.method.context import MethodResult, RunContext
from gnnprivacy.method.registry import get_method
from gnnprivacy.training import _privacy

from test_node_dp_heterpoisson import CountingAccountant, toy_data  # noqa: E402

PARAMS = {"heterpoisson": node_dp_methods.HeterPoissonParams,
          "dpgnn": node_dp_methods.DPGNNParams, "dpmlp": node_dp_methods.DPMLPParams}


@pytest.mark.parametrize("name", sorted(PARAMS))
def test_registered_with_documented_frozen_params(name):
    spec = get_method(name)
    assert spec.private and spec.params is PARAMS[name]
    params = spec.params()
    assert params.epsilon == 8.0 and params.delta is None
    for f in dataclasses.fields(spec.params):
        assert f.metadata.get("help"), f.name
    with pytest.raises(dataclasses.FrozenInstanceError):
        params.epsilon = 1.0  # type: ignore[misc]
    assert spec.default_delta(1000) == pytest.approx(
        1000 ** -1.1 if name == "heterpoisson" else 1e-4)


@pytest.mark.parametrize("name", sorted(PARAMS))
@pytest.mark.parametrize("bad", [dict(epsilon=0.0), dict(epsilon=-2.0), dict(delta=0.0),
                                 dict(delta=1.0), dict(delta=1.5)])
def test_bad_privacy_parameters(name, bad):
    with pytest.raises(InvalidParameterError):
        PARAMS[name](**bad)


@pytest.mark.parametrize("bad", [dict(q_b=0.0), dict(q_b=1.01), dict(M=0.0), dict(M=0.99),
                                 dict(accounting="tight"), dict(backbone="mlp"),
                                 dict(test_fanout=-1)])
def test_bad_heterpoisson_parameters(bad):
    with pytest.raises(InvalidParameterError):
        node_dp_methods.HeterPoissonParams(**bad)


def _ctx(params, **data_kw) -> RunContext:
    return RunContext(config=None, params=params, data=toy_data(n=60, **data_kw), seed=3)


def test_dpmlp_method_runs_and_reports_executed_epsilon():
    result = get_method("dpmlp").fn(_ctx(node_dp_methods.DPMLPParams(epsilon=3.0, steps=4,
                                                                      batch_size=10)))
    assert isinstance(result, MethodResult)
    assert 0 < result.epsilon <= 3.0 and result.delta == pytest.approx(1 / 300)
    assert result.ledger["ledger"]["entries"][0]["count"] == 4
    assert result.privacy["accountant"] == "pld" and result.info["steps"] == 4
    assert {"test_accuracy", "val_accuracy", "test_macro_f1"} <= set(result.metrics)


def test_dpgnn_method_runs_inductive():
    params = node_dp_methods.DPGNNParams(epsilon=8.0, steps=3, batch_size=8, max_degree=2,
                                         hidden=8)
    result = get_method("dpgnn").fn(_ctx(params, inductive=True))
    assert result.epsilon <= 8.0 and result.info["setting"] == "inductive"


def test_heterpoisson_method_runs(monkeypatch):
    monkeypatch.setattr(_privacy, "new_accountant", CountingAccountant)
    monkeypatch.setattr(_privacy, "calibrate", lambda *a, **k: 2.5)
    params = node_dp_methods.HeterPoissonParams(epsilon=4.0, q_b=0.5, steps=3, hidden=8,
                                                backbone="gin")
    result = get_method("heterpoisson").fn(_ctx(params))
    assert result.epsilon == 3.0  # the stand-in accountant counts executed steps
    assert result.privacy["noise_multiplier"] == 2.5 and result.privacy["noise_std"] == 1.25
    assert "sigma" not in result.privacy
    assert result.delta == pytest.approx(60 ** -1.1)
    assert math.isfinite(result.metrics["test_accuracy"])
