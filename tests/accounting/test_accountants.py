"""The PLD and RDP accountants: one interface, pinned to dp_accounting, units enforced."""

import json
import math

import numpy as np
import pytest
from dp_accounting import dp_event
from dp_accounting.pld import pld_privacy_accountant
from dp_accounting.rdp import rdp_privacy_accountant
from hypothesis import given, settings
from hypothesis import strategies as st

from gnnprivacy.accounting import (EpsilonDeltaDpEvent, NeighboringRelation, PldAccountant,
                                   PrivacyUnit, RdpAccountant, ScopedDpEvent,
                                   UnsupportedEventError, dpgnn_event, dpsgd_event,
                                   heterpoisson_event, make_accountant, pure_dp_event,
                                   randomized_response_event, rdp_to_epsilon)
from gnnprivacy.errors import InvalidParameterError, PrivacyUnitMismatchError

DELTA = 1e-5


@pytest.mark.parametrize("q, z, steps", [(0.01, 1.1, 1000), (0.004, 1.1, 10_000), (1.0, 5.0, 10)])
def test_dpsgd_matches_dp_accounting(q, z, steps):
    event = dpsgd_event(sample_rate=q, noise_multiplier=z)
    ours_rdp = make_accountant("rdp").compose(event, steps).get_epsilon(DELTA)
    ref_rdp = rdp_privacy_accountant.RdpAccountant().compose(event, steps).get_epsilon(DELTA)
    assert ours_rdp == pytest.approx(ref_rdp, rel=1e-3)       # our order grid is a superset-ish
    assert ours_rdp <= ref_rdp * (1 + 1e-9) + 1e-9
    vdi = 1e-4
    ours_pld = make_accountant("pld", value_discretization_interval=vdi).compose(event, steps)
    ref_pld = pld_privacy_accountant.PLDAccountant(value_discretization_interval=vdi)
    ref_pld.compose(event, steps)
    assert ours_pld.get_epsilon(DELTA) == pytest.approx(ref_pld.get_epsilon(DELTA), rel=1e-9)
    assert ours_pld.get_delta(1.0) == pytest.approx(ref_pld.get_delta(1.0), rel=1e-9)
    assert ours_pld.get_epsilon(DELTA) <= ours_rdp             # PLD is the tighter analysis


def test_dpsgd_pinned_values():
    """Regression values (dp_accounting 0.6, independent of this package's code)."""
    event = dpsgd_event(sample_rate=0.01, noise_multiplier=1.1)
    assert make_accountant("rdp").compose(event, 1000).get_epsilon(DELTA) == pytest.approx(
        1.71177, abs=2e-4)
    pld = make_accountant("pld", value_discretization_interval=1e-4).compose(event, 1000)
    assert pld.get_epsilon(DELTA) == pytest.approx(1.51537, abs=2e-4)


def test_default_is_pld_and_interface():
    acc = make_accountant()
    assert isinstance(acc, PldAccountant) and acc.kind == "pld"
    assert acc.unit is PrivacyUnit.NODE and acc.relation is NeighboringRelation.ADD_OR_REMOVE
    assert acc.compose(dpsgd_event(sample_rate=0.1, noise_multiplier=2.0)) is acc
    rdp = make_accountant("rdp", unit="edge", relation="replace")
    assert isinstance(rdp, RdpAccountant) and rdp.unit is PrivacyUnit.EDGE
    assert rdp.relation is NeighboringRelation.REPLACE
    with pytest.raises(InvalidParameterError):
        make_accountant("moments")
    with pytest.raises(InvalidParameterError):
        make_accountant(unit="person")
    for kind in ("pld", "rdp"):
        empty = make_accountant(kind)
        assert empty.get_epsilon(DELTA) == 0.0 and empty.get_delta(0.0) == 0.0


