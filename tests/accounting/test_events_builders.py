"""Events and builders: validation at the boundary, immutability, scope, serialisation."""

import json

import attr
import numpy as np
import pytest
from dp_accounting import dp_event

from gnnprivacy.accounting import (DpGnnDpEvent, EpsilonDeltaDpEvent,
                                   NeighboringRelation, PrivacyUnit, ScopedDpEvent,
                                   declared_scope, dpgnn_event, dpsgd_event, event_to_dict,
                                   gaussian_event, heterpoisson_event, laplace_event,
                                   pure_dp_event, randomized_response_event, resolve_scope)
from gnnprivacy.accounting.heterpoisson import (covering_degrees, shift_distribution,
                                                truncate_upper_tail)
from gnnprivacy.errors import InvalidParameterError


def test_dpsgd_event_is_poisson_sampled_gaussian():
    event = dpsgd_event(sample_rate=0.01, noise_multiplier=1.1)
    assert event == dp_event.PoissonSampledDpEvent(0.01, dp_event.GaussianDpEvent(1.1))


@pytest.mark.parametrize("kwargs, name", [
    ({"sample_rate": 0.0, "noise_multiplier": 1.0}, "sample_rate"),
    ({"sample_rate": 1.5, "noise_multiplier": 1.0}, "sample_rate"),
    ({"sample_rate": 0.1, "noise_multiplier": 0.0}, "noise_multiplier"),
    ({"sample_rate": 0.1, "noise_multiplier": float("nan")}, "noise_multiplier"),
])
def test_dpsgd_event_rejects_bad_parameters(kwargs, name):
    with pytest.raises(InvalidParameterError) as info:
        dpsgd_event(**kwargs)
    assert info.value.name == name and name in str(info.value)


def test_heterpoisson_event_covering_set_and_exact_degrees():
    event = heterpoisson_event(q_b=0.2, M=2, max_out_degree=22469, noise_multiplier=8.0)
    assert event.degrees == covering_degrees(22469)
    assert event.degrees[:5] == (0, 1, 2, 4, 8) and event.degrees[-1] == 22469
    assert event.max_degree == 22469 and event.mode == "sound" and event.overlap_removal
    exact = heterpoisson_event(q_b=0.2, M=2, out_degrees=np.array([3, 1, 3, 7]),
                               noise_multiplier=8.0)
    assert exact.degrees == (1, 3, 7)


@pytest.mark.parametrize("kwargs, name", [
    ({"q_b": 0.0}, "q_b"), ({"M": -1.0}, "M"), ({"noise_multiplier": -2.0}, "noise_multiplier"),
    ({"mode": "tight"}, "mode"), ({"max_out_degree": -1}, "max_out_degree"),
    ({"max_out_degree": None}, "max_out_degree"),
    ({"max_out_degree": None, "out_degrees": [1.5]}, "out_degrees"),
    ({"out_degrees": [1, 2]}, "max_out_degree"),
])
def test_heterpoisson_event_rejects_bad_parameters(kwargs, name):
    base = {"q_b": 0.2, "M": 2.0, "noise_multiplier": 4.0, "max_out_degree": 10}
    base.update(kwargs)
    with pytest.raises(InvalidParameterError) as info:
        heterpoisson_event(**base)
    assert info.value.name == name


def test_dpgnn_event_validation():
    event = dpgnn_event(num_train=100, batch_size=10, max_degree=3, noise_multiplier=1.0)
    assert event == DpGnnDpEvent(100, 3, 10, 1.0, "fixed")
    for kwargs, name in [({"batch_size": 101}, "batch_size"), ({"max_degree": 100}, "max_degree"),
                         ({"sampling": "shuffle"}, "sampling"), ({"num_train": 0}, "num_train")]:
        base = {"num_train": 100, "batch_size": 10, "max_degree": 3, "noise_multiplier": 1.0}
        base.update(kwargs)
        with pytest.raises(InvalidParameterError) as info:
            dpgnn_event(**base)
        assert info.value.name == name


def test_simple_builders():
    assert gaussian_event(noise_multiplier=2.0) == dp_event.GaussianDpEvent(2.0)
    assert laplace_event(noise_multiplier=0.5) == dp_event.LaplaceDpEvent(0.5)
    rr = randomized_response_event(epsilon=1.0, num_buckets=4)
    keep = 1 - rr.noise_parameter + rr.noise_parameter / 4          # P[report the truth]
    assert keep == pytest.approx(np.e / (np.e + 3))                  # GRR, 004 §3.1
    assert pure_dp_event(epsilon=0.5) == EpsilonDeltaDpEvent(0.5, 0.0)
    with pytest.raises(InvalidParameterError):
        pure_dp_event(epsilon=float("inf"))
    with pytest.raises(InvalidParameterError):
        randomized_response_event(epsilon=1.0, num_buckets=1)


