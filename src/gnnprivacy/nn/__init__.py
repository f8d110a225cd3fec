"""Neural-network building blocks (models only, no training loops).

* GNN encoders wrapping PyG's models (GCN, GraphSAGE, GIN, GAT) and an MLP:
  `build_encoder`, `Encoder`;
* the one-layer star GNNs of HeterPoisson training: `StarGNN`, `star_aggregate`;
* DP-GNN's one-layer GCN on degree-bounded subgraphs: `OneLayerGCN`, `IndexedLinear`;
* GAP's model pieces: `bound_degree`, `gap_sensitivity`, `gap_event` (its noisy aggregation
  and trainer are in `gnnprivacy.training.gap`).

Everything but `ACTIVATIONS` loads on first use (PyG is imported then).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gnnprivacy._lazy import lazy_exports
from gnnprivacy.nn.activations import ACTIVATIONS

if TYPE_CHECKING:
    from gnnprivacy.nn.dpgnn import IndexedLinear, OneLayerGCN, row_grams
    from gnnprivacy.nn.encoders import (SPARSE_INPUT_ENCODERS, Encoder, build_encoder,
                                        list_encoders, register_encoder)
    from gnnprivacy.nn.gap import bound_degree, gap_event, gap_sensitivity
    from gnnprivacy.nn.star import AGGREGATORS, SelfScale, StarGNN, neighbor_sum, star_aggregate

__all__ = ["ACTIVATIONS", "AGGREGATORS", "Encoder", "IndexedLinear", "OneLayerGCN",
           "SPARSE_INPUT_ENCODERS", "SelfScale", "StarGNN", "bound_degree", "build_encoder",
           "gap_event", "gap_sensitivity", "list_encoders", "neighbor_sum",
           "register_encoder", "row_grams", "star_aggregate"]

__getattr__, __dir__ = lazy_exports(__name__, __file__, globals())
