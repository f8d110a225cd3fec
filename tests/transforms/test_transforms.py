"""Privatising PyG transforms (issue 25): compose with T.Compose, carry what ran, reuse the
functional code paths (same seed, same release)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch_geometric.transforms as T
from torch_geometric.data import Data

from gnnprivacy.errors import InvalidParameterError, UnknownNameError
from gnnprivacy.ldp.heterorr.pipeline import release
from gnnprivacy.transforms import (EdgeRand, EdgeRR, FeatureLDP, FeatureRR, LapGraph,
                                   PrivatizingTransform, edge_rand, lap_graph, privacy_spent)


def _data(n=60, d=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    ei = torch.randint(0, n, (2, 4 * n), generator=g)
    y = torch.randint(0, 3, (n,), generator=g)
    mask = torch.zeros(n, dtype=torch.bool)
    mask[: n // 2] = True
    return Data(x=torch.rand(n, d, generator=g), y=y, edge_index=ei, train_mask=mask,
                num_classes=3)


def test_compose_runs_and_reports_its_epsilon_per_unit():
    data = _data()
    before = data.edge_index.clone(), data.x.clone()
    pipeline = T.Compose([T.ToUndirected(), EdgeRand(epsilon=1.0, generator=0),
                          T.NormalizeFeatures(), FeatureRR(epsilon=2.0, generator=1)])
    out = pipeline(data)
    assert privacy_spent(out) == {"edge": 1.0, "feature": 2.0}
    assert privacy_spent(pipeline) == privacy_spent(out)        # planned = executed
    assert not torch.equal(out.edge_index, before[0]) and not torch.equal(out.x, before[1])
    # the input is untouched and carries no events
    assert torch.equal(data.edge_index, before[0]) and torch.equal(data.x, before[1])
    assert privacy_spent(data) == {}
    # a second pass over the released graph adds its cost (events travel with the data)
    again = pipeline(out)
    assert privacy_spent(again) == {"edge": 2.0, "feature": 4.0}
    assert len(again.privacy_events) == 4


def test_one_unit_composes_lapgraph_and_edgerr():
    spent = privacy_spent([LapGraph(epsilon=4.0, count_share=0.1), EdgeRR(epsilon=1.5)])
    assert spent == {"edge": 5.5}
    assert privacy_spent(LapGraph(epsilon=4.0), delta=1e-5)["edge"] < 4.0


@pytest.mark.parametrize("cls, fn, kw", [(EdgeRand, edge_rand, {}),
                                         (LapGraph, lap_graph, {"count_share": 0.2})])
def test_edge_transforms_are_the_functional_release(cls, fn, kw):
    data = _data()
    out = cls(epsilon=2.0, generator=7, **kw)(data)
    ref = fn(data.edge_index, data.num_nodes, epsilon=2.0, generator=np.random.default_rng(7),
             **kw)
    assert torch.equal(out.edge_index, ref)


@pytest.mark.parametrize("mechanism", ["piecewise", "duchi", "multibit"])
def test_feature_ldp_is_heterorrs_baseline(mechanism):
    data = _data()
    out = FeatureLDP(mechanism, epsilon=3.0, generator=11)(data)
    rel = release(data, feature_method=mechanism, edge_method="clean", eps_f=3.0,
                  seed_for=lambda purpose: 11)
    torch.testing.assert_close(out.x, rel.data.x)
    assert privacy_spent(out) == {"feature": 3.0}
    assert rel.privacy["epsilon_features"] == pytest.approx(3.0)


def test_feature_rr_is_heterorrs_featurerr():
    data = _data()
    out = FeatureRR(epsilon=2.0, generator=5)(data)
    rel = release(data, feature_method="featurerr", edge_method="clean", eps_f=2.0,
                  score_source="uniform", seed_for=lambda purpose: 5)
    torch.testing.assert_close(out.x, rel.data.x)
    raw = FeatureRR(epsilon=2.0, generator=5, center=False)(data)
    torch.testing.assert_close(raw.x - 0.55, out.x)


def test_edge_rr_keeps_public_edges_and_records_the_guarantee():
    data = T.ToUndirected()(_data())
    t = EdgeRR(epsilon=2.0, private_edge_frac=0.5, mcmc_steps=300, generator=3)
    out = t(data)
    assert t.info_["guarantee"] == "asymptotic" and t.info_["num_private_edges"] > 0
    assert privacy_spent(out) == {"edge": 2.0}
    assert out.edge_index.size(1) > 0 and torch.equal(out.x, data.x)


def test_seeded_transforms_repeat_and_fresh_calls_differ():
    data = _data()
    a, b = EdgeRand(epsilon=1.0, generator=4), EdgeRand(epsilon=1.0, generator=4)
    first = a(data).edge_index
    assert torch.equal(first, b(data).edge_index)
    assert not torch.equal(first, a(data).edge_index)      # a second release draws anew


def test_a_transform_that_forgets_its_events_is_caught():
    # positive control: planned and executed costs disagree when a release drops its events
    class Forgetful(EdgeRand):
        def _release(self, data):
            data, _ = super()._release(data)
            return data, ()

    t = Forgetful(epsilon=1.0, generator=0)
    assert isinstance(t, PrivatizingTransform)
    assert privacy_spent(t(_data())) != privacy_spent(t)


def test_bad_inputs_name_the_parameter():
    with pytest.raises(InvalidParameterError, match="epsilon"):
        EdgeRand(epsilon=0.0)
    with pytest.raises(InvalidParameterError, match="epsilon"):
        FeatureRR(epsilon=float("inf"))
    with pytest.raises(UnknownNameError, match="piecewise"):
        FeatureLDP("gaussian", epsilon=1.0)
    with pytest.raises(InvalidParameterError, match="data.x"):
        FeatureRR(epsilon=1.0)(Data(edge_index=torch.zeros(2, 0, dtype=torch.long), num_nodes=3))
    with pytest.raises(InvalidParameterError, match="Compose"):
        privacy_spent(42)
    assert repr(FeatureLDP("duchi", epsilon=1.0)) == "FeatureLDP(mechanism='duchi', epsilon=1.0)"