def test_events_are_frozen_and_hashable():
    event = heterpoisson_event(q_b=0.2, M=2, max_out_degree=10, noise_multiplier=4.0)
    with pytest.raises(attr.exceptions.FrozenInstanceError):
        event.noise_multiplier = 1.0
    assert hash(event) == hash(heterpoisson_event(q_b=0.2, M=2, max_out_degree=10,
                                                  noise_multiplier=4.0))
    named = event.to_named_tuple()                 # dp_accounting's serialisation hook
    assert named.class_name == "HeterPoissonDpEvent" and named.degrees == event.degrees


def test_declared_scope():
    hp = heterpoisson_event(q_b=0.2, M=2, max_out_degree=10, noise_multiplier=4.0)
    assert declared_scope(hp) == [(PrivacyUnit.NODE, NeighboringRelation.ADD_OR_REMOVE)]
    fixed = dpgnn_event(num_train=100, batch_size=10, max_degree=3, noise_multiplier=1.0)
    assert declared_scope(fixed) == [(PrivacyUnit.NODE, NeighboringRelation.REPLACE)]
    poisson = dpgnn_event(num_train=100, batch_size=10, max_degree=3, noise_multiplier=1.0,
                          sampling="poisson")
    assert declared_scope(poisson) == [(PrivacyUnit.NODE, None)]
    scoped = ScopedDpEvent(dp_event.GaussianDpEvent(1.0), PrivacyUnit.LABEL)
    composed = dp_event.ComposedDpEvent([scoped, dp_event.SelfComposedDpEvent(hp, 3)])
    assert declared_scope(composed) == [(PrivacyUnit.LABEL, None),
                                        (PrivacyUnit.NODE, NeighboringRelation.ADD_OR_REMOVE)]
    assert declared_scope(dp_event.GaussianDpEvent(1.0)) == []
    assert resolve_scope(dp_event.GaussianDpEvent(1.0)) == (PrivacyUnit.NODE,
                                                            NeighboringRelation.ADD_OR_REMOVE)
    assert resolve_scope(fixed) == (PrivacyUnit.NODE, NeighboringRelation.REPLACE)


def test_event_to_dict_is_json_able():
    event = dp_event.ComposedDpEvent([
        heterpoisson_event(q_b=0.2, M=2, max_out_degree=10, noise_multiplier=4.0),
        ScopedDpEvent(EpsilonDeltaDpEvent(1.0), PrivacyUnit.FEATURE, NeighboringRelation.REPLACE)])
    data = json.loads(json.dumps(event_to_dict(event)))
    assert data["event"] == "ComposedDpEvent"
    assert data["events"][0]["degrees"] == [0, 1, 2, 4, 8, 10]
    assert data["events"][1]["unit"] == "feature" and data["events"][1]["event"]["epsilon"] == 1.0


def test_shift_distribution_matches_theorem_2():
    shifts, log_w = shift_distribution(0.3, 2.0, 5)
    weights = np.exp(log_w)
    assert weights.sum() == pytest.approx(1.0, abs=1e-12)
    p = 0.3 * 2.0 / 5
    assert weights[shifts == 1.0][0] == pytest.approx(0.3)                # central, shift R
    k = 2
    binom = 10 * p ** 2 * (1 - p) ** 3
    assert weights[shifts == 2.0 * k][0] == pytest.approx(0.7 * binom)    # k peripherals, 2kR
    capped, _ = shift_distribution(0.3, 4.0, 2)                           # M > D: p capped at q_b
    assert np.exp(_)[capped == 4.0][0] == pytest.approx(0.7 * 0.3 ** 2)
    no_overlap, log_w2 = shift_distribution(0.3, 2.0, 5, overlap_removal=False)
    assert np.exp(log_w2).sum() == pytest.approx(1.0)
    assert np.exp(log_w2)[no_overlap == 5.0][0] == pytest.approx(0.3 * binom)  # 2k+1, k = 2
    zero_shifts, zero_w = shift_distribution(0.3, 2.0, 0)
    assert zero_shifts.tolist() == [0.0, 1.0]
    assert np.exp(zero_w).tolist() == pytest.approx([0.7, 0.3])


def test_truncate_upper_tail_reports_dropped_mass():
    shifts, log_w = shift_distribution(0.2, 2.0, 1000)
    kept, weights, dropped = truncate_upper_tail(shifts, log_w, 1e-12)
    full = np.exp(log_w)
    assert weights.sum() == pytest.approx(1.0)
    assert dropped == pytest.approx(full[len(kept):].sum(), rel=1e-9)
    assert 0 < dropped <= 1e-12 and len(kept) < 40
