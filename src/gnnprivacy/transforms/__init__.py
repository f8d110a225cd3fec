"""PyG transforms that privatise a graph; each carries its privacy event.

Every class is a ``torch_geometric.transforms.BaseTransform``, so it composes with
``T.Compose`` and PyG's public transforms. A released ``Data`` carries the events of the
transforms that ran on it (``data.privacy_events``) and `privacy_spent` reports its epsilon,
one figure per privacy unit:

    import torch_geometric.transforms as T
    from gnnprivacy.transforms import EdgeRand, FeatureRR, privacy_spent

    pipeline = T.Compose([T.ToUndirected(), EdgeRand(epsilon=1.0), FeatureRR(epsilon=2.0)])
    released = pipeline(data)
    privacy_spent(released)           # {'edge': 1.0, 'feature': 2.0}

* edges (unit ``EDGE``): `EdgeRand`, `LapGraph` (LinkTeller's baselines), `EdgeRR`
  (HeteroRR's private-edge release);
* features (unit ``FEATURE``, local DP): `FeatureRR` (HeteroRR), `FeatureLDP` (Duchi,
  piecewise, hybrid, three-output, PM-SUB, multi-bit).

The functional forms (`edge_rand`, `lap_graph`) take an ``edge_index`` and return one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gnnprivacy._lazy import lazy_exports

if TYPE_CHECKING:
    from gnnprivacy.transforms.base import EVENTS_KEY, PrivatizingTransform, privacy_spent
    from gnnprivacy.mechanisms.edge_dp import (edge_rand, edge_rand_events, lap_graph,
                                               lap_graph_events)
    from gnnprivacy.transforms.edges import EdgeRand, EdgeRR, LapGraph
    from gnnprivacy.transforms.features import FEATURE_LDP_MECHANISMS, FeatureLDP, FeatureRR

__all__ = ["EVENTS_KEY", "EdgeRR", "EdgeRand", "FEATURE_LDP_MECHANISMS", "FeatureLDP",
           "FeatureRR", "LapGraph", "PrivatizingTransform", "edge_rand", "edge_rand_events",
           "lap_graph", "lap_graph_events", "privacy_spent"]

__getattr__, __dir__ = lazy_exports(__name__, __file__, globals())