@pytest.mark.parametrize("kind", ["pld", "rdp"])
def test_non_private_event_makes_epsilon_infinite(kind):
    acc = make_accountant(kind).compose(dpsgd_event(sample_rate=0.1, noise_multiplier=2.0), 10)
    assert math.isfinite(acc.get_epsilon(DELTA))
    acc.compose(dp_event.NonPrivateDpEvent())
    assert acc.get_epsilon(DELTA) == math.inf and acc.get_delta(100.0) == 1.0
    zero_noise = make_accountant(kind).compose(dp_event.GaussianDpEvent(0.0))
    assert zero_noise.get_epsilon(DELTA) == math.inf


@pytest.mark.parametrize("kind", ["pld", "rdp"])
def test_unit_and_relation_mismatch_raise(kind):
    node = make_accountant(kind, unit="node", relation="add_or_remove")
    label_event = ScopedDpEvent(dp_event.GaussianDpEvent(1.0), PrivacyUnit.LABEL)
    with pytest.raises(PrivacyUnitMismatchError, match="label"):
        node.compose(label_event)
    fixed = dpgnn_event(num_train=1000, batch_size=100, max_degree=3, noise_multiplier=1.0)
    with pytest.raises(PrivacyUnitMismatchError, match="replace"):
        node.compose(fixed)
    edge = make_accountant(kind, unit="edge")
    with pytest.raises(PrivacyUnitMismatchError):
        edge.compose(heterpoisson_event(q_b=0.1, M=1, max_out_degree=4, noise_multiplier=4.0))
    nested = dp_event.ComposedDpEvent([dp_event.GaussianDpEvent(1.0), label_event])
    with pytest.raises(PrivacyUnitMismatchError):
        node.compose(nested)
    assert len(node.ledger) == 0                    # refused events leave no trace
    node.compose(ScopedDpEvent(dp_event.GaussianDpEvent(1.0), PrivacyUnit.NODE))
    assert len(node.ledger) == 1


@settings(max_examples=15, deadline=None)
@given(unit=st.sampled_from(list(PrivacyUnit)), other=st.sampled_from(list(PrivacyUnit)),
       kind=st.sampled_from(["pld", "rdp"]))
def test_unit_mismatch_property(unit, other, kind):
    acc = make_accountant(kind, unit=unit, relation="replace")
    event = ScopedDpEvent(EpsilonDeltaDpEvent(0.5), other, NeighboringRelation.REPLACE)
    if unit is other:
        assert acc.compose(event).get_epsilon(0.0) == pytest.approx(0.5)
    else:
        with pytest.raises(PrivacyUnitMismatchError):
            acc.compose(event)


def test_unsupported_events_are_refused_before_recording():
    pld = make_accountant("pld")
    with pytest.raises(UnsupportedEventError, match="REPLACE"):
        pld.compose(dp_event.RandomizedResponseDpEvent(0.5, 4))        # needs replace
    rdp = make_accountant("rdp")
    with pytest.raises(UnsupportedEventError, match="delta"):
        rdp.compose(EpsilonDeltaDpEvent(1.0, 1e-6))                      # no RDP for approx DP
    paper = heterpoisson_event(q_b=0.1, M=1, max_out_degree=4, noise_multiplier=4.0, mode="paper")
    with pytest.raises(UnsupportedEventError, match="rdp"):
        pld.compose(paper)
    with pytest.raises(UnsupportedEventError):
        pld.compose(dp_event.UnsupportedDpEvent())
    with pytest.raises(InvalidParameterError):
        pld.compose("gaussian")
    with pytest.raises(InvalidParameterError):
        pld.compose(dp_event.GaussianDpEvent(1.0), count=-1)
    assert pld.ledger.total_count == 0 and pld.get_epsilon(DELTA) == 0.0


@settings(max_examples=8, deadline=None)
@given(n=st.integers(1, 25), q=st.floats(0.01, 0.5), z=st.floats(1.0, 4.0),
       kind=st.sampled_from(["pld", "rdp"]))
def test_composing_n_times_equals_count_n(n, q, z, kind):
    event = dpsgd_event(sample_rate=q, noise_multiplier=z)
    one_by_one = make_accountant(kind)
    for _ in range(n):
        one_by_one.compose(event)
    at_once = make_accountant(kind).compose(event, n)
    nested = make_accountant(kind).compose(dp_event.SelfComposedDpEvent(event, n))
    for delta in (1e-3, 1e-6):
        assert one_by_one.get_epsilon(delta) == at_once.get_epsilon(delta)
        assert nested.get_epsilon(delta) == at_once.get_epsilon(delta)
    assert one_by_one.ledger.entries == at_once.ledger.entries   # merged ledger entry


def test_count_n_positive_control():
    """The equality above is not vacuous: n and n+1 compositions differ."""
    event = dpsgd_event(sample_rate=0.1, noise_multiplier=1.0)
    a = make_accountant("pld").compose(event, 10)
    b = make_accountant("pld").compose(event, 11)
    assert a.get_epsilon(DELTA) < b.get_epsilon(DELTA)


@pytest.mark.parametrize("kind", ["pld", "rdp"])
def test_get_delta_inverts_get_epsilon(kind):
    acc = make_accountant(kind).compose(dpsgd_event(sample_rate=0.05, noise_multiplier=1.2), 200)
    eps = acc.get_epsilon(1e-6)
    assert acc.get_delta(eps) <= 1e-6 * (1 + 1e-6)
    assert acc.get_delta(eps * 0.9) > 1e-6


def test_pure_epsilon_composition_exact_sum_and_pld_tighter():
    events = [pure_dp_event(epsilon=0.5), pure_dp_event(epsilon=0.25)]
    for kind in ("pld", "rdp"):
        acc = make_accountant(kind, unit="feature", relation="replace")
        for event in events:
            acc.compose(event, 4)
        assert acc.get_epsilon(0.0) == pytest.approx(3.0, abs=1e-12)       # exact sum
        assert acc.get_delta(3.0) == 0.0
    pld = make_accountant("pld", relation="replace").compose(pure_dp_event(epsilon=0.1), 400)
    assert pld.get_epsilon(0.0) == pytest.approx(40.0)
    tight = pld.get_epsilon(1e-6)
    assert tight < 40.0 / 3                   # optimal composition beats the sum
    # optimal composition of k eps-DP mechanisms (Kairouz et al.) is at most
    # k eps (e^eps - 1)/(e^eps + 1) + eps sqrt(2 k ln(1/delta)).
    bound = 400 * 0.1 * math.expm1(0.1) / (math.exp(0.1) + 1) + 0.1 * math.sqrt(
        2 * 400 * math.log(1e6))
    assert tight <= bound


def test_randomized_response_pld_and_rdp_agree_on_pure_epsilon():
    event = randomized_response_event(epsilon=1.5, num_buckets=3)
    for kind in ("pld", "rdp"):
        acc = make_accountant(kind, relation="replace").compose(event, 2)
        assert acc.get_epsilon(0.0) == pytest.approx(3.0, rel=1e-12)
    pld = make_accountant("pld", relation="replace").compose(event, 2)
    assert pld.get_epsilon(1e-3) <= 3.0


def test_gaussian_and_laplace_multipliers_are_relative_to_the_relation_sensitivity():
    """Mechanisms state their sensitivity under their relation: same epsilon under both."""
    for event, reference in [(dp_event.GaussianDpEvent(2.0), None),
                             (dp_event.LaplaceDpEvent(0.5), 2.0)]:
        values = [make_accountant(kind, relation=relation).compose(event).get_epsilon(DELTA)
                  for kind in ("pld", "rdp") for relation in ("add_or_remove", "replace")]
        assert values[0] == pytest.approx(values[1], rel=1e-12)
        assert values[2] == pytest.approx(values[3], rel=1e-12)
        assert values[0] <= values[2] * (1 + 1e-9)
        if reference is not None:
            assert make_accountant("pld", relation="replace").compose(event).get_epsilon(
                0.0) == reference
    # dp_accounting's PLDAccountant doubles the shift under REPLACE_ONE: halve to match it
    ref = pld_privacy_accountant.PLDAccountant(
        pld_privacy_accountant.NeighborRel.REPLACE_ONE).compose(dp_event.GaussianDpEvent(2.0))
    ours = make_accountant("pld", relation="replace", value_discretization_interval=1e-4)
    assert ours.compose(dp_event.GaussianDpEvent(1.0)).get_epsilon(DELTA) == pytest.approx(
        ref.get_epsilon(DELTA), rel=1e-6)


def test_ledger_print_and_save(tmp_path):
    acc = make_accountant("pld")
    acc.compose(dpsgd_event(sample_rate=0.1, noise_multiplier=2.0), 3)
    acc.compose(heterpoisson_event(q_b=0.1, M=1, max_out_degree=8, noise_multiplier=4.0))
    acc.compose(heterpoisson_event(q_b=0.1, M=1, max_out_degree=8, noise_multiplier=4.0))
    text = str(acc.ledger)
    assert "unit=node" in text and "HeterPoisson(q_b=0.1" in text and "2 x" in text
    assert acc.ledger.total_count == 5 and len(acc.ledger) == 2
    path = acc.ledger.save(tmp_path / "ledger.json")
    data = json.loads(path.read_text())
    assert data["unit"] == "node" and data["entries"][0]["count"] == 3
    assert data["entries"][1]["event"] == "HeterPoissonDpEvent"
    record = json.loads(acc.save(tmp_path / "acc.json", delta=DELTA).read_text())
    assert record["accountant"] == "pld" and record["epsilon"] == pytest.approx(
        acc.get_epsilon(DELTA))
    assert "epsilon =" in acc.summary(delta=DELTA) and "PldAccountant(unit='node'" in repr(acc)
    composed = acc.ledger.as_dp_event()
    again = make_accountant("pld").compose(composed)
    assert again.get_epsilon(DELTA) == acc.get_epsilon(DELTA)


def test_input_validation_of_queries():
    acc = make_accountant("rdp").compose(dpsgd_event(sample_rate=0.1, noise_multiplier=2.0))
    with pytest.raises(InvalidParameterError):
        acc.get_epsilon(1.5)
    with pytest.raises(InvalidParameterError):
        acc.get_delta(-1.0)
    with pytest.raises(InvalidParameterError):
        RdpAccountant(orders=[0.5, 2.0])
    with pytest.raises(InvalidParameterError):
        RdpAccountant(conversion="tight")
    eps, order = acc.get_epsilon_and_order(DELTA)
    assert eps == acc.get_epsilon(DELTA) and order > 1


def test_mironov_conversion_is_looser():
    event = dpsgd_event(sample_rate=0.01, noise_multiplier=1.1)
    balle = make_accountant("rdp").compose(event, 1000).get_epsilon(DELTA)
    mironov = make_accountant("rdp", conversion="mironov").compose(event, 1000).get_epsilon(DELTA)
    assert mironov > balle
    orders = np.asarray(RdpAccountant().orders)
    rdp = make_accountant("rdp").compose(event, 1000).rdp()
    assert mironov == pytest.approx(np.min(rdp + math.log(1 / DELTA) / (orders - 1)))


def test_a4_rdp_to_dp_conversion_theorem_1():
    """000 §8 A4: Gaussian, sensitivity 1, sigma = 1, T = 1, delta = 1e-5."""
    assert rdp_to_epsilon([10.0], [10.0 / 2], 1e-5)[0] == pytest.approx(5.918011, abs=1e-6)
    orders = np.round(np.arange(1.02, 40.0, 0.01), 10)
    eps, order = rdp_to_epsilon(orders, orders / 2, 1e-5)
    assert eps == pytest.approx(4.7284, abs=1e-4) and order == pytest.approx(5.43, abs=0.01)
